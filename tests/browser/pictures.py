"""Renders remit's pictures in a real browser (Debian's chromium, driven by Playwright) and checks them.

Reads a JSON list of pages on stdin; for each page it loads the file (or, for a Mermaid source, renders it with
the pinned mermaid package exactly as a Markdown viewer would), takes a screenshot, and checks that every expected
text is rendered and that each selector's computed style has the expected value. Prints one JSON object per page
with what it found and exits 1 when any check fails, so the Rust test that calls it (tests/pictures.rs) fails too.
Nothing is downloaded: the browser is /usr/bin/chromium and mermaid comes from node_modules next to this file.
"""

import json
import pathlib
import sys

from playwright.sync_api import sync_playwright

import launch

HERE = pathlib.Path(__file__).resolve().parent
MERMAID = HERE / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def render_mermaid(page, source):
    page.set_content("<!doctype html><html><body><div id='out'></div></body></html>")
    page.add_script_tag(path=str(MERMAID))
    page.evaluate(
        """async (text) => {
            mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });
            const { svg } = await mermaid.render('remit', text);
            document.getElementById('out').innerHTML = svg;
        }""",
        source,
    )


def check(page, spec):
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    path = pathlib.Path(spec["file"]).resolve()
    if spec.get("mermaid"):
        render_mermaid(page, path.read_text())
    else:
        page.goto(path.as_uri())
    # Sized to the page, then a plain screenshot (a `full_page` capture stalls in this headless chromium).
    width, height = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
    page.set_viewport_size({"width": max(400, min(width, 4000)), "height": max(300, min(height, 8000))})
    page.screenshot(path=spec["screenshot"])
    text = page.evaluate("document.documentElement.textContent")
    found = {"file": spec["file"], "missing_texts": [t for t in spec.get("texts", []) if t not in text], "styles": []}
    for style in spec.get("styles", []):
        values = page.evaluate(
            "([sel, prop]) => Array.from(document.querySelectorAll(sel)).map(e => getComputedStyle(e)[prop])",
            [style["selector"], style["property"]],
        )
        ok = bool(values) and all(v == style["value"] for v in values)
        found["styles"].append({**style, "found": values, "ok": ok})
    found["errors"] = errors
    found["ok"] = not found["missing_texts"] and all(s["ok"] for s in found["styles"]) and not errors
    return found


def main():
    specs = json.load(sys.stdin)
    results = []
    with sync_playwright() as p:
        browser = launch.chromium(p, args=ARGS)
        for spec in specs:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            results.append(check(page, spec))
            page.close()
        browser.close()
    for r in results:
        print(json.dumps(r))
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
