//! Nothing a user runs depends on today's date (issue 28, item 1): `remit serve --clock` serves a mandate as on the
//! instant it names, whatever the system clock says; the gateway warns at start of mandates that expired or expire
//! soon and exports each mandate's seconds to expiry; `remit check` warns the same (`remit::mandate-expiring`) at
//! `--now`, `SOURCE_DATE_EPOCH` or the system clock. `scripts/any-date.sh` (in `.ci/run`) runs the main job and the
//! gateway and MCP tests again a year and ten years ahead.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use remit_gateway::client::blocking::request;
use serde_json::{json, Value};

mod support;
use support::served::Served;
use support::{remit_bin, root, run};

/// `remit serve` of the wallet as it was, Alice's own static mandate (tests/fixtures/wallet-static: the shipped
/// example needs an instance granted first, which scripts/any-date.sh's run of the main job does), on a free loopback
/// port with `extra` flags; its stderr is collected.
struct Gateway {
    served: Served,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Gateway {
    fn start(name: &str, extra: &[&str]) -> Gateway {
        let store = support::temp_dir(name).join("state.db");
        let mut served = Served::start(
            std::process::Command::new(remit_bin())
                .arg("serve")
                .arg(root().join("tests/fixtures/wallet-static"))
                .args(["--listen", "127.0.0.1:0", "--store"])
                .arg(format!("sqlite:{}", store.display()))
                .args(extra)
                .stderr(Stdio::piped()),
        );
        let (send, stderr) = std::sync::mpsc::channel();
        let mut err = served.child.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            let _ = send.send(text);
        });
        Gateway { served, stderr }
    }

    /// The agent's 80 USD payment of the README: `(decision, reasons)`.
    fn pay(&self) -> (bool, Vec<String>) {
        let body = json!({"subject": {"type": "agent", "id": "agent:shopper"},
                          "action": {"name": "make_payment",
                                     "properties": {"merchant": "acme-grocer", "amount": "80.00 USD"}},
                          "resource": {"type": "order", "id": "order:991"}, "context": {"operation_id": "op-1"}})
        .to_string();
        let answer = request("POST", &format!("{}/access/v1/evaluation", self.served.url), &[], Some(body.as_bytes()))
            .unwrap()
            .json();
        let reasons = answer["context"]["reasons"].as_array().unwrap().iter();
        (answer["decision"].as_bool().unwrap(), reasons.map(|r| r.as_str().unwrap().to_string()).collect())
    }

    /// The value of `remit_mandate_expiry_seconds` for `mandate` in `/metrics`.
    fn expiry_seconds(&self, mandate: &str) -> i64 {
        let metrics = request("GET", &format!("{}/metrics", self.served.url), &[], None).unwrap().text();
        let name = format!("remit_mandate_expiry_seconds{{mandate=\"{mandate}\"}} ");
        let line = metrics.lines().find_map(|l| l.strip_prefix(&name)).unwrap_or_else(|| panic!("{metrics}"));
        line.parse().unwrap()
    }

    /// Stops the gateway and returns what it wrote on stderr.
    fn stop(self) -> String {
        drop(self.served);
        self.stderr.recv_timeout(Duration::from_secs(10)).unwrap_or_default()
    }
}

/// 2027-01-01T00:00:00Z, the end of the wallet mandate, and two instants on either side of it.
const WALLET_END: i64 = 1_798_761_600;
const DEMO: &str = "2026-12-03T15:30:00Z";
const DEMO_SECONDS: i64 = 1_796_311_800;
const LATE: &str = "2027-01-15T12:00:00Z";
const LATE_SECONDS: i64 = 1_800_014_400;

#[test]
fn with_a_clock_the_gateway_decides_as_on_that_instant_on_any_date() {
    // Inside the window: the payment escalates to Alice (it needs her approval), as the main job expects.
    let gateway = Gateway::start("any-date-demo", &["--clock", DEMO]);
    let (allowed, reasons) = gateway.pay();
    assert!(!allowed);
    assert_eq!(reasons, ["approval.missing"]);
    // The clock advances in real time from the instant given: a few seconds at most have passed.
    let left = gateway.expiry_seconds("wallet");
    assert!((0..=30).contains(&(WALLET_END - DEMO_SECONDS - left)), "{left}");
    let said = gateway.stop();
    assert!(said.contains(&format!("clock: starts at {DEMO}")), "{said}");
    assert!(
        said.contains("warning[remit::mandate-expiring]: mandate `wallet` expires on 2027-01-01T00:00:00Z, in 28 days"),
        "{said}"
    );

    // After it: denied, and said at start; the metric is negative.
    let gateway = Gateway::start("any-date-late", &["--clock", LATE]);
    assert_eq!(gateway.pay(), (false, vec!["mandate.expired".to_string()]));
    let left = gateway.expiry_seconds("wallet");
    assert!((0..=30).contains(&(WALLET_END - LATE_SECONDS - left)), "{left}");
    assert!(left < 0);
    let said = gateway.stop();
    assert!(said.contains("mandate `wallet` expired on 2027-01-01T00:00:00Z, 14 days ago"), "{said}");

    // A shorter horizon says nothing of a mandate that ends later than it.
    let gateway = Gateway::start("any-date-week", &["--clock", DEMO, "--expiry-horizon", "7d"]);
    let said = gateway.stop();
    assert!(!said.contains("mandate-expiring"), "{said}");
}

#[test]
fn a_bad_clock_or_horizon_is_refused_by_name_and_changes_nothing() {
    let dir = support::temp_dir("any-date-bad-flags");
    for (flag, value, says) in [
        ("--clock", "2026-12-03", "--clock is an instant"),
        ("--expiry-horizon", "30", "--expiry-horizon is a duration"),
    ] {
        let out = run(
            std::process::Command::new(remit_bin())
                .arg("serve")
                .arg(root().join("examples/wallet"))
                .args([flag, value])
                .current_dir(&dir),
            Duration::from_secs(60),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(&format!("`{value}`: {says}")), "{stderr}");
        // Refused before anything is opened: not even the default store file is made.
        assert!(!dir.join("remit-gateway.db").exists(), "{flag} {value}: a store was made");
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `remit check` on the examples at an instant, with the environment given; `(success, stderr)`.
fn check(args: &[&str], epoch: Option<&str>) -> (bool, String) {
    let mut command = std::process::Command::new(remit_bin());
    command.arg("check").args(args).current_dir(root()).env("NO_COLOR", "1").env_remove("SOURCE_DATE_EPOCH");
    if let Some(epoch) = epoch {
        command.env("SOURCE_DATE_EPOCH", epoch);
    }
    let out = run(&mut command, Duration::from_secs(60));
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn remit_check_warns_of_expiring_and_expired_mandates_at_the_instant_it_is_told() {
    // Within 30 days of the end: one warning for the wallet (its only mandate).
    let (ok, said) = check(&["examples/wallet", "--now", DEMO], None);
    assert!(ok, "a warning does not fail the check: {said}");
    assert!(said.contains("mandate `wallet` expires on 2027-01-01T00:00:00Z, in 28 days"), "{said}");
    assert!(said.contains("0 error(s), 1 warning(s)"), "{said}");
    // A horizon of 0s: only mandates already expired.
    let (_, said) = check(&["examples/wallet", "--now", DEMO, "--expiry-horizon", "0s"], None);
    assert!(said.contains("0 error(s), 0 warning(s)"), "{said}");
    // After the end, expired; `SOURCE_DATE_EPOCH` is the instant when `--now` is not given, and `--now` wins.
    let (_, said) = check(&["examples/wallet"], Some(&LATE_SECONDS.to_string()));
    assert!(said.contains("mandate `wallet` expired on 2027-01-01T00:00:00Z, 14 days ago"), "{said}");
    let (_, said) = check(&["examples/wallet", "--now", "2026-11-01T00:00:00Z"], Some(&LATE_SECONDS.to_string()));
    assert!(said.contains("0 error(s), 0 warning(s)"), "{said}");
    // A family ending together is one warning, at its root: web-publication's nine mandates all end on 2027-01-01,
    // seven of them under `web_root`; the two roots are warned of.
    let (_, said) = check(&["examples/web-publication", "--now", DEMO], None);
    assert!(said.contains("0 error(s), 2 warning(s)"), "{said}");
    assert!(said.contains("mandate `web_root` expires") && said.contains("mandate `announcements` expires"), "{said}");
    // Bad instants are refused by name.
    let (ok, said) = check(&["examples/wallet", "--now", "tomorrow"], None);
    assert!(!ok && said.contains("`tomorrow`: --now is an instant"), "{said}");
    let (ok, said) = check(&["examples/wallet"], Some("soon"));
    assert!(!ok && said.contains("`soon`: SOURCE_DATE_EPOCH is a number of seconds"), "{said}");
}

#[test]
fn the_examples_json_requests_carry_their_own_now() {
    // `remit eval` never reads a clock: every shipped request names its instant, so its decision is the same on
    // any date (the main job compares the module's bytes with the interpreter's on each).
    for example in ["wallet", "bank-disputes", "club", "web-publication"] {
        for path in support::examples::sorted(&root().join("examples").join(example).join("requests")) {
            let request: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            assert!(request["context"]["now"].is_string(), "{} names no `context.now`", path.display());
        }
    }
}
