//! Every relative link in the repository's Markdown leads somewhere: the file (or folder) exists, and an anchor
//! (`page.md#section`, `#section`) names a heading of that page as GitHub writes heading anchors. The docs point into
//! each other (the README's guide into docs/, the user's guides into the benchmark records) and code comments point
//! at their sections, so a renamed heading or a moved page must fail here rather than on a reader.
//! Std only: it reads files and nothing else.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Folders that hold no documentation of the project: build output, installed dependencies, fuzz corpora.
const SKIPPED: [&str; 5] = ["target", "node_modules", ".venv", ".git", "corpus"];

#[test]
fn every_relative_link_in_the_docs_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = Vec::new();
    markdown_files(root, &mut pages);
    assert!(pages.iter().any(|page| page.ends_with("README.md")), "no Markdown found under {}", root.display());
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in link_targets(&text) {
            if let Err(problem) = check(page, &target) {
                broken.push(format!("{}: `{target}`: {problem}", page.strip_prefix(root).unwrap().display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let page = "# The floor: what a decision costs (`2a8c5fc`)\n\
                ## Set-up — µs, 2×\n\
                ```sh\n# not a heading\n```\n\
                ## Set-up — µs, 2×\n";
    let anchors = anchors_of(page);
    let expected: HashSet<String> =
        ["the-floor-what-a-decision-costs-2a8c5fc", "set-up--µs-2", "set-up--µs-2-1"].map(String::from).into();
    assert_eq!(anchors, expected);
    let links = "[a](x.md) `[b](y.md)` [c](#d \"title\") [u](https://example.com)\n```\n[e](f.md)\n```\n";
    assert_eq!(link_targets(links), ["x.md", "y.md", "#d"]);
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        // Symlinks are skipped: the dependency folders linked in from another checkout are not ours.
        let kind = entry.file_type().unwrap();
        if kind.is_dir() && !SKIPPED.contains(&name.as_str()) {
            markdown_files(&path, out);
        } else if kind.is_file() && name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The targets of `[text](target)` links outside fenced code blocks, skipping URLs with a scheme (`https:`,
/// `mailto:`). Inline code is not skipped: a link written in backticks is still checked, which costs nothing here.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let end = rest.find([')', ' ']).unwrap_or(rest.len());
            let target = &rest[..end];
            let scheme =
                target.split_once(':').is_some_and(|(s, _)| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase()));
            if !target.is_empty() && !scheme {
                targets.push(target.to_string());
            }
        }
    }
    targets
}

/// The lines of `text` outside fenced code blocks.
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut in_code = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            return false;
        }
        !in_code
    })
}

fn check(page: &Path, target: &str) -> Result<(), String> {
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() { page.to_path_buf() } else { page.parent().unwrap().join(path) };
    if !file.exists() {
        return Err("no such file".into());
    }
    if anchor.is_empty() {
        return Ok(());
    }
    if file.extension().is_none_or(|e| e != "md") {
        return Err("an anchor into a file that is not Markdown".into());
    }
    let anchors = anchors_of(&std::fs::read_to_string(&file).unwrap());
    if anchors.contains(anchor) {
        Ok(())
    } else {
        Err(format!("no heading with this anchor in {}", file.file_name().unwrap().to_string_lossy()))
    }
}

/// The anchors of a page's headings, as GitHub makes them: the heading's text lowercased, every character that is
/// not a letter, a digit, `-`, `_` or a space dropped, spaces made `-`; a repeated anchor gets `-1`, `-2`, ….
fn anchors_of(text: &str) -> HashSet<String> {
    let mut anchors = HashSet::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug: String = line[hashes..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while !anchors.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
    }
    anchors
}
