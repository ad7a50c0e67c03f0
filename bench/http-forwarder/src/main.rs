//! `remit-http-forwarder UPSTREAM_ADDRESS`: an HTTP/1.1 server on a loopback port (printed on stderr as `forwarder
//! listening on port N`) that forwards every request, headers and body, to `UPSTREAM_ADDRESS` and answers with the
//! upstream's response, and does nothing else: no JSON, no decision, no log.
//!
//! It is built as `remit mcp-proxy --listen` serves and forwards (`remit_gateway::http::run_router` and
//! `remit_gateway::client`): hyper's HTTP/1.1 server and client over tokio, a runtime of one worker per core each accepting
//! on the listener, each keeping its own connection to the upstream, `TCP_NODELAY` on every socket. bench/mcp
//! (`--forwarder PATH`) times it beside the proxy, so "added by the forwarder" is what terminating HTTP on this stack
//! costs on the machine, and the proxy's figure minus it is what deciding, logging and MCP cost.

use std::cell::RefCell;
use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

thread_local! {
    /// This runtime's kept connection to the upstream (its one worker is this thread).
    static KEPT: RefCell<Option<SendRequest<Full<Bytes>>>> = const { RefCell::new(None) };
}

/// Headers a hop answers for itself, not forwarded.
fn hop_by_hop(name: &hyper::header::HeaderName) -> bool {
    matches!(name.as_str(), "connection" | "keep-alive" | "transfer-encoding" | "host" | "content-length")
}

async fn connect(upstream: &str) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = tokio::net::TcpStream::connect(upstream).await.map_err(|e| e.to_string())?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn exchange(
    upstream: &str,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, String> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    let mut forwarded = hyper::Request::builder().method(parts.method).uri(parts.uri).header("host", upstream);
    for (name, value) in parts.headers.iter().filter(|(name, _)| !hop_by_hop(name)) {
        forwarded = forwarded.header(name, value);
    }
    let forwarded = forwarded.body(Full::new(body)).map_err(|e| e.to_string())?;
    let mut sender = match KEPT.with(|kept| kept.borrow_mut().take()) {
        Some(sender) if !sender.is_closed() => sender,
        _ => connect(upstream).await?,
    };
    sender.ready().await.map_err(|e| e.to_string())?;
    let response = sender.send_request(forwarded).await.map_err(|e| e.to_string())?;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    KEPT.with(|kept| *kept.borrow_mut() = Some(sender));
    let mut answer = hyper::Response::builder().status(parts.status);
    for (name, value) in parts.headers.iter().filter(|(name, _)| !hop_by_hop(name)) {
        answer = answer.header(name, value);
    }
    answer.body(Full::new(body)).map_err(|e| e.to_string())
}

async fn forward(
    upstream: String,
    request: hyper::Request<hyper::body::Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    Ok(exchange(&upstream, request).await.unwrap_or_else(|e| {
        let mut failed = hyper::Response::new(Full::new(Bytes::from(e)));
        *failed.status_mut() = hyper::StatusCode::BAD_GATEWAY;
        failed
    }))
}

fn main() {
    let upstream = std::env::args().nth(1).expect("remit-http-forwarder UPSTREAM_ADDRESS");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    eprintln!("forwarder listening on port {}", listener.local_addr().expect("address").port());
    let count = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers: Vec<_> = (0..count)
        .map(|_| {
            let (listener, upstream) = (listener.try_clone().expect("listener"), upstream.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    loop {
                        let Ok((stream, _)) = listener.accept().await else { continue };
                        stream.set_nodelay(true).ok();
                        let upstream = upstream.clone();
                        tokio::spawn(async move {
                            let service = hyper::service::service_fn(move |request| forward(upstream.clone(), request));
                            let served = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                            drop(served);
                        });
                    }
                })
            })
        })
        .collect();
    for worker in workers {
        worker.join().ok();
    }
}
