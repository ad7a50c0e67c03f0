//! docs/tutorial.md, run: every file block (```` ```LANG file=PATH ````) is written and every command of a
//! ```` ```console ```` block (`$ COMMAND`, optionally ending in `# exit N`) is run in order, in a fresh folder, with
//! the `remit` binary on PATH; what it prints (stdout, then stderr) must be what the tutorial shows after it. In
//! the shown output a line `…` stands for any lines and `…` inside a line for any text. A command ending in `&` (the
//! gateway) is started in the background: its first line of output is what the tutorial shows, and it is stopped
//! when the test ends. The tutorial's gateway address, `127.0.0.1:8181`, is replaced by a free port of this machine
//! everywhere (and `REMIT_GATEWAY` names it), so that the test never meets another gateway.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::{remit_bin, root, run, temp_dir};

#[derive(Debug)]
enum Step {
    File { path: String, text: String },
    Command { command: String, exit: i32, expected: Vec<String>, line: usize },
}

fn steps(markdown: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((at, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else { continue };
        let body: Vec<&str> = lines.by_ref().map(|(_, l)| l).take_while(|l| *l != "```").collect();
        if let Some(path) = info.split_whitespace().find_map(|word| word.strip_prefix("file=")) {
            let text = body.iter().map(|l| format!("{l}\n")).collect();
            steps.push(Step::File { path: path.to_string(), text });
        } else if info == "console" {
            for (i, line) in body.iter().enumerate() {
                let Some(command) = line.strip_prefix("$ ") else { continue };
                let (command, exit) = match command.split_once("# exit ") {
                    Some((command, code)) => (command.trim_end(), code.trim().parse().expect("`# exit N`")),
                    None => (command, 0),
                };
                let expected =
                    body[i + 1..].iter().take_while(|l| !l.starts_with("$ ")).map(|l| l.to_string()).collect();
                steps.push(Step::Command { command: command.to_string(), exit, expected, line: at + 2 + i });
            }
        }
    }
    steps
}

/// `pattern` against `text`: `…` alone on a line matches any lines, `…` inside a line any text.
fn matches(pattern: &[String], text: &[&str]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((first, rest)) if first == "…" => (0..=text.len()).any(|skip| matches(rest, &text[skip..])),
        Some((first, rest)) => {
            text.split_first().is_some_and(|(line, more)| line_matches(first, line) && matches(rest, more))
        }
    }
}

fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) || line.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The gateway address the tutorial shows.
const SHOWN_ADDRESS: &str = "127.0.0.1:8181";

/// A process the tutorial started in the background, stopped (by its id) when the test ends, failed or not.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

/// Starts `command` in `dir` in the background and returns it with its first line of output (within two minutes).
fn start(command: &str, dir: &Path, path: &str, gateway: &str) -> (Background, String) {
    let log = std::fs::File::create(dir.join("background.log")).unwrap();
    let mut child = Command::new("sh")
        .args(["-c", &format!("exec {command}")])
        .current_dir(dir)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .env("REMIT_GATEWAY", gateway)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    // The first line goes to the test; the rest is read (and dropped) so that the process never blocks on it.
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        sender.send(lines.next().and_then(Result::ok).unwrap_or_default()).ok();
        for _ in lines {}
    });
    let background = Background(child);
    let first = receiver.recv_timeout(Duration::from_secs(120)).unwrap_or_default();
    (background, first)
}

#[test]
fn every_command_of_the_tutorial_prints_what_it_shows() {
    let markdown = std::fs::read_to_string(root().join("docs/tutorial.md")).unwrap();
    let steps = steps(&markdown);
    let dir = temp_dir("tutorial");
    let bin = Path::new(remit_bin()).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let gateway = format!("http://{address}");
    let mut background = Vec::new();
    let mut commands = Vec::new();
    for step in &steps {
        match step {
            Step::File { path, text } => {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(file, text).unwrap();
            }
            Step::Command { command: shown, exit, expected, line } => {
                let command = shown.replace(SHOWN_ADDRESS, &address);
                let expected: Vec<String> = expected.iter().map(|l| l.replace(SHOWN_ADDRESS, &address)).collect();
                if let Some(command) = command.strip_suffix(" &") {
                    let (process, first) = start(command, &dir, &path, &gateway);
                    background.push(process);
                    let log = std::fs::read_to_string(dir.join("background.log")).unwrap_or_default();
                    assert!(
                        matches(&expected, &[first.trim_end()]),
                        "docs/tutorial.md:{line}: `{command}` printed first\n{first}\n{log}\nbut the tutorial shows\n{}",
                        expected.join("\n")
                    );
                    commands.push(command.to_string());
                    continue;
                }
                let out = run(
                    // `remit check` runs on 2026-11-10T00:00:00Z (`SOURCE_DATE_EPOCH`): on another date it may also warn
                    // of the tutorial's mandates expiring (`remit::mandate-expiring`), as the tutorial says.
                    Command::new("sh")
                        .args(["-c", &command])
                        .current_dir(&dir)
                        .env("PATH", &path)
                        .env("NO_COLOR", "1")
                        .env("SOURCE_DATE_EPOCH", "1794268800")
                        .env("REMIT_GATEWAY", &gateway),
                    Duration::from_secs(120),
                );
                let printed =
                    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                let printed_lines: Vec<&str> = printed.lines().map(str::trim_end).collect();
                let expected: Vec<String> = expected.iter().map(|l| l.trim_end().to_string()).collect();
                assert!(
                    matches(&expected, &printed_lines),
                    "docs/tutorial.md:{line}: `{command}` printed\n{printed}\nbut the tutorial shows\n{}",
                    expected.join("\n")
                );
                assert_eq!(out.status.code(), Some(*exit), "docs/tutorial.md:{line}: `{command}`: {printed}");
                commands.push(command.clone());
            }
        }
    }
    drop(background);
    // The tutorial's promise: write, test, see a narrowing error, diff, build, evaluate; then an approval, the
    // gateway and an escalation approved in the inbox.
    for verb in [
        "remit check",
        "remit test",
        "remit diff",
        "remit build",
        "remit eval",
        "remit serve",
        "remit approvals approve",
    ] {
        assert!(commands.iter().any(|c| c.starts_with(verb)), "the tutorial runs no `{verb}`");
    }
    assert!(steps
        .iter()
        .any(|s| matches!(s, Step::File { text, .. } if text.contains("[[case.request.context.approvals]]"))));
    assert!(steps.iter().any(|s| matches!(s, Step::File { path, .. } if path == "first/drafts.remit")));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn the_output_patterns_match_what_they_should() {
    let p = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    assert!(matches(&p(&["a", "…", "d"]), &["a", "b", "c", "d"]));
    assert!(matches(&p(&["a", "…"]), &["a"]));
    assert!(!matches(&p(&["a", "d"]), &["a", "b", "d"]));
    assert!(matches(&p(&["wrote x (… bytes): policy sha256:…"]), &["wrote x (12 bytes): policy sha256:ab"]));
    assert!(!matches(&p(&["wrote x (… bytes)"]), &["wrote y (12 bytes)"]));
    assert!(!matches(&p(&["a…a"]), &["a"]));
    assert!(!matches(&p(&["x"]), &[]));
}
