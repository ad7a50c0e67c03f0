//! Graphviz DOT: one HTML-like table per mandate (name, facts, then its clauses by section), edges parent → child.
//! `dot -Tsvg` renders it; the text is stable (sorted), so it is also a reviewable snapshot.

use super::model::{colours, Forest};

pub fn render(forest: &Forest) -> String {
    let mut out = String::from("digraph remit {\n");
    out.push_str("  rankdir=TB;\n  node [shape=plaintext, fontname=\"Helvetica\", fontsize=10];\n");
    out.push_str("  edge [color=\"#607d8b\", arrowsize=0.7];\n");
    for (id, _) in forest.preorder() {
        let node = &forest.nodes[id];
        let (fill, stroke) = colours(node.class());
        out.push_str(&format!("  {} [label=<\n", quote(&node.name)));
        out.push_str(&format!(
            "    <table border=\"1\" cellborder=\"0\" cellspacing=\"0\" cellpadding=\"3\" color=\"{stroke}\" bgcolor=\"{fill}\">\n"
        ));
        let mut title = format!("<b>{}</b>", html(&node.name));
        if let Some(change) = &node.change {
            title.push_str(&format!(" [{}]", change.status.as_str()));
        }
        out.push_str(&format!("      <tr><td align=\"left\">{title}</td></tr>\n"));
        for fact in node.facts() {
            out.push_str(&format!("      <tr><td align=\"left\">{}</td></tr>\n", html(&fact)));
        }
        for section in &node.sections {
            out.push_str(&format!("      <tr><td align=\"left\"><i>{}</i></td></tr>\n", section.title));
            for clause in &section.clauses {
                out.push_str(&format!("      <tr><td align=\"left\">  {}</td></tr>\n", html(clause)));
            }
        }
        if let Some(change) = &node.change {
            for (what, example) in
                [("now allowed; before,", &change.widened), ("allowed before; now", &change.narrowed)]
            {
                for (why, request) in example {
                    out.push_str(&format!("      <tr><td align=\"left\">{what} {}:</td></tr>\n", html(why)));
                    out.push_str(&format!("      <tr><td align=\"left\">  {}</td></tr>\n", html(request)));
                }
            }
        }
        out.push_str("    </table>>];\n");
    }
    for (id, _) in forest.preorder() {
        for &child in &forest.nodes[id].children {
            out.push_str(&format!("  {} -> {};\n", quote(&forest.nodes[id].name), quote(&forest.nodes[child].name)));
        }
    }
    out.push_str("}\n");
    out
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Escapes text for DOT's HTML-like labels.
fn html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
