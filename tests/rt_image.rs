//! The policy image (crates/remit-rt/src/image.rs, written by crates/remit-lang/src/wasm/image.rs): every example's and semantics
//! folder's image is read back by the runtime crate's reader, and what it holds is what the program says.

mod support;

use remit_rt::image::{Image, Mandate, Tool, MAX_DECIDING};

#[test]
fn every_image_reads_back_as_its_program() {
    assert_eq!(MAX_DECIDING, remit_lang::check::limits::MAX_RULES_PER_TOOL);
    for unit in support::corpus() {
        let program = &unit.program;
        let bytes = remit_lang::wasm::image::write(program).unwrap();
        let image = Image::new(&bytes).unwrap_or_else(|| panic!("{}: no image header", unit.name));
        let h = image.header;
        assert_eq!(h.image_len as usize, bytes.len());
        assert_eq!(image.str(h.policy_off, h.policy_len), serde_json::to_string(&program.hash).unwrap().as_bytes());
        assert_eq!(h.tools_count as usize, program.tools.len(), "{}", unit.name);
        for (i, tool) in program.tools.iter().enumerate() {
            let name = tool.name.as_bytes();
            let found = image.find(h.tool_slots_off, h.tool_slots_len, || name.iter().copied(), |j| image.tool_name(j));
            assert_eq!(found, Some(i as u32), "{}: tool {}", unit.name, tool.name);
            let record: Tool = image.tool(i as u32);
            assert_eq!(record.params_count as usize, tool.params.len());
            assert_eq!(record.level as usize, tool.level);
        }
        let absent = b"no such tool";
        assert_eq!(
            image.find(h.tool_slots_off, h.tool_slots_len, || absent.iter().copied(), |j| image.tool_name(j)),
            None
        );
        // The listing order is the order of the names.
        let listed: Vec<&[u8]> =
            (0..h.tools_count).map(|i| image.tool_name(image.word(h.listing_off + 4 * i))).collect();
        let mut names: Vec<&[u8]> = program.tools.iter().map(|t| t.name.as_bytes()).collect();
        names.sort();
        assert_eq!(listed, names, "{}", unit.name);
        for (i, mandate) in program.mandates.iter().enumerate() {
            let name = mandate.name.as_bytes();
            let found = image.find(
                h.mandate_slots_off,
                h.mandate_slots_len,
                || name.iter().copied(),
                |j| image.mandate_name(j),
            );
            assert_eq!(found, Some(i as u32), "{}: mandate {}", unit.name, mandate.name);
            let record: Mandate = image.mandate(i as u32);
            let chain: Vec<usize> =
                (0..record.chain_count).map(|k| image.word(record.chain_off + 4 * k) as usize).collect();
            assert_eq!(chain, program.chain(i));
            let json: Vec<String> = chain.iter().map(|&m| program.mandates[m].name.clone()).collect();
            let written = image.str(record.chain_json_off, record.chain_json_len);
            assert_eq!(written, serde_json::to_string(&json).unwrap().as_bytes());
            // Every clause entry is a deciding rule of this mandate.
            let entry = image.entry(record.otherwise_entry);
            let rule: serde_json::Value = serde_json::from_slice(image.str(entry.json_off, entry.json_len)).unwrap();
            assert_eq!(rule["mandate"], mandate.name.as_str());
        }
        // Each template: its record, and the mandate record its instances decide as, past the policy's (never found
        // by name), its chain the parent's and itself; its entries name the template, marked as an instance's (and
        // which template's).
        assert_eq!(h.mandates_count as usize, program.mandates.len(), "{}", unit.name);
        assert_eq!(h.templates_count as usize, program.templates.len(), "{}", unit.name);
        for (t, template) in program.templates.iter().enumerate() {
            let record = image.template(t as u32);
            assert_eq!(image.str(record.name_off, record.name_len), template.name.as_bytes());
            assert_eq!(record.mandate as usize, program.mandates.len() + t, "{}", unit.name);
            assert_eq!(record.params_count as usize, template.params.len());
            for (p, param) in template.params.iter().enumerate() {
                let written = image.template_param(&record, p as u32);
                assert_eq!(image.str(written.name_off, written.name_len), param.name.as_bytes());
                assert_eq!(written.signed != 0, param.signed);
            }
            let name = template.name.as_bytes();
            let found = image.find(
                h.mandate_slots_off,
                h.mandate_slots_len,
                || name.iter().copied(),
                |j| image.mandate_name(j),
            );
            assert_eq!(found, None, "{}: template {} found as a mandate", unit.name, template.name);
            let shape: Mandate = image.mandate(record.mandate);
            assert_ne!(shape.flags & remit_rt::image::MANDATE_TEMPLATE, 0);
            let chain: Vec<usize> =
                (0..shape.chain_count).map(|k| image.word(shape.chain_off + 4 * k) as usize).collect();
            // A template under a template (sub-delegation): its parent template's record's chain, then itself.
            let mut expected = vec![record.mandate as usize];
            let mut current = template;
            loop {
                match current.parent {
                    remit_lang::ir::Parent::Mandate(parent) => {
                        expected.splice(0..0, program.chain(parent));
                        break;
                    }
                    remit_lang::ir::Parent::Template(parent) => {
                        expected.insert(0, program.mandates.len() + parent);
                        current = &program.templates[parent];
                    }
                }
            }
            assert_eq!(chain, expected, "{}: template {}", unit.name, template.name);
            let parent_template = match template.parent {
                remit_lang::ir::Parent::Template(parent) => parent as u32 + 1,
                remit_lang::ir::Parent::Mandate(_) => 0,
            };
            assert_eq!(record.parent_template, parent_template, "{}: template {}", unit.name, template.name);
            let entry = image.entry(shape.otherwise_entry);
            let json = image.str(entry.json_off, entry.json_len);
            let head = format!("{{\"mandate\":{}", serde_json::to_string(&template.name).unwrap());
            assert!(json.starts_with(head.as_bytes()));
            assert_eq!(entry.instance as usize, head.len());
            assert_eq!(entry.template as usize, t + 1, "{}: the entry names its template", unit.name);
            let window = image.entry(shape.validity_entry);
            assert_eq!(window.window, 1);
            assert!(image
                .str(window.json_off, window.json_len)
                .starts_with(format!("{head},\"rule\":\"valid\"").as_bytes()));
        }
        // Ranks are a permutation.
        let mut ranks: Vec<u32> = (0..h.entries_count).map(|i| image.entry(i).rank).collect();
        ranks.sort();
        assert_eq!(ranks, (0..h.entries_count).collect::<Vec<_>>());
    }
}

/// A derived attribute's operands are written attributes, one level deep: each atom of the semantics folders about
/// the world lists them with the type it is read as and the text a decision names it by; and an operand that is
/// itself derived (which the checker never lowers) is refused, not written wrongly.
#[test]
fn derived_attributes_list_their_operands() {
    use remit_lang::ir::{Atom, Attr, Cond, Test, Type, Value};
    use remit_lang::syntax::ast::CompareOp;
    use remit_rt::image::{self as rec, Node};
    let unit = support::corpus().into_iter().find(|u| u.name == "tests/semantics/attribute-comparisons").unwrap();
    let bytes = remit_lang::wasm::image::write(&unit.program).unwrap();
    let image = Image::new(&bytes).unwrap();
    let mut derived = 0;
    for rule in unit.program.mandates.iter().flat_map(|m| &m.rules) {
        let Cond::Atom(atom) = &rule.condition else { continue };
        let Attr::Compare(left, _, right, ty) = &atom.attr else { continue };
        // Find the atom's record: the rule's only node.
        let tool = image.tool(match rule.target {
            remit_lang::ir::Target::Tool(t) => t as u32,
            _ => continue,
        });
        let list = rec::RuleList::decode(image.bytes, tool.lists_off);
        let found = (0..list.rules_count).find_map(|k| {
            let r = rec::Rule::decode(image.bytes, image.word(list.rules_off + 4 * k));
            let node = Node::decode(image.bytes, r.cond_off);
            let record = rec::Atom::decode(image.bytes, node.arg);
            (r.cond_count == 1 && record.attr == rec::ATTR_COMPARE).then_some(record)
        });
        let record = found.unwrap();
        assert_eq!(record.operands_count, 2);
        for (k, operand) in [left, right].into_iter().enumerate() {
            let o = rec::Atom::decode(image.bytes, image.word(record.operands_off + 4 * k as u32));
            assert_eq!(
                image.str(o.attr_text_off, o.attr_text_len),
                serde_json::to_string(&operand.display()).unwrap().as_bytes()
            );
            assert!(o.operands_count == 0 && o.attr != rec::ATTR_COMPARE);
            // Read as the comparison's operand type.
            let code = match ty {
                Type::String => rec::TYPE_STRING,
                Type::Money => rec::TYPE_MONEY,
                Type::Timestamp => rec::TYPE_TIMESTAMP,
                other => panic!("no comparison of `{other:?}` in the folder"),
            };
            assert_eq!(rec::Type::decode(image.bytes, o.ty).code, code);
        }
        derived += 1;
    }
    assert!(derived > 0);
    // A comparison of a comparison: refused.
    let mut program = unit.program.clone();
    let inner = Attr::Compare(Box::new(Attr::SubjectId), CompareOp::Eq, Box::new(Attr::ResourceId), Type::String);
    let outer = Attr::Compare(Box::new(inner), CompareOp::Eq, Box::new(Attr::SubjectId), Type::Bool);
    program.mandates[0].rules[0].condition =
        Cond::Atom(Atom { attr: outer, ty: Type::Bool, test: Test::Compare(CompareOp::Eq, Value::Bool(true)) });
    assert_eq!(remit_lang::wasm::image::write(&program), Err(remit_lang::wasm::image::ImageError::TooDeep));
}

/// Every calendar a condition reads is written once, whatever the number of atoms reading it: its name, its zone
/// table and its hours as the time library encodes them, each of which the runtime's decoder accepts; a calendar no
/// condition reads is not written. Calendar and duration atoms point at their records and carry their operands.
#[test]
fn calendars_are_written_once_each() {
    use remit_lang::ir::{Attr, Cond};
    use remit_rt::image::{self as rec, Node};
    let mut seen = 0;
    for unit in support::corpus() {
        let program = &unit.program;
        let bytes = remit_lang::wasm::image::write(program).unwrap();
        let image = Image::new(&bytes).unwrap();
        let h = image.header;
        // The calendars the conditions read, by name.
        fn walk(cond: &Cond, out: &mut std::collections::BTreeSet<String>) {
            match cond {
                Cond::Atom(atom) => {
                    if let Attr::InCalendar(name, _) = &atom.attr {
                        out.insert(name.clone());
                    }
                }
                Cond::And(items) | Cond::Or(items) => items.iter().for_each(|c| walk(c, out)),
                Cond::True | Cond::False => {}
            }
        }
        let mut read = std::collections::BTreeSet::new();
        for rule in program.mandates.iter().flat_map(|m| &m.rules) {
            walk(&rule.condition, &mut read);
        }
        assert_eq!(h.calendars_count as usize, read.len(), "{}", unit.name);
        let mut written = std::collections::BTreeSet::new();
        for i in 0..h.calendars_count {
            let record = image.calendar(i);
            let name = String::from_utf8(image.str(record.name_off, record.name_len).to_vec()).unwrap();
            let def = &program.calendars[&name];
            let table = image.str(record.table_off, record.table_len);
            let hours = image.str(record.hours_off, record.hours_len);
            assert_eq!(table, def.table.encode(), "{}: {name}", unit.name);
            assert_eq!(hours, def.calendar.encode(), "{}: {name}", unit.name);
            assert!(remit_rt::time::Calendar::decode(hours).is_some(), "{}: {name}", unit.name);
            // Canonical, so the constant-time view a decision reads it with answers as the full decode.
            let decoded = remit_rt::time::ZoneTable::decode(table).unwrap();
            let view = remit_rt::time::ZoneTable::view(table).unwrap();
            let (from, until) = (decoded.from(), decoded.until());
            for k in 0..2_000i64 {
                let t = from - 1 + (until - from + 2) / 2_000 * k + k % 7;
                assert_eq!(view.offset_at(t), decoded.offset_at(t), "{}: {name} at {t}", unit.name);
            }
            written.insert(name);
        }
        assert_eq!(written, read, "{}", unit.name);
        assert_eq!(image.calendar(h.calendars_count), rec::Calendar::default(), "past the table: zeros");
        // Each calendar or duration atom of a one-atom rule points at its calendar and lists its operands.
        for rule in program.mandates.iter().flat_map(|m| &m.rules) {
            let Cond::Atom(atom) = &rule.condition else { continue };
            let code = match &atom.attr {
                Attr::InCalendar(..) => rec::ATTR_IN_CALENDAR,
                Attr::Elapsed(..) => rec::ATTR_ELAPSED,
                _ => continue,
            };
            let remit_lang::ir::Target::Tool(t) = rule.target else { continue };
            let tool = image.tool(t as u32);
            let text = serde_json::to_string(&atom.attr.display()).unwrap();
            let record = (0..tool.lists_count)
                .flat_map(|l| {
                    let list = rec::RuleList::decode(image.bytes, Image::at(tool.lists_off, rec::RuleList::SIZE, l));
                    (0..list.rules_count).map(move |k| image.word(list.rules_off + 4 * k))
                })
                .map(|at| rec::Rule::decode(image.bytes, at))
                .filter(|r| r.cond_count == 1)
                .map(|r| rec::Atom::decode(image.bytes, Node::decode(image.bytes, r.cond_off).arg))
                .find(|a| a.attr == code && image.str(a.attr_text_off, a.attr_text_len) == text.as_bytes())
                .unwrap_or_else(|| panic!("{}: no record of `{}`", unit.name, atom.attr.display()));
            let operand = |k: u32| rec::Atom::decode(image.bytes, image.word(record.operands_off + 4 * k));
            let shown = |a: &Attr| serde_json::to_string(&a.display()).unwrap();
            match &atom.attr {
                Attr::InCalendar(name, instant) => {
                    assert_eq!(record.operands_count, 1);
                    let c = image.calendar(record.calendar);
                    assert_eq!(image.str(c.name_off, c.name_len), name.as_bytes());
                    let o = operand(0);
                    assert_eq!(image.str(o.attr_text_off, o.attr_text_len), shown(instant).as_bytes());
                    assert_eq!(rec::Type::decode(image.bytes, o.ty).code, rec::TYPE_TIMESTAMP);
                }
                Attr::Elapsed(later, earlier, _, seconds) => {
                    assert_eq!(record.operands_count, 2);
                    assert_eq!(rec::join64(record.seconds_lo, record.seconds_hi), *seconds);
                    for (k, side) in [later, earlier].into_iter().enumerate() {
                        let o = operand(k as u32);
                        assert_eq!(image.str(o.attr_text_off, o.attr_text_len), shown(side).as_bytes());
                        assert_eq!(rec::Type::decode(image.bytes, o.ty).code, rec::TYPE_TIMESTAMP);
                    }
                }
                _ => unreachable!(),
            }
            seen += 1;
        }
    }
    assert!(seen > 10, "{seen}");
}
