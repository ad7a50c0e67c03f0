//! `remit-load URL CONNECTIONS SECONDS BODY.json`: POSTs BODY to URL over CONNECTIONS keep-alive connections (one
//! thread each) for SECONDS, then prints decisions per second, latency percentiles (p50, p90, p99, max) and errors
//! (non-200 answers or broken connections). Loopback only: the URL must be `http://127.x.x.x:PORT/PATH` or
//! `http://localhost:PORT/PATH`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: remit-load URL CONNECTIONS SECONDS BODY.json");
        std::process::exit(2);
    }
    let rest = args[1].strip_prefix("http://").expect("an http:// URL");
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    assert!(host.starts_with("127.") || host.starts_with("localhost"), "loopback only");
    let connections: usize = args[2].parse().expect("CONNECTIONS");
    let seconds: f64 = args[3].parse().expect("SECONDS");
    let body = std::fs::read(&args[4]).expect("BODY.json");
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let results: Vec<(Vec<Duration>, usize)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..connections)
            .map(|_| scope.spawn(|| worker(host, &request, deadline)))
            .collect();
        workers.into_iter().map(|w| w.join().expect("a worker")).collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let errors: usize = results.iter().map(|r| r.1).sum();
    let mut latencies: Vec<Duration> = results.into_iter().flat_map(|r| r.0).collect();
    latencies.sort();
    let n = latencies.len();
    if n == 0 {
        println!("connections={connections} no answers, errors={errors}");
        return;
    }
    let at = |q: f64| latencies[((n as f64 * q) as usize).min(n - 1)].as_secs_f64() * 1e3;
    println!(
        "connections={connections} answers={n} per_second={:.0} p50={:.3}ms p90={:.3}ms p99={:.3}ms max={:.3}ms errors={errors}",
        n as f64 / elapsed,
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}

fn worker(host: &str, request: &[u8], deadline: Instant) -> (Vec<Duration>, usize) {
    let mut latencies = Vec::new();
    let mut errors = 0;
    let Ok(stream) = TcpStream::connect(host) else { return (latencies, 1) };
    stream.set_nodelay(true).ok();
    let mut writer = stream.try_clone().expect("a socket clone");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while Instant::now() < deadline {
        let sent = Instant::now();
        if writer.write_all(request).is_err() {
            return (latencies, errors + 1);
        }
        // Status line, headers (Content-Length), body.
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return (latencies, errors + 1);
        }
        let ok = line.split(' ').nth(1) == Some("200");
        let mut length = 0usize;
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return (latencies, errors + 1);
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return (latencies, errors + 1);
        }
        latencies.push(sent.elapsed());
        if !ok {
            errors += 1;
        }
    }
    (latencies, errors)
}
