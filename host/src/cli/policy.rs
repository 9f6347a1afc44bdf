//! `gantry policy run|bench`: the policy author's local loop, like
//! `kwctl run` and `kwctl bench`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use gantry_sdk::AdmissionRequest;
use serde_json::Value;

use super::component::component;
use super::{call_failed, exit, fail};
use gantry_operator::policy::review;
use gantry_operator::policy::spec::{Mode, PolicySpec, parse_spec};
use gantry_sandbox::runtime::{CallError, Limits, PolicyPlugin};
use gantry_toolchain::manifest::{read_object, read_value};

#[derive(Debug, Subcommand)]
pub(super) enum PolicyCommand {
    /// Judge one AdmissionReview and print the AdmissionReview response.
    Run(RunArgs),
    /// Measure a policy's evaluations/s and latency.
    Bench(BenchArgs),
}

/// The policy and its input, shared by `run` and `bench`.
#[derive(Debug, Args)]
pub(super) struct CallArgs {
    /// The component (.wasm), a policy crate directory to build first, or
    /// an `oci://` artifact to pull.
    #[arg(long)]
    plugin: PathBuf,
    /// An AdmissionReview with a `request` (YAML or JSON); a bare request
    /// is accepted too.
    #[arg(long)]
    request: PathBuf,
    /// The policy's settings (YAML or JSON); checked with the policy's
    /// `validate-settings` first.
    #[arg(long)]
    settings: Option<PathBuf>,
    /// Let the policy change the object (as `mutating: true` in a binding);
    /// without it a mutation denies the request, as the webhook would.
    #[arg(long)]
    mutating: bool,
    /// Monitor mode: report what the policy says, and allow.
    #[arg(long)]
    monitor: bool,
    /// Call deadline in milliseconds.
    #[arg(long, default_value_t = 500)]
    deadline_ms: u64,
    /// Memory limit in MiB.
    #[arg(long, default_value_t = 64)]
    memory_mib: usize,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    call: CallArgs,
}

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Measured evaluations.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Unmeasured warm-up evaluations.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(super) fn run(command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::Run(args) => run_once(&args.call),
        PolicyCommand::Bench(args) => bench(&args),
    }
}

struct Loaded {
    plugin: Arc<PolicyPlugin>,
    spec: PolicySpec,
    request: Value,
}

impl CallArgs {
    fn limits(&self) -> Limits {
        Limits {
            deadline: Duration::from_millis(self.deadline_ms),
            memory_bytes: self.memory_mib << 20,
            ..Limits::default()
        }
    }

    /// A binding as the server would hold it, for the decision.
    fn spec(&self, name: &str, settings: Value) -> anyhow::Result<PolicySpec> {
        let name = if gantry_kube::names::is_dns1123_label(name) {
            name
        } else {
            "policy"
        };
        let mut spec = parse_spec(&format!(
            "name: {name}\nrules:\n- {{apiGroups: ['*'], apiVersions: ['*'], resources: ['*'], operations: ['*']}}\n"
        ))?;
        spec.mutating = self.mutating;
        spec.mode = if self.monitor {
            Mode::Monitor
        } else {
            Mode::Enforce
        };
        spec.settings = settings;
        Ok(spec)
    }
}

/// Read the input, load the policy and check the settings; Err is the exit
/// code to return.
fn load(args: &CallArgs) -> Result<Loaded, ExitCode> {
    let review = read_object(&args.request).map_err(|e| fail(exit::OTHER, &e))?;
    let request = review::request_of(review)
        .map_err(|e| fail(exit::OTHER, &format!("{}: {e}", args.request.display())))?;
    let settings = match &args.settings {
        Some(path) => read_value(path).map_err(|e| fail(exit::OTHER, &e))?,
        None => Value::Null,
    };
    let (name, bytes) = component(&args.plugin).map_err(|e| fail(exit::OTHER, &e))?;
    // The policy is named after its file: made a DNS label.
    let name = name.replace('_', "-").to_lowercase();
    let spec = args
        .spec(&name, settings)
        .map_err(|e| fail(exit::OTHER, &e))?;
    let runtime = args.cache.runtime().map_err(|e| fail(exit::OTHER, &e))?;
    let plugin = runtime
        .load_policy(&name, &bytes)
        .map_err(|e| fail(exit::LOAD, &e))?;
    if let Err(e) = plugin.validate_settings_blocking(&spec.settings, &args.limits()) {
        return Err(call_failed(&e));
    }
    Ok(Loaded {
        plugin,
        spec,
        request,
    })
}

fn run_once(args: &CallArgs) -> ExitCode {
    let loaded = match load(args) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let admission = AdmissionRequest {
        request: loaded.request.clone(),
        settings: loaded.spec.settings.clone(),
    };
    match loaded.plugin.validate_blocking(&admission, &args.limits()) {
        Ok(verdict) => {
            let decision = review::decide(&loaded.spec, &loaded.request, Ok(verdict));
            if decision.outcome == review::Outcome::Error {
                eprintln!("note: {}", decision.detail);
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&decision.response.to_review())
                    .expect("a review serializes")
            );
            ExitCode::SUCCESS
        }
        Err(e) => call_failed(&e),
    }
}

fn bench(args: &BenchArgs) -> ExitCode {
    let loaded = match load(&args.call) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let admission = AdmissionRequest {
        request: loaded.request.clone(),
        settings: loaded.spec.settings.clone(),
    };
    let limits = args.call.limits();
    let measured = gantry_dev_tools::bench::measure(
        &format!("{} (wasm, sandboxed)", loaded.plugin.name()),
        args.warmup,
        args.calls,
        || {
            loaded.plugin.validate_blocking(&admission, &limits)?;
            Ok(())
        },
    );
    match measured {
        Ok(row) => {
            let rows = vec![row];
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&rows).expect("measurements serialize")
                );
            } else {
                print!("{}", gantry_dev_tools::bench::render(&rows));
            }
            ExitCode::SUCCESS
        }
        Err(e) => match e.downcast_ref::<CallError>() {
            Some(call) => call_failed(call),
            None => fail(exit::OTHER, &e),
        },
    }
}
