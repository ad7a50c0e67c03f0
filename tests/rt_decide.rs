//! The runtime crate's decisions and tool listings (crates/remit-rt/src/decide.rs, visible.rs), natively over each
//! policy's image, against the interpreter byte for byte: on every request of the corpus, the garbage inputs, and
//! mutated requests (`REMIT_DIFF_ROUNDS` per unit, default 300).

mod support;

use remit_rt::decide::Work;
use remit_rt::image::Image;
use remit_rt::out::Out;

fn decide_native(image: &Image<'_>, request: &[u8], work: &mut Work, out: &mut [u8]) -> Vec<u8> {
    support::rt_parse(request, |parsed| {
        let mut out = Out::new(out);
        remit_rt::decide::decide(image, parsed, work, &mut out);
        out.written().to_vec()
    })
}

fn listing_native(image: &Image<'_>, request: &[u8], work: &mut Work, out: &mut [u8]) -> Vec<u8> {
    support::rt_parse(request, |parsed| {
        let mut out = Out::new(out);
        remit_rt::decide::visible_tools(image, parsed, work, &mut out);
        out.written().to_vec()
    })
}

#[test]
fn native_decisions_equal_the_interpreter() {
    let mut work = Box::new(Work::EMPTY);
    let mut failures = Vec::new();
    let mut compared = 0;
    for unit in support::corpus() {
        let bytes = remit::wasm::image::write(&unit.program).unwrap();
        let image = Image::new(&bytes).unwrap();
        let mut out = vec![0u8; image.header.output_limit as usize];
        let mut inputs = unit.requests.clone();
        if let Some(first) = unit.requests.first() {
            inputs.extend(support::garbage(first));
        }
        for request in &inputs {
            let expected = remit::eval::decide(&unit.program, request).to_json();
            let got = decide_native(&image, request, &mut work, &mut out);
            compared += 1;
            if got != expected.as_bytes() {
                failures.push(format!(
                    "{}: {}\n  interpreter: {expected}\n  runtime:     {}",
                    unit.name,
                    String::from_utf8_lossy(&request[..request.len().min(300)]),
                    String::from_utf8_lossy(&got)
                ));
            }
            let expected = remit::eval::visible_tools(&unit.program, request).to_json();
            let got = listing_native(&image, request, &mut work, &mut out);
            if got != expected.as_bytes() {
                failures.push(format!(
                    "{} (listing): {}\n  interpreter: {expected}\n  runtime:     {}",
                    unit.name,
                    String::from_utf8_lossy(&request[..request.len().min(300)]),
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    let shown: Vec<&String> = failures.iter().take(8).collect();
    assert!(failures.is_empty(), "{} of {compared} requests differ; first:\n{shown:#?}", failures.len());
}
