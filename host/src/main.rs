//! The `gantry` command: parse, then hand over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = gantry::cli::Cli::parse();
    gantry::telemetry::init(cli.log_format);
    gantry::cli::run(cli)
}
