//! The proxy's stdio front (`remit mcp-proxy` without `--listen`): the agent's messages one per line on stdin, the
//! answers on stdout.
//!
//! Threads, not async: one thread reads the agent, one each upstream, agent requests run on a pool of worker threads
//! that grows whenever none is idle (decisions are synchronous: SQLite and wasmtime), and outcome entries are queued
//! in the gateway (written with the next decisions, or by a thread of their own when no call comes). A `tools/call`
//! for a stdio upstream whose tools are known takes a shorter way, because each hand-off between threads costs
//! scheduling latency on a busy machine: it is decided on the thread that reads the agent, written to the upstream
//! from there, and answered from the thread that reads the upstream (a sweeper thread fails it at its deadline):
//! the upstream's result is not parsed there, the decision is spliced into its text (`Forward::answer`).
//!
//! Depends on `proxy` (whose [`Proxy`] it runs), `protocol` and `decision`.

use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value as Json};

use crate::decision::Call;
use crate::protocol::for_earlier_agent;
use crate::protocol::{
    response, stateless_result, stateless_versions, LineRest, RpcError, INVALID_PARAMS, INVALID_REQUEST, MAX_MESSAGE,
    META_CAPABILITIES, META_VERSION, METHOD_NOT_FOUND, STATELESS_VERSION, SUPPORTED_VERSIONS, UNSUPPORTED_VERSION,
};
use crate::proxy::{Proxy, Refused};

impl Proxy {
    /// Serves the agent until its input ends, then stops the upstream.
    pub fn run(self: &Arc<Self>, mut input: impl BufRead) {
        // Requests run on worker threads, kept between requests (starting a thread per call costs more than the
        // call's own work); a new worker starts whenever none is idle, so a slow call never holds up another.
        // The request, and whether it is of the stateless revision (its result written as 2026-07-28 writes it).
        type Job = (Json, String, Option<Json>, bool);
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        let idle = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        let mut line = Vec::new();
        loop {
            line.clear();
            match std::io::Read::take(&mut input, MAX_MESSAGE as u64 + 1).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_MESSAGE {
                let error = RpcError::new(INVALID_REQUEST, format!("a message is at most {MAX_MESSAGE} bytes"));
                self.outbox.send(&response(&Json::Null, Err(error)));
                // Skip the rest of the oversize line (if its end was not read already), without keeping it.
                if !line.ends_with(b"\n") {
                    let _ = std::io::copy(
                        &mut LineRest { start: &[], rest: &mut input, ended: false },
                        &mut std::io::sink(),
                    );
                }
                continue;
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match self.accept(&self.identity, &line) {
                Err(Refused { reply, answer: true }) => self.outbox.send(&reply),
                // A request sent as a notification: JSON-RPC answers no notification (it is logged, not forwarded).
                Err(Refused { answer: false, .. }) => {}
                Ok(None) => {}
                Ok(Some((id, method, params))) => {
                    let stateless = match stateless_request(&method, params.as_ref()) {
                        Ok(stateless) => stateless,
                        Err(error) => {
                            self.outbox.send(&response(&id, Err(error)));
                            continue;
                        }
                    };
                    // A request of revision 2026-07-28 only (in the earlier ones `Proxy::request` refuses it).
                    if method == "subscriptions/listen" && stateless {
                        self.outbox.listen_here(&id, params.as_ref());
                        continue;
                    }
                    if method == "tools/call" && self.ready_here() {
                        self.call_tool_here(&id, params, stateless);
                        continue;
                    }
                    let job = (id, method, params, stateless);
                    // Claim an idle worker, or start one.
                    let claimed = idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
                    if !claimed {
                        let (proxy, queue, idle) = (self.clone(), queue.clone(), idle.clone());
                        workers.push(std::thread::spawn(move || loop {
                            let job = queue.lock().unwrap_or_else(|p| p.into_inner()).recv();
                            let Ok((id, method, params, stateless)) = job else { return };
                            let outcome = match method.as_str() {
                                "server/discover" => proxy.discover(&stateless_versions()),
                                _ => proxy.request(&proxy.identity, &id, &method, params),
                            };
                            let outcome = match stateless {
                                true => outcome.map(|r| stateless_result(&method, r)),
                                false => for_earlier_agent(outcome),
                            };
                            proxy.outbox.send(&response(&id, outcome));
                            idle.fetch_add(1, Ordering::AcqRel);
                        }));
                    }
                    let _ = jobs.send(job);
                }
            }
        }
        drop(jobs);
        for worker in workers {
            let _ = worker.join();
        }
        // And the calls answered from the upstreams' reader threads (each ends by its deadline at the latest), until
        // each answer is sent and its outcome queued.
        while self.in_flight.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        for slot in &self.slots {
            slot.current.lock().unwrap_or_else(|p| p.into_inner()).upstream.kill();
        }
        self.flush_outcomes();
    }

    /// Answers `tools/call` request `id` to the agent: decided on this thread, and when it is allowed, forwarded
    /// to its stdio upstream and answered from that upstream's reader thread — no hand-off to another thread on the
    /// way there or back. Only when [`Proxy::ready_here`]: a call that may have to wait for the upstream before it
    /// can be decided (a tool list not read yet, an upstream to start again) or goes to an HTTP upstream is a
    /// worker's.
    fn call_tool_here(self: &Arc<Self>, id: &Json, params: Option<Json>, stateless: bool) {
        let params = params.unwrap_or_else(|| json!({}));
        match self.decide_call(&self.identity, params) {
            Err(e) => self.outbox.send(&response(id, Err(e))),
            Ok(Call::Answered(result)) if stateless => {
                self.outbox.send(&response(id, Ok(stateless_result("tools/call", result))))
            }
            Ok(Call::Answered(result)) => self.outbox.send(&response(id, Ok(result))),
            Ok(Call::Forward(mut forward)) => {
                if stateless {
                    forward.in_stateless_revision(&self.identity);
                }
                let proxy = self.clone();
                self.forward_then(id.clone(), forward, move |line| proxy.outbox.send_line(line));
            }
        }
    }

    /// Whether a `tools/call` can be decided and forwarded without waiting for an upstream (see
    /// [`Proxy::call_tool_here`]): every upstream is a running stdio one whose tools are known.
    fn ready_here(&self) -> bool {
        self.slots.iter().all(|slot| slot.current.lock().unwrap_or_else(|p| p.into_inner()).upstream.http.is_none())
            && self.tools_known()
    }
}

/// Whether a request that came over stdio is of the stateless revision 2026-07-28, whose requests need no
/// `initialize` before them: its `params._meta` names that revision, and must then carry the client's capabilities
/// too. Why it is refused: `server/discover` (answered by the proxy) needs the stateless `_meta`; `initialize` is not
/// part of that revision; a revision the proxy does not speak is `-32022` with those it does.
fn stateless_request(method: &str, params: Option<&Json>) -> Result<bool, RpcError> {
    let meta = params.and_then(|p| p.get("_meta")).and_then(Json::as_object);
    let needs_meta = || {
        let text = format!("`params._meta` must carry `{META_VERSION}` and `{META_CAPABILITIES}`");
        RpcError::new(INVALID_PARAMS, text)
    };
    let Some(version) = meta.and_then(|m| m.get(META_VERSION)) else {
        return if method == "server/discover" { Err(needs_meta()) } else { Ok(false) };
    };
    let legacy = version.as_str().is_some_and(|v| SUPPORTED_VERSIONS.contains(&v));
    if version.as_str() != Some(STATELESS_VERSION) && !(legacy && method != "server/discover") {
        let shown = version.as_str().map_or_else(|| version.to_string(), str::to_string);
        let mut error = RpcError::new(UNSUPPORTED_VERSION, format!("protocol version `{shown}` is not supported"));
        error.data = Some(json!({"supported": stateless_versions(), "requested": version}));
        return Err(error);
    }
    if legacy {
        return Ok(false);
    }
    if !meta.and_then(|m| m.get(META_CAPABILITIES)).is_some_and(Json::is_object) {
        return Err(needs_meta());
    }
    if method == "initialize" {
        let text = format!("`initialize` is not part of MCP {STATELESS_VERSION}: use `server/discover`");
        return Err(RpcError::new(METHOD_NOT_FOUND, text));
    }
    Ok(true)
}
