//! `remit build` is linear in the number of mandates (issue 7, item 4). It used to be quadratic: every rule's
//! location was computed by scanning its file from the start, and every gate looked its rank up in a list.
//! Timing on a shared machine is noisy, so the bound is loose: four times the mandates must compile in well under
//! eight times the time (the quadratic code took sixteen times as long; linear code takes four).

use std::time::{Duration, Instant};

/// The shape of `scripts/gen-mandates.py`: per-customer mandates over one tool.
fn policy(mandates: usize) -> String {
    let mut text = String::from(
        "approval sign_off {\n  binds target\n  ttl 1h\n}\n\ntool pay(amount: money, merchant: string, memo: string) \
         {\n  effects financial_operation\n  level local_change\n  side effects\n}\n",
    );
    for i in 0..mandates {
        text.push_str(&format!(
            "\nmandate m{i} for \"org:customer-{i}\" {{\n  holder \"agent:assistant-{i}\"\n  purpose \"pay the bills\"\n  \
             allow pay where args.merchant in [\"shop-{i}\", \"utility-{}\"]\n  forbid pay where args.memo == \
             \"blocked-{i}\"\n  limit pay: args.amount <= {} USD\n  require approval sign_off for pay where args.amount \
             > {} USD\n}}\n",
            i % 97,
            100 + i % 900,
            50 + i % 50
        ));
    }
    text
}

/// The fastest of three `remit_lang::wasm::compile` runs of a policy with `mandates` mandates.
fn build_time(mandates: usize) -> Duration {
    let mut sources = remit_lang::stdlib::sources();
    sources.add("mandates.remit", policy(mandates));
    let checked = remit_lang::check::check_with(sources, remit_lang::check::Options { narrowing: false });
    let program = checked.program.unwrap_or_else(|| panic!("{:?}", &checked.diagnostics[..1]));
    (0..3)
        .map(|_| {
            let start = Instant::now();
            remit_lang::wasm::compile(&program).unwrap();
            start.elapsed()
        })
        .min()
        .unwrap()
}

#[test]
fn build_is_linear_in_the_number_of_mandates() {
    let (small, large) = (build_time(1_000), build_time(4_000));
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    eprintln!("1,000 mandates: {small:?}, 4,000: {large:?} ({ratio:.1}×)");
    assert!(ratio < 8.0, "1,000 mandates: {small:?}, 4,000: {large:?} ({ratio:.1}×; linear is 4×)");
}
