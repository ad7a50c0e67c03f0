//! The way back to the agent: its messages written one per line under a lock (stdio), and the agents' open streams
//! for tool-list changes (a `subscriptions/listen` of revision 2026-07-28, or a session's `GET` event stream over
//! HTTP), told when a tool list changes. Depends on `protocol` only.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use serde_json::{json, Map, Value as Json};

use crate::protocol::{line, META_SUBSCRIPTION_ID};

/// Where the agent's messages go: one JSON value per line, written whole under a lock; and the agents' open
/// `subscriptions/listen` requests (revision 2026-07-28), which are told when a tool list changes.
#[derive(Clone)]
pub struct Outbox {
    writer: Arc<Mutex<Box<dyn Write + Send>>>,
    listeners: Arc<Mutex<Vec<Listener>>>,
    /// The agent opened a session of the earlier revisions (`initialize`): it is sent the change notifications an
    /// upstream sends unasked. An agent of revision 2026-07-28 only is not (that revision sends them only on a
    /// `subscriptions/listen` stream the agent opened).
    pub(crate) in_session: Arc<std::sync::atomic::AtomicBool>,
}

/// The notifications revision 2026-07-28 sends only on `subscriptions/listen` streams (the earlier ones, unasked).
const CHANGE_NOTIFICATIONS: [&str; 4] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
];

/// An agent's open stream for tool-list changes: a `subscriptions/listen` (its request id, which tags every message),
/// or the event stream of a session of the earlier revisions (no id: plain notifications).
struct Listener {
    id: Option<Json>,
    stream: Box<dyn AgentStream>,
}

/// Where the messages of an agent's stream go: the agent's stdio, or the channel of an HTTP event stream.
pub trait AgentStream: Send {
    /// Sends one message; `false` when the stream is gone.
    fn send(&self, message: Json) -> bool;
    /// Whether the agent still holds the stream (a closed one is dropped when another opens, so that streams opened
    /// and closed while nothing changes do not pile up).
    fn is_open(&self) -> bool;
}

impl AgentStream for tokio::sync::mpsc::UnboundedSender<Json> {
    fn send(&self, message: Json) -> bool {
        tokio::sync::mpsc::UnboundedSender::send(self, message).is_ok()
    }

    fn is_open(&self) -> bool {
        !self.is_closed()
    }
}

/// The agent's stdio (not the writer itself: the outbox that holds the listeners holds the writer).
struct AgentStdio(std::sync::Weak<Mutex<Box<dyn Write + Send>>>);

impl AgentStream for AgentStdio {
    fn send(&self, message: Json) -> bool {
        self.0.upgrade().is_some_and(|writer| write_line(&writer, &line(&message)))
    }

    fn is_open(&self) -> bool {
        self.0.strong_count() > 0
    }
}

/// Writes one line whole; whether it was written.
fn write_line(writer: &Mutex<Box<dyn Write + Send>>, line: &[u8]) -> bool {
    let mut writer = writer.lock().unwrap_or_else(|p| p.into_inner());
    writer.write_all(line).and_then(|()| writer.flush()).is_ok()
}

/// A notification of the `subscriptions/listen` stream of request `id`: tagged with its id, as revision 2026-07-28
/// requires of every message on the stream.
fn on_stream(id: &Json, method: &str, mut params: Map<String, Json>) -> Json {
    let mut meta = Map::with_capacity(1);
    meta.insert(META_SUBSCRIPTION_ID.into(), id.clone());
    params.insert("_meta".into(), Json::Object(meta));
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Outbox")
    }
}

impl Outbox {
    pub fn new(writer: Box<dyn Write + Send>) -> Outbox {
        Outbox { writer: Arc::new(Mutex::new(writer)), listeners: Default::default(), in_session: Default::default() }
    }

    /// Sends a message from an upstream that no request of the agent's asked for: a change notification only to an
    /// agent that opened a session of the earlier revisions ([`Outbox::in_session`]), anything else as it is.
    pub(crate) fn send_unasked(&self, message: &Json) {
        let method = message.get("method").and_then(Json::as_str).unwrap_or("");
        if CHANGE_NOTIFICATIONS.contains(&method) && !self.in_session.load(Ordering::Relaxed) {
            return;
        }
        self.send(message);
    }

    /// Opens an agent's `subscriptions/listen` (request `id`, with `params`): the acknowledgement, then, while `send`
    /// returns true, `notifications/tools/list_changed` whenever an upstream's tool list changes (what the agent may
    /// list can change with it). Only tool-list changes are honoured, and the acknowledgement says so: the proxy
    /// passes no prompt or resource notifications on this revision's streams.
    pub fn listen(&self, id: &Json, params: Option<&Json>, stream: Box<dyn AgentStream>) {
        let asked = params.and_then(|p| p.get("notifications")).and_then(|n| n.get("toolsListChanged"));
        let tools = asked == Some(&Json::Bool(true));
        let mut honoured = Map::new();
        if tools {
            honoured.insert("toolsListChanged".into(), Json::Bool(true));
        }
        let mut params = Map::with_capacity(1);
        params.insert("notifications".into(), Json::Object(honoured));
        if stream.send(on_stream(id, "notifications/subscriptions/acknowledged", params)) && tools {
            self.add(Listener { id: Some(id.clone()), stream });
        }
    }

    /// Tells `stream` of every tool-list change, as plain `notifications/tools/list_changed` (the event stream an
    /// agent of the earlier revisions opens with `GET`), while it is open.
    pub fn watch(&self, stream: Box<dyn AgentStream>) {
        self.add(Listener { id: None, stream });
    }

    fn add(&self, listener: Listener) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|l| l.stream.is_open());
        listeners.push(listener);
    }

    /// [`Outbox::listen`] for an agent on this outbox's own writer (stdio).
    pub(crate) fn listen_here(&self, id: &Json, params: Option<&Json>) {
        self.listen(id, params, Box::new(AgentStdio(Arc::downgrade(&self.writer))));
    }

    /// Ends the agent's subscription `id` (it cancelled the request); whether there was one.
    pub(crate) fn unlisten(&self, id: &Json) -> bool {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        let before = listeners.len();
        listeners.retain(|l| l.id.as_ref() != Some(id));
        listeners.len() != before
    }

    /// Tells every open subscription that a tool list changed (dropping those whose stream is gone).
    pub(crate) fn tools_changed(&self) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|p| p.into_inner());
        listeners.retain(|l| {
            let method = "notifications/tools/list_changed";
            l.stream.send(match &l.id {
                Some(id) => on_stream(id, method, Map::new()),
                None => json!({"jsonrpc": "2.0", "method": method}),
            })
        });
    }

    pub(crate) fn send(&self, message: &Json) {
        self.send_line(&line(message));
    }

    /// Sends one message already serialized, ending with its newline.
    pub(crate) fn send_line(&self, line: &[u8]) {
        // The agent went away: nothing to tell it; the read loop ends at its EOF.
        write_line(&self.writer, line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_the_agent_closed_are_dropped_when_another_opens() {
        let outbox = Outbox::new(Box::new(std::io::sink()));
        let tools = json!({"notifications": {"toolsListChanged": true}});
        let mut kept = Vec::new();
        for i in 0..4 {
            let (sender, mut messages) = tokio::sync::mpsc::unbounded_channel::<Json>();
            outbox.listen(&json!(i), Some(&tools), Box::new(sender));
            let ack = messages.try_recv().unwrap();
            assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], i);
            if i % 2 == 0 {
                kept.push(messages);
            }
        }
        // A stream that asks for nothing the proxy honours is acknowledged and not kept.
        let (sender, mut messages) = tokio::sync::mpsc::unbounded_channel::<Json>();
        outbox.listen(
            &json!("prompts"),
            Some(&json!({"notifications": {"promptsListChanged": true}})),
            Box::new(sender),
        );
        assert_eq!(messages.try_recv().unwrap()["params"]["notifications"], json!({}));
        let (sender, watched) = tokio::sync::mpsc::unbounded_channel::<Json>();
        outbox.watch(Box::new(sender));
        // Streams 1 and 3 were closed: dropped when the watch opened.
        assert_eq!(outbox.listeners.lock().unwrap().len(), 3);
        outbox.tools_changed();
        for (messages, id) in kept.iter_mut().zip([0, 2]) {
            let changed = messages.try_recv().unwrap();
            assert_eq!(changed["method"], "notifications/tools/list_changed");
            assert_eq!(changed["params"]["_meta"][META_SUBSCRIPTION_ID], id);
        }
        drop(watched);
        outbox.tools_changed();
        assert_eq!(outbox.listeners.lock().unwrap().len(), 2, "a stream gone when a change is sent is dropped too");
    }
}
