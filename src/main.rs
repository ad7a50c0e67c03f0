//! The `remit` command line: the only place that knows files, terminals and output formats.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
