//! The `gantry` command: parse, then hand over to the library.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than the C library's malloc: see host/Cargo.toml.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = gantry::cli::Cli::parse();
    let export = gantry::telemetry::TraceExport {
        otlp_endpoint: cli.otlp_endpoint.clone(),
    };
    let _telemetry = match gantry::telemetry::init(cli.log_format, &export) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: setting up telemetry: {e:#}");
            return ExitCode::from(gantry::cli::exit::OTHER);
        }
    };
    gantry::cli::run(cli)
}
