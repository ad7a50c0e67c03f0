//! A self-contained SVG of a forest, drawn as an indented tree: each mandate a box, its children below it and
//! indented, joined by elbow connectors — readable at any number of mandates and any width of clauses (a
//! top-down tree of eight verbose children is wider than any screen; Mermaid and DOT give that shape for those
//! who want it). No scripts, no external fonts or stylesheets. Text is measured with a fixed advance per
//! character of a monospace font and long lines are wrapped, so the layout needs no font metrics and is the same
//! bytes on every machine.

use std::fmt::Write;

use super::model::{colours, Forest, Node};

const FONT: f64 = 12.0;
/// Advance of one character of a 12px monospace font (0.6 em in the common monospace families).
const ADVANCE: f64 = 7.2;
const LINE: f64 = 16.0;
const PAD: f64 = 8.0;
const MARGIN: f64 = 24.0;
const INDENT: f64 = 36.0;
const GAP_Y: f64 = 14.0;
/// Longer lines are wrapped.
const MAX_CHARS: usize = 88;

/// One line of a box and its style.
struct Line {
    text: String,
    style: &'static str,
}

struct Placed {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    lines: Vec<Line>,
}

fn lines(node: &Node) -> Vec<Line> {
    let mut title = node.name.clone();
    if let Some(change) = &node.change {
        title.push_str(&format!("  [{}]", change.status.as_str()));
    }
    let mut out = vec![Line { text: title, style: "name" }];
    for fact in node.facts() {
        let style = if fact.starts_with("STOPPED") { "stop" } else { "fact" };
        wrap(&mut out, &fact, "", style);
    }
    for section in &node.sections {
        out.push(Line { text: section.title.to_string(), style: "section" });
        for clause in &section.clauses {
            wrap(&mut out, &format!("  {clause}"), "      ", "clause");
        }
    }
    if let Some(change) = &node.change {
        for (what, example) in [("now allowed; before,", &change.widened), ("allowed before; now", &change.narrowed)] {
            for (why, request) in example {
                let head = if what.starts_with("now") { "widened-head" } else { "narrowed-head" };
                wrap(&mut out, &format!("{what} {why}:"), "  ", head);
                wrap(&mut out, &format!("  {request}"), "  ", "witness");
            }
        }
    }
    out
}

/// Appends `text` as lines of at most `MAX_CHARS` characters, breaking at spaces where it can; continuation
/// lines start with `indent`.
fn wrap(out: &mut Vec<Line>, text: &str, indent: &str, style: &'static str) {
    let mut rest: Vec<char> = text.chars().collect();
    let mut first = true;
    loop {
        let prefix: Vec<char> = if first { Vec::new() } else { indent.chars().collect() };
        let room = MAX_CHARS - prefix.len();
        if rest.len() <= room {
            out.push(Line { text: prefix.iter().chain(rest.iter()).collect(), style });
            return;
        }
        // Break after the last space that leaves something on this line; else cut mid-word.
        let cut = rest[..room].iter().rposition(|&c| c == ' ').filter(|&i| i > indent.len()).map_or(room, |i| i + 1);
        out.push(Line { text: prefix.iter().chain(rest[..cut].iter()).collect(), style });
        rest.drain(..cut);
        first = false;
    }
}

/// Lays out the forest: each node's box (indexed like `forest.nodes`) and the drawing's size. Nodes follow
/// each other top to bottom in depth-first order, indented by depth.
fn layout(forest: &Forest) -> (Vec<Option<Placed>>, f64, f64) {
    let mut boxes: Vec<Option<Placed>> = forest.nodes.iter().map(|_| None).collect();
    let mut y = 60.0;
    let mut width: f64 = 420.0;
    for (id, depth) in forest.preorder() {
        let lines = lines(&forest.nodes[id]);
        let chars = lines.iter().map(|l| l.text.chars().count()).max().unwrap_or(1);
        let w = chars as f64 * ADVANCE + 2.0 * PAD;
        let h = lines.len() as f64 * LINE + 2.0 * PAD;
        let x = MARGIN + depth as f64 * INDENT;
        width = width.max(x + w + MARGIN);
        boxes[id] = Some(Placed { x, y, w, h, lines });
        y += h + GAP_Y;
    }
    (boxes, width, y + MARGIN / 2.0)
}

/// The SVG of `forest` with a title line and a legend of the classes it uses.
pub fn render(forest: &Forest, title: &str) -> String {
    let (boxes, w, h) = layout(forest);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" \
         font-family=\"ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace\" font-size=\"{FONT}\">"
    );
    let _ = writeln!(out, "<title>{}</title>", xml(title));
    out.push_str(
        "<style>.name{font-weight:bold}.section{font-style:italic;fill:#455a64}.fact{fill:#263238}\
         .clause{fill:#000}.stop{fill:#b71c1c;font-weight:bold}.widened-head{fill:#b71c1c}.narrowed-head{fill:#1b5e20}.witness{fill:#4e342e}\
         .edge{stroke:#607d8b;stroke-width:1.2;fill:none}</style>\n",
    );
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>");
    let _ = writeln!(out, "<text x=\"{MARGIN}\" y=\"20\" class=\"name\">{}</text>", xml(title));
    // Legend, right of the title.
    let mut lx = MARGIN;
    for (class, meaning) in forest.legend() {
        if !forest.nodes.iter().any(|n| n.class() == class) {
            continue;
        }
        let (fill, stroke) = colours(class);
        let _ = writeln!(
            out,
            "<g class=\"legend\" data-class=\"{class}\"><rect x=\"{lx:.1}\" y=\"31\" width=\"12\" height=\"12\" fill=\"{fill}\" stroke=\"{stroke}\"/>\
             <title>{}</title><text x=\"{:.1}\" y=\"42\">{class}</text></g>",
            xml(meaning),
            lx + 16.0,
        );
        lx += (class.len() + 2) as f64 * ADVANCE + 16.0;
    }
    for (id, _) in forest.preorder() {
        let Some(parent) = boxes[id].as_ref() else { continue };
        for &child in &forest.nodes[id].children {
            let Some(c) = boxes[child].as_ref() else { continue };
            let (x1, y1) = (parent.x + INDENT / 2.0, parent.y + parent.h);
            let (x2, y2) = (c.x, c.y + LINE);
            let _ = writeln!(out, "<path class=\"edge\" d=\"M{x1:.1},{y1:.1} V{y2:.1} H{x2:.1}\"/>");
        }
    }
    for (id, _) in forest.preorder() {
        let node = &forest.nodes[id];
        let Some(b) = boxes[id].as_ref() else { continue };
        let class = node.class();
        let (fill, stroke) = colours(class);
        let dash = if class == "removed" { " stroke-dasharray=\"5,3\"" } else { "" };
        let _ = writeln!(out, "<g class=\"node {class}\" data-mandate=\"{}\">", xml(&node.name));
        let _ = writeln!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"4\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"1.5\"{dash}/>",
            b.x, b.y, b.w, b.h
        );
        for (i, l) in b.lines.iter().enumerate() {
            let y = b.y + PAD + (i as f64 + 1.0) * LINE - 4.0;
            let _ = writeln!(
                out,
                "<text x=\"{:.1}\" y=\"{y:.1}\" class=\"{}\" xml:space=\"preserve\">{}</text>",
                b.x + PAD,
                l.style,
                xml(&l.text)
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

pub(super) fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
