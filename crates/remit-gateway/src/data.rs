//! The gateway's data sets as files: the two formats a bulk load (`POST /admin/v1/data/load`, `remit admin data
//! load`) and a bundle's `data/` files are written in, read into [`Record`]s, and how records are written into a
//! store transaction. docs/gateway.md "Data sets" is the reference.
//!
//! Knows the store only through [`Tx`]; nothing of HTTP or the core. A file is read whole before anything is
//! written: a bad record refuses the whole load, named by its line.
//!
//! **JSON**: an array of records (pretty-printed or not), or JSON Lines (one record a line); strict JSON
//! (docs/json.md: no duplicate keys), each record an object with exactly these members:
//! - `{"type": T, "id": ID, "attributes": {…}}`: an entity (its attributes replace what the same origin kept);
//! - `{"relation": R, "args": [A, B]}`: a tuple of relation `R` (not `holiday`);
//! - `{"calendar": C, "holiday": "YYYY-MM-DD"}`: a holiday of calendar `C` (the tuple `holiday(C, DATE)`).
//!
//! **CSV** (RFC 4180 quoting: a field in `"…"` may hold commas, line breaks and `""` for a quote; no header; blank
//! lines and lines starting with `#` skipped), the first field saying what a row is:
//! - `entity,TYPE,ID,ATTRIBUTE,VALUE`: one attribute of an entity (an entity's rows together are its attributes;
//!   `entity,TYPE,ID` alone an entity without any). VALUE is a string as written; an ATTRIBUTE ending in `:json`
//!   (`roles:json`) takes VALUE as a JSON text (`["admin","editor"]`, `42`, `true`), so that `1234` is never a
//!   number by accident;
//! - `relation,R,A,B`: a tuple;
//! - `holiday,CALENDAR,YYYY-MM-DD`: a holiday.

use serde_json::{Map, Value as Json};

use crate::store::{StoreResult, Tx, HOLIDAY_RELATION};

/// One row of a data set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Entity { kind: String, id: String, attributes: Map<String, Json> },
    Tuple { relation: String, a: String, b: String },
    Holiday { calendar: String, date: String },
}

/// How many records of each kind a load wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    pub entities: u64,
    pub tuples: u64,
    pub holidays: u64,
}

/// A data file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
}

impl Format {
    /// `json` or `csv` (what `?format=` and `--format` say).
    pub fn parse(text: &str) -> Result<Format, String> {
        match text {
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            other => Err(format!("`{other}` is not a data format: `json` or `csv`")),
        }
    }

    /// The format of a file named `name` (`.json`, `.jsonl` or `.csv`).
    pub fn of_file(name: &str) -> Option<Format> {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".json") || lower.ends_with(".jsonl") {
            Some(Format::Json)
        } else if lower.ends_with(".csv") {
            Some(Format::Csv)
        } else {
            None
        }
    }
}

/// Reads a data file whole; the error names the line of the first bad record.
pub fn parse(bytes: &[u8], format: Format) -> Result<Vec<Record>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        format!("line {line}: not UTF-8")
    })?;
    match format {
        Format::Json => parse_json(text),
        Format::Csv => parse_csv(text),
    }
}

/// The line (from 1) of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset].iter().filter(|&&b| b == b'\n').count() + 1
}

fn parse_json(text: &str) -> Result<Vec<Record>, String> {
    let start = text.len() - text.trim_start().len();
    let slices = match text.as_bytes().get(start) {
        Some(b'[') => array_elements(text, start)?,
        Some(b'{') => {
            // JSON Lines: each line that is not blank is one record.
            let mut offset = 0;
            let mut slices = Vec::new();
            for line in text.split_inclusive('\n') {
                if !line.trim().is_empty() {
                    slices.push((offset, line));
                }
                offset += line.len();
            }
            slices
        }
        None => return Ok(Vec::new()),
        Some(_) => return Err(format!("line {}: a JSON data file is an array of records", line_of(text, start))),
    };
    let mut records = Vec::with_capacity(slices.len());
    for (offset, slice) in slices {
        let line = line_of(text, offset);
        let value = remit_lang::json::parse(slice.as_bytes()).map_err(|e| format!("line {line}: {e}"))?;
        records.push(json_record(&value).map_err(|e| format!("line {line}: {e}"))?);
    }
    Ok(records)
}

/// The elements of the JSON array starting at byte `start`, each with its byte offset (each checked by the JSON
/// parser afterwards; this only finds where one ends: strings, escapes and nesting).
fn array_elements(text: &str, start: usize) -> Result<Vec<(usize, &str)>, String> {
    let bytes = text.as_bytes();
    let mut elements = Vec::new();
    let mut i = start + 1;
    let skip_space = |mut i: usize| {
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i
    };
    i = skip_space(i);
    if bytes.get(i) == Some(&b']') {
        i += 1;
    } else {
        loop {
            let begin = i;
            let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
            while i < bytes.len() {
                let b = bytes[i];
                if in_string {
                    match (escaped, b) {
                        (true, _) => escaped = false,
                        (false, b'\\') => escaped = true,
                        (false, b'"') => in_string = false,
                        _ => {}
                    }
                } else {
                    match b {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' if depth > 0 => depth -= 1,
                        b',' | b']' if depth == 0 => break,
                        _ => {}
                    }
                }
                i += 1;
            }
            if i >= bytes.len() {
                return Err(format!("line {}: the array does not end", line_of(text, begin)));
            }
            elements.push((begin, &text[begin..i]));
            let end = bytes[i];
            i = skip_space(i + 1);
            if end == b']' {
                break;
            }
        }
    }
    let rest = skip_space(i);
    if rest < bytes.len() {
        return Err(format!("line {}: something follows the array", line_of(text, rest)));
    }
    Ok(elements)
}

fn json_record(value: &Json) -> Result<Record, String> {
    let Json::Object(object) = value else { return Err("a record is a JSON object".into()) };
    let text = |key: &str| -> Result<String, String> {
        match object.get(key) {
            Some(Json::String(s)) => non_empty(s, key),
            Some(_) => Err(format!("`{key}` must be a string")),
            None => Err(format!("`{key}` is missing")),
        }
    };
    let only = |keys: &[&str]| -> Result<(), String> {
        match object.keys().find(|k| !keys.contains(&k.as_str())) {
            Some(extra) => Err(format!("unknown member `{extra}` (a record has {})", keys.join(", "))),
            None => Ok(()),
        }
    };
    if object.contains_key("type") {
        only(&["type", "id", "attributes"])?;
        let attributes = match object.get("attributes") {
            Some(Json::Object(map)) => map.clone(),
            None => Map::new(),
            Some(_) => return Err("`attributes` must be an object".into()),
        };
        Ok(Record::Entity { kind: text("type")?, id: text("id")?, attributes })
    } else if object.contains_key("relation") {
        only(&["relation", "args"])?;
        let relation = relation_name(&text("relation")?)?;
        let args = match object.get("args") {
            Some(Json::Array(args)) => args,
            _ => return Err("`args` must be an array of two strings".into()),
        };
        match args.as_slice() {
            [Json::String(a), Json::String(b)] => {
                Ok(Record::Tuple { relation, a: non_empty(a, "args")?, b: non_empty(b, "args")? })
            }
            _ => Err("`args` must be an array of two strings".into()),
        }
    } else if object.contains_key("calendar") {
        only(&["calendar", "holiday"])?;
        Ok(Record::Holiday { calendar: text("calendar")?, date: date(&text("holiday")?)? })
    } else {
        Err("a record has `type` (an entity), `relation` (a tuple) or `calendar` (a holiday)".into())
    }
}

fn non_empty(text: &str, what: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err(format!("`{what}` must not be empty"));
    }
    Ok(text.to_string())
}

/// A relation a tuple may name: not `holiday`, whose tuples are written as holidays.
pub fn relation_name(name: &str) -> Result<String, String> {
    if name == HOLIDAY_RELATION {
        return Err(format!("`{HOLIDAY_RELATION}` tuples are written as holidays (`calendar`, `holiday`)"));
    }
    non_empty(name, "relation")
}

/// A date `YYYY-MM-DD` the calendar has.
pub fn date(text: &str) -> Result<String, String> {
    let bad = || format!("`{text}` is not a date `YYYY-MM-DD`");
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let digits = |range: std::ops::Range<usize>| -> Result<u32, String> {
        let part = &text[range];
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if day == 0 || day > days {
        return Err(bad());
    }
    Ok(text.to_string())
}

/// Hands each CSV row of `text` to `each`, with the line it starts on (one row at a time: a file of a million rows
/// is never held as rows and records at once).
fn csv_rows(text: &str, each: &mut dyn FnMut(usize, Vec<String>) -> Result<(), String>) -> Result<(), String> {
    let mut chars = text.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let start = line;
        // A comment or a blank line.
        if chars.peek() == Some(&'#') {
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
            line += 1;
            continue;
        }
        let mut fields = vec![String::new()];
        let mut quoted_field = false;
        loop {
            match chars.next() {
                None => break,
                Some('\n') => {
                    line += 1;
                    break;
                }
                Some('\r') if chars.peek() == Some(&'\n') => {}
                Some(',') => {
                    fields.push(String::new());
                    quoted_field = false;
                }
                Some('"') if fields.last().is_some_and(String::is_empty) && !quoted_field => {
                    quoted_field = true;
                    let field = fields.last_mut().expect("a field");
                    loop {
                        match chars.next() {
                            None => return Err(format!("line {start}: a quoted field does not end")),
                            Some('"') if chars.peek() == Some(&'"') => {
                                chars.next();
                                field.push('"');
                            }
                            Some('"') => break,
                            Some(c) => {
                                line += usize::from(c == '\n');
                                field.push(c);
                            }
                        }
                    }
                    if !matches!(chars.peek(), None | Some(',') | Some('\n') | Some('\r')) {
                        return Err(format!("line {line}: text after a quoted field"));
                    }
                }
                Some(c) => {
                    if quoted_field {
                        return Err(format!("line {line}: text after a quoted field"));
                    }
                    fields.last_mut().expect("a field").push(c);
                }
            }
        }
        let blank = fields.len() == 1 && fields[0].trim().is_empty() && !quoted_field;
        if !blank {
            each(start, fields)?;
        }
    }
    Ok(())
}

fn parse_csv(text: &str) -> Result<Vec<Record>, String> {
    let mut records: Vec<Record> = Vec::new();
    // Where each entity's record is, so that its later rows add to it.
    let mut entities: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    csv_rows(text, &mut |line, fields| {
        let at = |e: String| format!("line {line}: {e}");
        let field = |i: usize, what: &str| non_empty(&fields[i], what).map_err(at);
        match (fields[0].as_str(), fields.len()) {
            ("entity", 3 | 5) => {
                let (kind, id) = (field(1, "type")?, field(2, "id")?);
                let index = *entities.entry((kind.clone(), id.clone())).or_insert_with(|| {
                    records.push(Record::Entity { kind, id, attributes: Map::new() });
                    records.len() - 1
                });
                if fields.len() == 5 {
                    let name = field(3, "attribute")?;
                    let (name, value) = match name.strip_suffix(":json") {
                        Some(name) => {
                            let value = remit_lang::json::parse(fields[4].as_bytes())
                                .map_err(|e| at(format!("the value of `{name}:json` is not JSON: {e}")))?;
                            (non_empty(name, "attribute").map_err(at)?, value)
                        }
                        None => (name, Json::String(fields[4].clone())),
                    };
                    let Record::Entity { attributes, .. } = &mut records[index] else { unreachable!("an entity") };
                    if attributes.insert(name.clone(), value).is_some() {
                        return Err(at(format!("attribute `{name}` given twice")));
                    }
                }
            }
            ("relation", 4) => {
                let relation = relation_name(&field(1, "relation")?).map_err(at)?;
                records.push(Record::Tuple { relation, a: field(2, "a")?, b: field(3, "b")? });
            }
            ("holiday", 3) => {
                records.push(Record::Holiday { calendar: field(1, "calendar")?, date: date(&fields[2]).map_err(at)? });
            }
            (kind @ ("entity" | "relation" | "holiday"), n) => {
                let shape = match kind {
                    "entity" => "`entity,TYPE,ID,ATTRIBUTE,VALUE` (or `entity,TYPE,ID`)",
                    "relation" => "`relation,R,A,B`",
                    _ => "`holiday,CALENDAR,YYYY-MM-DD`",
                };
                return Err(at(format!("{n} fields: a row is {shape}")));
            }
            (other, _) => {
                return Err(at(format!("`{other}`: a row starts with `entity`, `relation` or `holiday`")));
            }
        }
        Ok(())
    })?;
    Ok(records)
}

/// Writes `records` under `origin` in `tx` (an entity's attributes replacing what the origin kept for it).
pub fn write(tx: &mut dyn Tx, origin: &str, records: &[Record]) -> StoreResult<Counts> {
    let mut counts = Counts::default();
    for record in records {
        match record {
            Record::Entity { kind, id, attributes } => {
                tx.put_entity(origin, kind, id, Some(attributes))?;
                counts.entities += 1;
            }
            Record::Tuple { relation, a, b } => {
                tx.set_tuple(origin, relation, a, b, true)?;
                counts.tuples += 1;
            }
            Record::Holiday { calendar, date } => {
                tx.set_tuple(origin, HOLIDAY_RELATION, calendar, date, true)?;
                counts.holidays += 1;
            }
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_arrays_and_lines_read_the_same_records() {
        let array = "[\n  {\"type\": \"todo\", \"id\": \"t1\", \"attributes\": {\"owner\": \"alice\"}},\n  \
                     {\"relation\": \"member_of\", \"args\": [\"alice\", \"team:x\"]},\n  \
                     {\"calendar\": \"office\", \"holiday\": \"2026-12-25\"}\n]\n";
        let lines = "{\"type\": \"todo\", \"id\": \"t1\", \"attributes\": {\"owner\": \"alice\"}}\n\
                     {\"relation\": \"member_of\", \"args\": [\"alice\", \"team:x\"]}\n\n\
                     {\"calendar\": \"office\", \"holiday\": \"2026-12-25\"}\n";
        let records = parse(array.as_bytes(), Format::Json).unwrap();
        assert_eq!(records, parse(lines.as_bytes(), Format::Json).unwrap());
        assert_eq!(records.len(), 3);
        assert_eq!(parse(b"[]", Format::Json).unwrap(), vec![]);
        assert_eq!(parse(b"  ", Format::Json).unwrap(), vec![]);
    }

    #[test]
    fn a_bad_json_record_is_named_by_its_line() {
        let cases = [
            ("[\n{\"type\": \"t\", \"id\": \"a\"},\n{\"type\": \"t\", \"id\": 1}\n]", "line 3: `id` must be a string"),
            ("[\n{\"relation\": \"r\", \"args\": [\"a\"]}]", "line 2: `args` must be an array of two strings"),
            ("[{\"calendar\": \"c\", \"holiday\": \"2026-02-29\"}]", "line 1: `2026-02-29` is not a date"),
            ("[\n\n{\"relation\": \"holiday\", \"args\": [\"c\", \"d\"]}]", "line 3: `holiday` tuples"),
            ("[{\"type\": \"t\", \"id\": \"a\", \"owner\": \"x\"}]", "line 1: unknown member `owner`"),
            ("[{\"type\": \"t\", \"id\": \"a\", \"id\": \"b\"}]", "line 1:"),
            ("[{\"type\": \"t\", \"id\": \"a\"}", "line 1: the array does not end"),
            ("{\"type\": \"t\", \"id\": \"a\"}\n{\"type\": \"t\"}\n", "line 2: `id` is missing"),
            ("[{\"type\": \"t\", \"id\": \"a\"}] x", "line 1: something follows"),
        ];
        for (text, expected) in cases {
            let error = parse(text.as_bytes(), Format::Json).unwrap_err();
            assert!(error.starts_with(expected), "{text:?}: {error}");
        }
    }

    #[test]
    fn csv_rows_build_entities_tuples_and_holidays() {
        let text = "# owners\nentity,todo,t1,owner,alice\r\nentity,todo,t1,roles:json,\"[\"\"a\"\",\"\"b\"\"]\"\n\
                    entity,todo,t2,owner,1234\nentity,user,bob\n\nrelation,member_of,alice,\"team:x, y\"\n\
                    holiday,office,2028-02-29\nentity,todo,t2,note,\"two\nlines\"\n";
        let records = parse(text.as_bytes(), Format::Csv).unwrap();
        let t1 = serde_json::json!({"owner": "alice", "roles": ["a", "b"]});
        let t2 = serde_json::json!({"owner": "1234", "note": "two\nlines"});
        assert_eq!(
            records,
            vec![
                Record::Entity { kind: "todo".into(), id: "t1".into(), attributes: t1.as_object().unwrap().clone() },
                Record::Entity { kind: "todo".into(), id: "t2".into(), attributes: t2.as_object().unwrap().clone() },
                Record::Entity { kind: "user".into(), id: "bob".into(), attributes: Map::new() },
                Record::Tuple { relation: "member_of".into(), a: "alice".into(), b: "team:x, y".into() },
                Record::Holiday { calendar: "office".into(), date: "2028-02-29".into() },
            ]
        );
    }

    #[test]
    fn a_bad_csv_row_is_named_by_its_line() {
        let cases = [
            ("relation,r,a,b\nrelation,r,a\n", "line 2: 3 fields"),
            ("entity,t,\"multi\nline\",x,1\nwhat,a\n", "line 3: `what`"),
            ("holiday,c,2026-13-01\n", "line 1: `2026-13-01` is not a date"),
            ("entity,t,a,n:json,{x}\n", "line 1: the value of `n:json` is not JSON"),
            ("entity,t,a,n,1\nentity,t,a,n,2\n", "line 2: attribute `n` given twice"),
            ("relation,r,,b\n", "line 1: `a` must not be empty"),
            ("relation,r,\"a\nb,c\n", "line 1: a quoted field does not end"),
            ("relation,r,\"a\"x,b\n", "line 1: text after a quoted field"),
        ];
        for (text, expected) in cases {
            let error = parse(text.as_bytes(), Format::Csv).unwrap_err();
            assert!(error.starts_with(expected), "{text:?}: {error}");
        }
    }
}
