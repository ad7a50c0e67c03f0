//! Renders diagnostics: `human` (miette's graphical report), `json` (one object per line), `github`
//! (workflow annotation lines).

use std::fmt;

use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};
use remit_lang::diag::{Diagnostic, Severity};
use remit_lang::source::SourceMap;

use super::Format;

pub fn print(sources: &SourceMap, diagnostics: &[Diagnostic], format: Format) {
    for d in diagnostics {
        match format {
            Format::Human => eprint!("{}", human(sources, d, std::env::var_os("NO_COLOR").is_none() && is_tty())),
            Format::Json => println!("{}", json(sources, d)),
            Format::Github => println!("{}", github(sources, d)),
        }
    }
}

fn is_tty() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

/// A diagnostic as miette sees it: the message, code, help and labels within the primary file.
struct Report<'a> {
    diagnostic: &'a Diagnostic,
    source: NamedSource<String>,
    labels: Vec<LabeledSpan>,
    help: Option<String>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(self.diagnostic.code))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.help.as_ref().map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        Some(Box::new(self.labels.iter().cloned()))
    }
}

/// The graphical rendering, as `remit check` prints it (and as the UI snapshots store it without colour).
pub fn human(sources: &SourceMap, d: &Diagnostic, colour: bool) -> String {
    let Some(primary) = d.primary_span() else {
        return format!("{}[{}]: {}\n", d.severity.as_str(), d.code, d.message);
    };
    let file = sources.file(primary.file);
    let mut help = d.help.clone();
    let mut labels = Vec::new();
    for (i, label) in d.labels.iter().enumerate() {
        if label.span.file == primary.file {
            let span = SourceSpan::new((label.span.start as usize).into(), label.span.len());
            let text = Some(label.message.clone());
            labels.push(if i == 0 {
                LabeledSpan::new_primary_with_span(text, span)
            } else {
                LabeledSpan::new_with_span(text, span)
            });
        } else {
            let note = format!("{} ({})", label.message, sources.location(label.span));
            help = Some(match help {
                Some(h) => format!("{h}\n{note}"),
                None => note,
            });
        }
    }
    let report = Report { diagnostic: d, source: NamedSource::new(&file.name, visible(&file.text)), labels, help };
    let theme = if colour { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100).with_links(false);
    let mut out = String::new();
    let _ = handler.render_report(&mut out, &report);
    if let Some(witness) = &d.witness {
        out.push_str(&witness_note(witness));
    }
    out
}

/// `text` with every invisible or text-direction character (`remit::invisible-character`) shown as a visible one
/// of the same UTF-8 length, so spans still fit and the report on the terminal reads as the policy is parsed.
fn visible(text: &str) -> String {
    text.chars()
        .map(|c| match remit_lang::syntax::invisible_name(c) {
            None => c,
            Some(_) => ['?', '\u{bf}', '\u{fffd}', '\u{fffd}'][c.len_utf8() - 1],
        })
        .collect()
}

/// The witness request, pretty-printed and indented under the report.
fn witness_note(witness: &str) -> String {
    let pretty = serde_json::from_str::<serde_json::Value>(witness)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| witness.to_string());
    let mut out = String::from("  note: witness request (`remit eval` format):\n");
    for line in pretty.lines() {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

pub fn json(sources: &SourceMap, d: &Diagnostic) -> String {
    let position = |span: remit_lang::source::Span| {
        let (line, column) = sources.line_col(span);
        (sources.file(span.file).name.clone(), line, column)
    };
    let labels: Vec<serde_json::Value> = d
        .labels
        .iter()
        .map(|l| {
            let (file, line, column) = position(l.span);
            serde_json::json!({
                "message": l.message, "file": file, "line": line, "column": column,
                "text": visible(sources.snippet(l.span)),
            })
        })
        .collect();
    let (file, line, column) = match d.primary_span() {
        Some(span) => {
            let (f, l, c) = position(span);
            (Some(f), Some(l), Some(c))
        }
        None => (None, None, None),
    };
    let mut out = serde_json::json!({
        "code": d.code, "severity": d.severity.as_str(), "message": d.message,
        "file": file, "line": line, "column": column, "labels": labels, "help": d.help,
    });
    if let Some(witness) = &d.witness {
        out["witness"] = serde_json::from_str(witness).unwrap_or_else(|_| serde_json::Value::String(witness.clone()));
    }
    out.to_string()
}

pub fn github(sources: &SourceMap, d: &Diagnostic) -> String {
    let level = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let escape = |s: &str| s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    let escape_prop = |s: &str| escape(s).replace(':', "%3A").replace(',', "%2C");
    let mut message = d.message.clone();
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    if let Some(witness) = &d.witness {
        message.push_str("\nwitness: ");
        message.push_str(witness);
    }
    match d.primary_span() {
        Some(span) => {
            let (line, col) = sources.line_col(span);
            let name = &sources.file(span.file).name;
            format!(
                "::{level} file={},line={line},col={col},title={}::{}",
                escape_prop(name),
                escape_prop(d.code),
                escape(&message)
            )
        }
        None => format!("::{level} title={}::{}", escape_prop(d.code), escape(&message)),
    }
}
