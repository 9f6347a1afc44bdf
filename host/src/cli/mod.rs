//! The `gantry` command line.
//!
//! Exit codes: 0 success; 1 the plugin returned an error; 2 usage error;
//! 3 the plugin breached a limit, trapped or broke the contract; 4 the
//! plugin could not be loaded; 5 bad input files or other failures.
//! `plugin apply` has its own: 4 refused, 5 no answer in time, 6 not
//! built, published or applied; `plugin test`: 1 a case failed (see
//! [`exit`]).

// What runs in a cluster: every build has these.
pub mod docs;
mod operator;
mod rbac;
mod webhook;

// The tools of plugin authors (feature `dev-tools`, on by default; the
// image is built without it).
#[cfg(feature = "dev-tools")]
mod answer_diff;
#[cfg(feature = "dev-tools")]
mod apply;
#[cfg(feature = "dev-tools")]
mod bench;
#[cfg(feature = "dev-tools")]
mod component;
#[cfg(feature = "dev-tools")]
mod convert;
#[cfg(feature = "dev-tools")]
mod dev;
#[cfg(feature = "dev-tools")]
mod local_cluster;
#[cfg(feature = "dev-tools")]
mod plugin;
#[cfg(feature = "dev-tools")]
mod plugin_serve;
#[cfg(feature = "dev-tools")]
mod plugin_test;
#[cfg(feature = "dev-tools")]
mod policy;
#[cfg(feature = "dev-tools")]
mod rollout;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use gantry_operator::telemetry::LogFormat;

/// Kubernetes operators with reconcile logic in sandboxed WebAssembly.
#[derive(Debug, Parser)]
#[command(name = "gantry", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        env = "GANTRY_LOG_FORMAT"
    )]
    pub log_format: LogFormat,
    /// Export traces with OTLP over HTTP to this collector (base URL, e.g.
    /// <http://otel-collector:4318>; spans go to /v1/traces).
    #[arg(long, global = true, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of its largest variant costs nothing
// (without `dev-tools`, `run`'s arguments are much the largest).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Build, run and benchmark plugins locally.
    #[cfg(feature = "dev-tools")]
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Run and benchmark admission policies locally.
    #[cfg(feature = "dev-tools")]
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Run CRD converter plugins locally.
    #[cfg(feature = "dev-tools")]
    #[command(subcommand)]
    Convert(convert::ConvertCommand),
    /// Run the operator against a cluster (kubeconfig or in-cluster).
    Run(operator::RunArgs),
    /// Run everything on this machine: the embedded API server, the example
    /// CRDs, bindings and objects, and the operator.
    #[cfg(feature = "dev-tools")]
    Dev(dev::DevArgs),
    /// Serve the embedded, kubectl-compatible Kubernetes API server.
    #[cfg(feature = "dev-tools")]
    Apiserver(gantry_apiserver::ApiServerArgs),
    /// Print the least-privilege RBAC the given or installed bindings need.
    Rbac(rbac::RbacArgs),
    /// Benchmarks: call dispatch cost, convergence at scale.
    #[cfg(feature = "dev-tools")]
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Print a reference page of the book, generated from the code.
    #[command(subcommand, hide = true)]
    Docs(docs::DocsCommand),
}

/// Where the local commands (`plugin run|bench`, `policy run|bench`) cache
/// compiled plugins.
#[cfg(feature = "dev-tools")]
#[derive(Debug, clap::Args)]
pub struct CompileCacheArgs {
    /// Where compiled plugins are cached (default: the user's cache dir).
    #[arg(long, env = "GANTRY_CACHE_DIR")]
    cache_dir: Option<std::path::PathBuf>,
    /// Compile the plugin without reading or writing the cache.
    #[arg(long)]
    no_cache: bool,
}

#[cfg(feature = "dev-tools")]
impl CompileCacheArgs {
    /// A plugin runtime with this compile cache.
    pub fn runtime(&self) -> anyhow::Result<gantry_sandbox::runtime::Runtime> {
        let cache_dir = if self.no_cache {
            None
        } else {
            self.cache_dir
                .clone()
                .or_else(gantry_sandbox::runtime::default_compile_cache_dir)
        };
        gantry_sandbox::runtime::Runtime::new(gantry_sandbox::runtime::RuntimeSettings {
            cache_dir,
            ..Default::default()
        })
    }
}

/// Print `error` (with its causes) and exit with `code`.
fn fail(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {error:#}");
    ExitCode::from(code)
}

/// Print why a plugin call failed and exit with the code that says whose
/// fault it was: the plugin's own error, the sandbox, or the host.
#[cfg(feature = "dev-tools")]
fn call_failed(error: &gantry_sandbox::error::CallError) -> ExitCode {
    use gantry_sandbox::error::CallError;
    let code = call_exit_code(error);
    let retry = match error {
        CallError::Plugin(e) if e.retryable => " (retryable)",
        _ => "",
    };
    eprintln!("error: {error}{retry}");
    ExitCode::from(code)
}

/// The exit code of a failed plugin call: the plugin's own error, the
/// sandbox's, or the host's.
fn call_exit_code(error: &gantry_sandbox::error::CallError) -> u8 {
    use gantry_sandbox::error::CallError;
    match error {
        CallError::Plugin(_) => exit::PLUGIN_ERROR,
        CallError::Host(_) => exit::OTHER,
        _ => exit::SANDBOX,
    }
}

/// The multi-threaded runtime the async commands run on (plugins are
/// called on its blocking pool).
fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    use anyhow::Context as _;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Exit codes of the `gantry` command.
pub mod exit {
    /// The plugin returned an error.
    pub const PLUGIN_ERROR: u8 = 1;
    /// The plugin breached a limit, trapped or broke the contract.
    pub const SANDBOX: u8 = 3;
    /// The plugin could not be loaded.
    pub const LOAD: u8 = 4;
    /// Bad input or another failure.
    pub const OTHER: u8 = 5;
    /// Usage: what was given cannot be used as it is.
    pub const USAGE: u8 = 2;
    /// `plugin apply`: the operator said nothing in time.
    pub const NO_ANSWER: u8 = 5;
    /// `plugin apply`: the plugin could not be built, published or applied.
    pub const NOT_APPLIED: u8 = 6;
    /// `plugin test`: a case did not get the answer it expects.
    pub const CASE_FAILED: u8 = 1;
}

/// The allocator of the `gantry` binary: mimalloc (see host/Cargo.toml), or
/// the system's without the `mimalloc` feature. A binary installs it with
/// `#[global_allocator] static ALLOCATOR: Allocator = ALLOCATOR;`.
#[cfg(feature = "mimalloc")]
pub type Allocator = mimalloc::MiMalloc;
/// The allocator of the `gantry` binary (see the `mimalloc` feature).
#[cfg(not(feature = "mimalloc"))]
pub type Allocator = std::alloc::System;
/// The value of [`Allocator`].
#[cfg(feature = "mimalloc")]
pub const ALLOCATOR: Allocator = mimalloc::MiMalloc;
/// The value of [`Allocator`].
#[cfg(not(feature = "mimalloc"))]
pub const ALLOCATOR: Allocator = std::alloc::System;

/// The whole `gantry` command: parse the command line, set up telemetry,
/// run. Every binary that is `gantry` calls this from its `main`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let export = gantry_operator::telemetry::TraceExport {
        otlp_endpoint: cli.otlp_endpoint.clone(),
    };
    let _telemetry = match gantry_operator::telemetry::init(cli.log_format, &export) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("error: setting up telemetry: {e:#}");
            return ExitCode::from(exit::OTHER);
        }
    };
    run(cli)
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        #[cfg(feature = "dev-tools")]
        Command::Plugin(command) => plugin::run(command),
        #[cfg(feature = "dev-tools")]
        Command::Policy(command) => policy::run(command),
        #[cfg(feature = "dev-tools")]
        Command::Convert(command) => convert::run(command),
        Command::Run(args) => operator::run(&args),
        #[cfg(feature = "dev-tools")]
        Command::Dev(args) => dev::run(args),
        #[cfg(feature = "dev-tools")]
        Command::Apiserver(args) => dev::apiserver(args),
        #[cfg(feature = "dev-tools")]
        Command::Bench(command) => bench::run(command),
        Command::Rbac(args) => rbac::run(&args),
        Command::Docs(command) => docs::run(&command),
    }
}
