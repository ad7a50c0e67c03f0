//! Pictures of authority: the delegation forest of a policy (`remit graph`), the same forest coloured by how
//! each mandate changed between two versions (`remit diff --format html|svg`), and one decision drawn as the
//! path it took (`remit explain`). Pure: a checked program (and a request) in, text out; the `cli` writes files.
//!
//! [`model`] decides what is shown; `dot`, `mermaid` and `svg` only decide how, so every format shows the same
//! nodes, clauses and colours.

pub mod dot;
pub mod explain;
pub mod instances;
pub mod mermaid;
pub mod model;
pub mod svg;

use std::fmt::Write;

use crate::check::narrowing::diff::MandateDiff;
use crate::ir::Program;
use model::{colours, legend, Forest};
use svg::xml;

/// The formats of `remit graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Dot,
    Mermaid,
}

/// The delegation forest of `program` in `format`; `stops` names mandates with an active stop.
pub fn graph(program: &Program, stops: &[String], format: Format) -> String {
    let forest = Forest::of(program, stops);
    match format {
        Format::Svg => svg::render(&forest, &format!("remit graph · policy {}", short(&program.hash))),
        Format::Dot => dot::render(&forest),
        Format::Mermaid => mermaid::render(&forest),
    }
}

/// [`graph`] with `instances` (parsed by [`instances::parse`]) drawn under their templates.
pub fn graph_with_instances(
    program: &Program,
    stops: &[String],
    instances: &[instances::GrantedInstance],
    format: Format,
) -> String {
    let forest = instances::forest(program, stops, instances);
    match format {
        Format::Svg => svg::render(&forest, &format!("remit graph · policy {}", short(&program.hash))),
        Format::Dot => dot::render(&forest),
        Format::Mermaid => mermaid::render(&forest),
    }
}

/// The diff picture: the new version's forest (plus removed mandates) coloured by `report`, as SVG.
pub fn diff_svg(old: &Program, new: &Program, report: &[MandateDiff]) -> String {
    let forest = Forest::of_diff(old, new, report);
    svg::render(&forest, &format!("remit diff · {} → {}", short(&old.hash), short(&new.hash)))
}

/// The diff as a self-contained HTML page: the coloured forest, then a table of every mandate's status with the
/// confirmed requests that show each change.
pub fn diff_html(old: &Program, new: &Program, report: &[MandateDiff]) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>remit diff</title>\n<style>\
         body{font-family:system-ui,sans-serif;margin:2em;color:#263238}table{border-collapse:collapse;margin-top:1.5em}\
         td,th{border:1px solid #cfd8dc;padding:.3em .6em;text-align:left;vertical-align:top}\
         pre{margin:0;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.85em}\
         .picture{overflow:auto;border:1px solid #eceff1}</style></head><body>\n",
    );
    let _ = writeln!(out, "<h1>remit diff</h1>");
    let _ =
        writeln!(out, "<p>old policy <code>{}</code> → new policy <code>{}</code></p>", xml(&old.hash), xml(&new.hash));
    let widened = report.iter().filter(|m| m.status.widens()).count();
    let verdict = if widened == 0 {
        "no mandate gained authority".to_string()
    } else {
        format!("{widened} mandate(s) need a review: they gained authority or could not be compared")
    };
    let _ = writeln!(out, "<p id=\"verdict\">{}</p>", xml(&verdict));
    let _ = writeln!(out, "<div class=\"picture\">{}</div>", diff_svg(old, new, report));
    out.push_str("<table><tr><th>mandate</th><th>status</th><th>what shows it</th></tr>\n");
    for m in report {
        let (fill, stroke) = colours(m.status.as_str());
        let mut shown = String::new();
        for e in &m.widened {
            let _ = write!(
                shown,
                "<p>now allowed; before, {}:</p><pre class=\"witness\">{}</pre>",
                xml(&e.refused_by),
                xml(&serde_json::to_string_pretty(&e.request).unwrap_or_default())
            );
        }
        for e in &m.narrowed {
            let _ = write!(
                shown,
                "<p>allowed before; now {}:</p><pre>{}</pre>",
                xml(&e.refused_by),
                xml(&serde_json::to_string_pretty(&e.request).unwrap_or_default())
            );
        }
        let _ = writeln!(
            out,
            "<tr data-mandate=\"{}\" data-status=\"{}\"><td>{}</td><td style=\"background:{fill};border-left:4px solid {stroke}\">{}</td><td>{shown}</td></tr>",
            xml(&m.name),
            m.status.as_str(),
            xml(&m.name),
            m.status.as_str()
        );
    }
    out.push_str("</table>\n<p>");
    let legend: Vec<String> = legend(true).iter().map(|(c, meaning)| format!("<b>{c}</b>: {}", xml(meaning))).collect();
    out.push_str(&legend.join(" · "));
    out.push_str("</p></body></html>\n");
    out
}

/// The first 12 hex digits of a `sha256:` hash, enough to tell versions apart in a title.
fn short(hash: &str) -> String {
    let hex = hash.trim_start_matches("sha256:");
    format!("sha256:{}", &hex[..hex.len().min(12)])
}
