//! A `remit serve` process on a free loopback port, for the tests of the gateway's commands: started from the
//! command a test builds (its policy, store and flags), known by the URL it prints first, killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

#[derive(Debug)]
pub struct Served {
    pub child: Child,
    /// `http://127.0.0.1:PORT` (or `https://…`), as the gateway printed it.
    pub url: String,
}

impl Served {
    /// Spawns `command` (a `remit serve … --listen 127.0.0.1:0`) with its stdout read here: the first line names the
    /// URL; the rest is read and dropped, so that the gateway never blocks on it. Its stderr is the caller's choice.
    pub fn start(command: &mut Command) -> Served {
        let mut child = command.stdout(Stdio::piped()).spawn().expect("start remit serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("the gateway says where it listens").unwrap();
        let url = first.strip_prefix("remit gateway listening on ").expect(&first).to_string();
        std::thread::spawn(move || for _ in lines {});
        Served { child, url }
    }

    /// `HOST:PORT` of a plain-HTTP gateway.
    pub fn address(&self) -> &str {
        self.url.trim_start_matches("http://")
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
