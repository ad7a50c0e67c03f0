//! A gateway served in-process over HTTP(S) on a free loopback port, for the tests that call it as a client would:
//! the library's router and server on a runtime of its own thread, over a fresh SQLite store in a folder of its
//! own and a fixed clock, with the tokens (and reloader, TLS) a test gives; stopped, and its folder removed, when
//! dropped. The listener is bound before this returns, so the gateway is ready: a request queues until it is served.
//! (`served` is the other kind: a `remit serve` process, for the tests of the command.)

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use remit_gateway::client::blocking::{request, Response};
use remit_gateway::core::FixedClock;
use remit_gateway::http::{router_with_reload, serve, Reloader, Tokens};
use remit_gateway::https::ServerTls;
use remit_gateway::{Config, Durability, Gateway, Policy, PolicyMeta, SqliteStore};
use remit_host::Runtime;
use remit_lang::ir::Program;
use serde_json::Value;

/// The instant every served gateway's clock shows (tests that need another move [`HttpGateway::clock`]).
pub const NOW: &str = "2026-12-03T15:30:00Z";

/// `program` compiled to a decision module and loaded, with its gateway metadata (as `remit serve FOLDER` does).
pub fn policy(program: &Program) -> Policy {
    let compiled = Runtime::new().unwrap().load(&remit_lang::wasm::compile(program).unwrap()).unwrap();
    Policy::new(compiled, PolicyMeta::from_program(program)).unwrap()
}

/// What a test chooses besides the policy; the default is no token, no reload, plain HTTP.
#[derive(Default)]
pub struct Options {
    pub tokens: Tokens,
    /// `base_url` is replaced by the served address, so access requests' URLs point at this gateway.
    pub config: Config,
    pub reloader: Option<Reloader>,
    pub tls: Option<ServerTls>,
}

pub struct HttpGateway {
    pub address: SocketAddr,
    pub https: bool,
    pub gateway: Arc<Gateway>,
    pub store: Arc<SqliteStore>,
    pub clock: Arc<FixedClock>,
    /// The test's folder (`support::temp_dir`): the store's, and whatever else the test writes there.
    pub dir: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpGateway {
    /// Serves `policy` for the test `name` (its folder is `remit-NAME-PID` under the temporary directory).
    pub fn start(name: &str, policy: Policy, options: Options) -> HttpGateway {
        let Options { tokens, config, reloader, tls } = options;
        let dir = super::temp_dir(name);
        let store = Arc::new(SqliteStore::open(&dir.join("state.db"), Durability::Process).unwrap());
        let clock = Arc::new(FixedClock::new(remit_lang::value::parse_timestamp(NOW).unwrap()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let https = tls.is_some();
        let scheme = if https { "https" } else { "http" };
        let config = Config { base_url: format!("{scheme}://{address}"), ..config };
        let gateway = Arc::new(Gateway::new(policy, store.clone(), clock.clone(), config));
        let served = gateway.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            runtime.block_on(async move {
                listener.set_nonblocking(true).unwrap();
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                serve(listener, router_with_reload(served, tokens, reloader), tls, async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            });
        });
        HttpGateway { address, https, gateway, store, clock, dir, stop: Some(stop), thread: Some(thread) }
    }

    /// The URL of `path` on this gateway.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", if self.https { "https" } else { "http" }, self.address)
    }

    /// `method path` with `token` as the bearer, and `body` as JSON.
    pub fn call(&self, method: &str, path: &str, token: Option<&str>, body: Option<&[u8]>) -> Response {
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        if body.is_some() {
            headers.push(("Content-Type", "application/json"));
        }
        request(method, &self.url(path), &headers, body).unwrap()
    }

    /// `POST path` of the JSON `body`: the status and the answer's JSON.
    pub fn post_json(&self, path: &str, body: &[u8], token: Option<&str>) -> (u16, Value) {
        let response = self.call("POST", path, token, Some(body));
        (response.status, response.json())
    }

    /// Loads `data` (the admin API's JSON format) into the gateway's data sets, or fails the test.
    pub fn load_data(&self, admin_token: &str, data: &[u8]) {
        let (status, body) = self.post_json("/admin/v1/data/load?format=json", data, Some(admin_token));
        assert_eq!(status, 200, "the data loads: {body}");
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::fs::remove_dir_all(&self.dir).ok();
    }
}
