//! `remit lsp` driven over stdio with LSP messages, as an editor would: diagnostics as you type (the same codes
//! and help as `remit check`, cleared when fixed), hover, go to definition (into the standard library too), find
//! references, completion of `args.` and of names, document symbols, shutdown. The wallet as it was (Alice's static
//! mandate, tests/fixtures/wallet-static) is copied to a temporary folder so the test can edit it freely.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

use serde_json::{json, Value};

struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
    next_id: u64,
}

fn read_one(out: &mut BufReader<ChildStdout>) -> Option<Value> {
    let mut length = 0;
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    out.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

impl Client {
    fn start() -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_remit"))
            .arg("lsp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start remit lsp");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, messages) = channel();
        std::thread::spawn(move || {
            while let Some(message) = read_one(&mut stdout) {
                if send.send(message).is_err() {
                    break;
                }
            }
        });
        Client { child, stdin, messages, next_id: 1 }
    }

    fn send(&mut self, message: Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    fn next(&mut self) -> Value {
        self.messages.recv_timeout(Duration::from_secs(30)).expect("the server answers within 30 s")
    }

    /// Sends a request and returns its result (notifications that arrive first are skipped).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }));
        loop {
            let message = self.next();
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }

    /// The next `publishDiagnostics` for `uri`.
    fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        loop {
            let message = self.next();
            if message["method"] == "textDocument/publishDiagnostics" && message["params"]["uri"] == uri {
                return message["params"]["diagnostics"].as_array().unwrap().clone();
            }
        }
    }
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A fresh copy of the static wallet in its own folder (each test has its own: the server loads a folder).
fn workspace(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wallet-static");
    for file in ["policy.remit", "catalog.remit"] {
        std::fs::copy(example.join(file), dir.join(file)).unwrap();
    }
    dir
}

/// The position (line, UTF-16 character) of the `nth` occurrence of `needle` in `text`, plus `shift` characters.
fn position(text: &str, needle: &str, nth: usize, shift: usize) -> Value {
    let offset = text.match_indices(needle).nth(nth).unwrap().0 + shift;
    let line = text[..offset].matches('\n').count();
    let character = offset - text[..offset].rfind('\n').map_or(0, |i| i + 1);
    json!({ "line": line, "character": character })
}

#[test]
fn an_editor_session() {
    let dir = workspace("lsp-session");
    let policy = dir.join("policy.remit");
    let text = std::fs::read_to_string(&policy).unwrap();
    let doc = uri(&policy);
    let mut client = Client::start();

    let init = client.request("initialize", json!({ "processId": null, "rootUri": uri(&dir), "capabilities": {} }));
    let caps = &init["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-16");
    for cap in ["hoverProvider", "definitionProvider", "referencesProvider", "documentSymbolProvider"] {
        assert_eq!(caps[cap], true, "{cap}");
    }
    client.notify("initialized", json!({}));

    // A clean policy: the document opens without diagnostics; a typo shows `remit check`'s diagnostic, with its
    // help; fixing it clears the list.
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": doc, "languageId": "remit", "version": 1, "text": text } }),
    );
    let broken = text.replace("allow add_to_cart", "allow add_to_crt");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 2 }, "contentChanges": [{ "text": broken }] }),
    );
    let diagnostics = client.diagnostics(&doc);
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    let d = &diagnostics[0];
    assert_eq!(d["code"], "remit::unknown-tool");
    assert_eq!(d["severity"], 1);
    assert!(d["message"].as_str().unwrap().contains("did you mean `add_to_cart`"), "{d}");
    assert_eq!(d["range"]["start"], position(&broken, "add_to_crt", 0, 0));
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 3 }, "contentChanges": [{ "text": text }] }),
    );
    assert_eq!(client.diagnostics(&doc), Vec::<Value>::new(), "fixed: cleared");

    // Hover on a tool: its classes and level.
    let hover = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "make_payment", 0, 3) }),
    );
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert!(shown.contains("**tool** `make_payment`") && shown.contains("financial_operation"), "{shown}");
    // Hover on a class: its member tools.
    let hover = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "financial_operation", 0, 1) }),
    );
    assert!(hover["contents"]["value"].as_str().unwrap().contains("make_payment"), "{hover}");
    // Hover on the mandate: its chain and grants.
    let hover = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "mandate wallet", 0, 9) }),
    );
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert!(shown.contains("chain: wallet") && shown.contains("allow read_only"), "{shown}");

    // Go to definition: a standard-library tool opens a real file at its declaration.
    let def = client.request(
        "textDocument/definition",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "make_payment", 0, 2) }),
    );
    let target = def["uri"].as_str().unwrap().strip_prefix("file://").unwrap().to_string();
    assert!(target.ends_with("std/tools.remit"), "{def}");
    let std_text = std::fs::read_to_string(&target).unwrap();
    let line = std_text.lines().nth(def["range"]["start"]["line"].as_u64().unwrap() as usize).unwrap();
    let start = def["range"]["start"]["character"].as_u64().unwrap() as usize;
    assert_eq!(&line[start..start + "make_payment".len()], "make_payment");

    // References of the approval kind: its declaration in the stdlib and its use in the policy.
    let refs = client.request("textDocument/references", json!({ "textDocument": { "uri": doc }, "position": position(&text, "commercial_terms", 0, 0), "context": { "includeDeclaration": true } }));
    let refs = refs.as_array().unwrap();
    assert_eq!(refs.len(), 2, "{refs:?}");
    assert!(refs.iter().any(|r| r["uri"] == doc));

    // Completion: `args.` in a clause on a class offers the class's parameters.
    let typing = text.replace("limit financial_operation: args.amount", "limit financial_operation: args.am");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 4 }, "contentChanges": [{ "text": typing }] }),
    );
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&typing, "args.am", 0, 7) }),
    );
    let labels: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["amount"]);
    // `resource.` offers the request's own `id` and every declared resource attribute, with its type.
    let world = typing.replace("limit financial_operation: args.am", "limit financial_operation: resource.ow")
        + "\nresource order {\n  owner: string\n  total: money\n}\n"
        + "\ntool refund_order(order: string) {\n  target args.order\n  resource order\n}\n";
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 5 }, "contentChanges": [{ "text": world }] }),
    );
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&world, "resource.ow", 0, 11) }),
    );
    let found: Vec<(&str, &str)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["label"].as_str().unwrap(), i["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [("owner", "string")]);
    // A tool's `resource TYPE`: its hover says what the tool acts on, and the type leads to its declaration.
    let hover = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": doc }, "position": position(&world, "refund_order", 0, 2) }),
    );
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert!(shown.contains("target: `args.order`") && shown.contains("acts on: `order` resources"), "{shown}");
    let def = client.request(
        "textDocument/definition",
        json!({ "textDocument": { "uri": doc }, "position": position(&world, "  resource order", 0, 12) }),
    );
    assert_eq!(def["range"]["start"], position(&world, "resource order {", 0, 9), "{def}");
    // `principal.` offers the declared principal attributes (the principal has no `id`: it is `principal` itself).
    let principal = typing.replace("limit financial_operation: args.am", "limit financial_operation: principal.re")
        + "\nprincipal customer {\n  accounts: set<string>\n  region: string\n}\n";
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 6 }, "contentChanges": [{ "text": principal }] }),
    );
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&principal, "financial_operation: principal.re", 0, 33) }),
    );
    let found: Vec<(&str, &str)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["label"].as_str().unwrap(), i["detail"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [("region", "string")]);
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 7 }, "contentChanges": [{ "text": typing }] }),
    );
    // And names anywhere else.
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&typing, "allow read_only", 0, 8) }),
    );
    let labels: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap()).collect();
    assert!(labels.contains(&"read_only") && labels.contains(&"read_file"), "{labels:?}");

    // The outline of the document.
    let symbols = client.request("textDocument/documentSymbol", json!({ "textDocument": { "uri": doc } }));
    let names: Vec<&str> = symbols.as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["wallet"]);

    // Unknown requests get an error, not silence.
    client.send(json!({ "jsonrpc": "2.0", "id": 999, "method": "textDocument/rename", "params": {} }));
    loop {
        let message = client.next();
        if message["id"] == 999 {
            assert_eq!(message["error"]["code"], -32601);
            break;
        }
    }

    client.request("shutdown", Value::Null);
    client.notify("exit", Value::Null);
    let status = client.child.wait().unwrap();
    assert!(status.success());
}

/// A template's parameters are local names: hovering one (declared or used in the template) shows its type and
/// bound, go to definition lands on its declaration, and completion inside the template offers them with the
/// implicit `principal`, `holder` and `granted`, never outside it.
#[test]
fn template_parameters_in_the_editor() {
    let dir = workspace("lsp-templates");
    let policy = dir.join("policy.remit");
    let text = std::fs::read_to_string(&policy).unwrap()
        + "\ntemplate personal_shopping(\n  merchants: set<string> where merchants within [\"acme\", \"globex\"],\n  cap: money where cap <= 100 USD,\n) under wallet {\n  holder under \"agent:\"\n  allow make_payment where args.merchant in merchants and args.amount <= cap\n}\n";
    std::fs::write(&policy, &text).unwrap();
    let doc = uri(&policy);
    let mut client = Client::start();
    client.request("initialize", json!({ "processId": null, "rootUri": uri(&dir), "capabilities": {} }));
    client.notify("initialized", json!({}));
    client.notify(
        "textDocument/didOpen",
        json!({ "textDocument": { "uri": doc, "languageId": "remit", "version": 1, "text": text } }),
    );
    // The only diagnostics are the proof's: this template's instances may widen `wallet` (its merchants are not
    // `wallet`'s, and it restates neither the window nor the gate above 60 USD).
    let diagnostics = client.diagnostics(&doc);
    let codes: Vec<&str> = diagnostics.iter().map(|d| d["code"].as_str().unwrap()).collect();
    assert!(!codes.is_empty() && codes.iter().all(|&c| c == "remit::template-widens"), "{diagnostics:?}");

    // Hover on a use of `cap` in the body: the parameter, its type and bound.
    let hover = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "<= cap", 0, 4) }),
    );
    let shown = hover["contents"]["value"].as_str().unwrap();
    assert!(shown.contains("**parameter** `cap` of template `personal_shopping`"), "{shown}");
    assert!(shown.contains("cap: money where cap <= 100 USD"), "{shown}");
    // Hover on the template's name: a template.
    let hover = client.request(
        "textDocument/hover",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "personal_shopping", 0, 2) }),
    );
    assert!(hover["contents"]["value"].as_str().unwrap().contains("**template** `personal_shopping`"), "{hover}");

    // Go to definition from the use of `merchants` lands on its declaration.
    let def = client.request(
        "textDocument/definition",
        json!({ "textDocument": { "uri": doc }, "position": position(&text, "in merchants", 0, 4) }),
    );
    assert_eq!(def["uri"], doc);
    assert_eq!(def["range"]["start"], position(&text, "merchants: set", 0, 0));

    // Completion inside the template offers its parameters and the implicit ones; outside it, none of them.
    let typing = text.replace("args.amount <= cap\n", "args.amount <= ca\n");
    client.notify(
        "textDocument/didChange",
        json!({ "textDocument": { "uri": doc, "version": 2 }, "contentChanges": [{ "text": typing }] }),
    );
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&typing, "<= ca\n", 0, 5) }),
    );
    let found: Vec<(&str, &str)> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["label"].as_str().unwrap(), i["detail"].as_str().unwrap()))
        .collect();
    assert!(found.contains(&("cap", "money")), "{found:?}");
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&typing, "<= ca\n", 0, 3) }),
    );
    let labels: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap()).collect();
    for param in ["cap", "merchants", "principal", "holder", "granted"] {
        assert!(labels.contains(&param), "{param} in {labels:?}");
    }
    let granted = items.as_array().unwrap().iter().find(|i| i["label"] == "granted").unwrap();
    assert_eq!(granted["detail"], "timestamp (every instance's)", "the parameter, not the keyword");
    let items = client.request(
        "textDocument/completion",
        json!({ "textDocument": { "uri": doc }, "position": position(&typing, "allow read_only", 0, 6) }),
    );
    let labels: Vec<&str> = items.as_array().unwrap().iter().map(|i| i["label"].as_str().unwrap()).collect();
    // (`granted` is offered everywhere as the keyword of `granted by`; the parameters only inside the template.)
    assert!(!labels.contains(&"cap") && !labels.contains(&"merchants"), "{labels:?}");

    client.request("shutdown", Value::Null);
    client.notify("exit", Value::Null);
    assert!(client.child.wait().unwrap().success());
}

/// The same server under a real client: Debian's neovim, headless (scripts/test-deps.sh installs it), driven by
/// tests/editors/neovim.lua.
#[test]
fn neovim_as_the_client() {
    let dir = workspace("lsp-neovim");
    let out = dir.join("seen.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/editors/neovim.lua");
    let mut child = Command::new("nvim")
        .args(["--headless", "--clean", "-n", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("REMIT", env!("CARGO_BIN_EXE_remit"))
        .env("POLICY", dir.join("policy.remit"))
        .env("OUT", &out)
        .stdin(Stdio::null())
        .spawn()
        .expect("neovim (scripts/test-deps.sh installs it)");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "neovim did not finish in 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("neovim wrote its report")).unwrap();
    assert_eq!(seen["got"], true, "{seen}");
    let d = &seen["diagnostics"][0];
    assert_eq!(d["code"], "remit::unknown-tool", "{seen}");
    assert!(d["message"].as_str().unwrap().contains("did you mean `add_to_cart`"), "{seen}");
    assert!(seen["hover"]["contents"]["value"].as_str().unwrap().contains("financial_operation"), "{seen}");
    assert!(seen["definition"]["uri"].as_str().unwrap().ends_with("std/tools.remit"), "{seen}");
}

/// Input that is not LSP: a frame whose body is not a JSON-RPC message is skipped and the session goes on
/// (lsp-server says so only in its error's text, which src/cli/lsp.rs reads); a request whose parameters are not its
/// method's gets an error; a frame without `Content-Length` ends the session with status 2, as nothing after it can
/// be trusted. And `exit` without `shutdown` is status 1 (LSP 3.17).
#[test]
fn malformed_input_and_exit_statuses() {
    let mut client = Client::start();
    for body in ["{not json", r#"{"jsonrpc":"2.0"}"#] {
        write!(client.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    }
    let init = client.request("initialize", json!({ "processId": null, "capabilities": {} }));
    assert_eq!(init["capabilities"]["positionEncoding"], "utf-16");
    let hover = json!({ "textDocument": { "uri": "file:///nowhere/policy.remit" } }); // no `position`
    client.send(json!({ "jsonrpc": "2.0", "id": 99, "method": "textDocument/hover", "params": hover }));
    loop {
        let message = client.next();
        if message["id"] == 99 {
            assert_eq!(message["error"]["code"], -32602, "{message}");
            break;
        }
    }
    write!(client.stdin, "Content-Type: text/plain\r\n\r\n{{}}").unwrap();
    client.stdin.flush().unwrap();
    assert_eq!(client.child.wait().unwrap().code(), Some(2));

    let mut client = Client::start();
    client.request("initialize", json!({ "processId": null, "capabilities": {} }));
    client.notify("exit", Value::Null);
    assert_eq!(client.child.wait().unwrap().code(), Some(1));
}
