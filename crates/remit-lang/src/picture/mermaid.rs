//! Mermaid flowcharts: GitHub renders a ```mermaid block in a pull-request comment as is. Labels use Mermaid's
//! entity codes for the characters its parser reserves, so any clause text survives.

use super::model::{colours, Forest};

pub fn render(forest: &Forest) -> String {
    let mut out = String::from("flowchart TD\n");
    let order = forest.preorder();
    for &(id, _) in &order {
        let node = &forest.nodes[id];
        let mut lines = vec![format!("<b>{}</b>", escape(&node.name))];
        if let Some(change) = &node.change {
            lines[0].push_str(&format!(" [{}]", change.status.as_str()));
        }
        lines.extend(node.facts().iter().map(|f| escape(f)));
        for section in &node.sections {
            lines.push(format!("<i>{}</i>", section.title));
            lines.extend(section.clauses.iter().map(|c| escape(c)));
        }
        if let Some(change) = &node.change {
            for (what, example) in
                [("now allowed; before,", &change.widened), ("allowed before; now", &change.narrowed)]
            {
                for (why, request) in example {
                    lines.push(escape(&format!("{what} {why}:")));
                    lines.push(format!("<code>{}</code>", escape(request)));
                }
            }
        }
        out.push_str(&format!("  m{id}[\"{}\"]\n", lines.join("<br/>")));
        out.push_str(&format!("  class m{id} {}\n", node.class()));
    }
    for &(id, _) in &order {
        for &child in &forest.nodes[id].children {
            out.push_str(&format!("  m{id} --> m{child}\n"));
        }
    }
    for (class, _) in forest.legend() {
        let (fill, stroke) = colours(class);
        out.push_str(&format!("  classDef {class} fill:{fill},stroke:{stroke},text-align:left\n"));
    }
    out
}

/// Mermaid entity codes for the characters that would end a label or be read as markup.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '#' => out.push_str("#35;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '&' => out.push_str("#amp;"),
            '`' => out.push_str("#96;"),
            _ => out.push(c),
        }
    }
    out
}
