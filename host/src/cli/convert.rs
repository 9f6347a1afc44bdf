//! `gantry convert run`: a converter plugin on objects from files, as the
//! API server would ask it in a `ConversionReview`; the local loop for
//! writing converters.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::component::component;
use super::{call_failed, exit, fail};
use gantry_operator::conversion::{convert_with, review, shadow};
use gantry_sandbox::limits::Limits;
use gantry_toolchain::manifest::read_objects;

#[derive(Debug, Subcommand)]
pub(super) enum ConvertCommand {
    /// Convert objects with a converter plugin and print them (YAML).
    Run(RunArgs),
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// The component (.wasm), a converter source directory to build first,
    /// or an OCI artifact (`oci://…`) to pull.
    #[arg(long)]
    plugin: PathBuf,
    /// The objects (YAML/JSON; multi-document streams and Lists allowed),
    /// each at the version its `apiVersion` names.
    #[arg(long)]
    objects: PathBuf,
    /// The version to convert to, `group/version`.
    #[arg(long)]
    to: String,
    /// Also convert each object back to its own version, and fail (exit 1)
    /// unless it comes back unchanged.
    #[arg(long)]
    round_trip: bool,
    /// Call deadline in milliseconds.
    #[arg(long, default_value_t = 2000)]
    deadline_ms: u64,
    /// Memory limit in MiB.
    #[arg(long, default_value_t = 64)]
    memory_mib: usize,
    /// Answer size limit in MiB.
    #[arg(long, default_value_t = 4)]
    output_mib: usize,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

pub(super) fn run(command: ConvertCommand) -> ExitCode {
    match command {
        ConvertCommand::Run(args) => run_once(&args),
    }
}

fn run_once(args: &RunArgs) -> ExitCode {
    let objects = match read_objects(&args.objects) {
        Ok(objects) => objects,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let group = args.to.rsplit_once('/').map_or("", |(group, _)| group);
    let request = review::ConversionRequest {
        uid: String::new(),
        desired_api_version: args.to.clone(),
        objects,
    };
    if let Err(e) = review::check_request(&request, group) {
        return fail(exit::OTHER, &e);
    }
    let (name, bytes) = match component(&args.plugin) {
        Ok(found) => found,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let runtime = match args.cache.runtime() {
        Ok(runtime) => runtime,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let plugin = match runtime.load_converter(&name, &bytes) {
        Ok(plugin) => plugin,
        Err(e) => return fail(exit::LOAD, &e),
    };
    let limits = Limits {
        deadline: Duration::from_millis(args.deadline_ms),
        memory_bytes: args.memory_mib << 20,
        output_bytes: args.output_mib << 20,
        ..Limits::default()
    };
    let tokio = match super::tokio_runtime() {
        Ok(tokio) => tokio,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let converted = match tokio.block_on(convert_with(&plugin, limits, &request.objects, &args.to))
    {
        Ok(converted) => converted,
        Err(e) => return call_failed(&e),
    };
    for object in &converted {
        print!(
            "---\n{}",
            serde_yaml::to_string(object).expect("an object serializes")
        );
    }
    if args.round_trip {
        let lossy: Vec<String> = request
            .objects
            .iter()
            .filter_map(|object| {
                tokio
                    .block_on(shadow::round_trip(&plugin, limits, object, &args.to))
                    .err()
                    .map(|e| format!("{}: {e}", review::describe(object)))
            })
            .collect();
        if !lossy.is_empty() {
            for line in &lossy {
                eprintln!("round trip failed: {line}");
            }
            return ExitCode::from(exit::PLUGIN_ERROR);
        }
        eprintln!(
            "round trip through {}: every object came back unchanged",
            args.to
        );
    }
    ExitCode::SUCCESS
}
