//! `gantry plugin run|bench|build`: the plugin author's local loop.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use gantry_sdk::{Request, Response, Trigger};
use serde::Serialize;

use super::component::component;
use super::local_cluster::RunChecks;
use super::{call_failed, exit, fail};
use gantry_operator::controller::spec::BindingSpec;
use gantry_sandbox::capability::secrets::StaticSecrets;
use gantry_sandbox::capability::{Grants, HttpGrant};
use gantry_sandbox::runtime::{CallError, Limits, ReconcilerPlugin};
use gantry_toolchain::manifest::{read_object, read_objects, read_value};
use gantry_toolchain::{self as toolchain, BuildOptions};

#[derive(Debug, Subcommand)]
pub(super) enum PluginCommand {
    /// Call a plugin once on local files and print its response as YAML.
    Run(RunArgs),
    /// Measure a plugin's calls/s and latency (memcached: beside its native
    /// Rust logic).
    Bench(BenchArgs),
    /// Build a plugin crate into a component.
    Build(BuildArgs),
    /// Publish a component to an OCI registry as a Wasm artifact; prints
    /// the reference by digest and the sha256 to pin in a binding.
    Push(PushArgs),
    /// Scaffold a plugin project (WIT, build, sample input, a test) that
    /// passes `gantry plugin run` out of the box.
    New(NewArgs),
    /// Run a binding's version in service and a new one on every parent of
    /// a live cluster, writing nothing; print what would change. Exit 0: no
    /// change; 1: changes; 3: the new version fails on some parent.
    Diff(super::rollout::DiffArgs),
    /// Write the request the operator would build now for one parent (and
    /// the answer of the version in service), for `plugin run --request`.
    Capture(super::rollout::CaptureArgs),
    /// Put a plugin into service on a cluster: build it, install its CRDs,
    /// apply its binding ConfigMap (server-side) and wait until the
    /// operator serves it or refuses it (exit 4, with the refusal).
    Apply(super::apply::ApplyArgs),
    /// Print the CRDs a plugin project ships (derived from its types, or
    /// its crd.yaml).
    Crd(super::apply::CrdArgs),
    /// Run the project's declarative cases (tests/*.yaml) in the sandbox
    /// and compare each answer with what the case expects; exit 1 when one
    /// differs. `--update` writes the answers into the cases.
    Test(super::plugin_test::TestArgs),
    /// Serve one plugin project on a fresh embedded API server, for tests:
    /// its CRDs installed, its binding applied, the operator running; one
    /// JSON line on stdout once the binding serves.
    Serve(super::plugin_serve::ServeArgs),
}

/// Languages `plugin new` scaffolds.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(super) enum Lang {
    /// Rust, with the guest SDK.
    Rust,
    /// JavaScript, with componentize-js.
    Js,
    /// Python, with componentize-py.
    Python,
    /// C, with clang, wasi-libc and wit-bindgen.
    C,
    /// Go, with the standard Go toolchain and the Go SDK.
    Go,
}

#[derive(Debug, Args)]
pub(super) struct NewArgs {
    /// The plugin's language.
    #[arg(long, value_enum, required_unless_present = "converter")]
    lang: Option<Lang>,
    /// Scaffold a CRD converter (`converter.yaml`, a two-version CRD,
    /// `gantry convert run`) instead of a reconcile plugin; Rust only.
    #[arg(long)]
    converter: bool,
    /// The plugin's name (a DNS label; also the binding's name).
    name: String,
    /// Where to create it (default: ./NAME); must be missing or empty.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Rust: the `gantry-sdk` directory; Go: the `go-sdk` directory (default: this Gantry source tree's).
    #[arg(long)]
    sdk: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(super) struct PushArgs {
    /// The component (.wasm), or a plugin source directory to build first.
    file: PathBuf,
    /// Where to: `oci://host[:port]/repository:tag`.
    reference: String,
    /// Plain HTTP to a registry that is not on a loopback address
    /// (loopback registries are always spoken to over HTTP).
    #[arg(long)]
    insecure: bool,
}

/// The plugin and its input, shared by `run` and `bench`.
#[derive(Debug, Args)]
pub(super) struct CallArgs {
    /// The component (.wasm), a plugin source directory to build first, or
    /// an OCI artifact (`oci://host/repo:tag` or `@sha256:…`) to pull.
    #[arg(long)]
    plugin: PathBuf,
    /// The parent object (YAML or JSON).
    #[arg(long, required_unless_present = "request")]
    parent: Option<PathBuf>,
    /// A whole request instead, as `gantry plugin capture` writes it.
    #[arg(long, conflicts_with_all = ["parent", "observed", "related", "config", "finalizing"])]
    request: Option<PathBuf>,
    /// Observed children (YAML/JSON; multi-document streams and Lists allowed).
    #[arg(long)]
    observed: Vec<PathBuf>,
    /// Related objects (YAML/JSON; multi-document streams and Lists allowed).
    #[arg(long)]
    related: Vec<PathBuf>,
    /// The binding's config (YAML or JSON).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Call as if the parent were being deleted.
    #[arg(long)]
    finalizing: bool,
    /// Call deadline in milliseconds.
    #[arg(long, default_value_t = 500)]
    deadline_ms: u64,
    /// Memory limit in MiB.
    #[arg(long, default_value_t = 64)]
    memory_mib: usize,
    /// Response size limit in MiB.
    #[arg(long, default_value_t = 4)]
    output_mib: usize,
    /// Most children a response may list.
    #[arg(long, default_value_t = 1000)]
    max_children: usize,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    #[command(flatten)]
    call: CallArgs,
    /// The binding (binding.yaml; default: the project directory's) the
    /// call is made under, as in a cluster: the answer must pass its
    /// guardrails, and the plugin gets its outbound HTTP grant (allow list,
    /// limits, secret headers). Without one, HTTP requests fail
    /// `not-granted`.
    #[arg(long)]
    binding: Option<PathBuf>,
    /// A value of a Secret the binding's `secretHeaders` name, as
    /// `SECRET/KEY=VALUE` (repeatable); the host adds it as the header and
    /// the plugin never sees it.
    #[arg(long = "secret", value_name = "SECRET/KEY=VALUE")]
    secrets: Vec<String>,
    /// CRDs whose defaults and validation the parent gets before the call,
    /// as the API server applies them on create (default: the project's,
    /// derived from its types or its crd.yaml).
    #[arg(long)]
    crd: Vec<PathBuf>,
    /// The operator's namespace, where the guardrails place no child.
    #[arg(long, env = "GANTRY_NAMESPACE", default_value = "gantry-system")]
    namespace: String,
}

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    #[command(flatten)]
    call: CallArgs,
    /// Measured calls per implementation.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Unmeasured warm-up calls per implementation.
    #[arg(long, default_value_t = 100)]
    warmup: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub(super) struct BuildArgs {
    /// The plugin crate directory (or its Cargo.toml).
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Cargo profile.
    #[arg(long, default_value = "release")]
    profile: String,
}

pub(super) fn run(command: PluginCommand) -> ExitCode {
    match command {
        PluginCommand::Run(args) => run_once(&args),
        PluginCommand::Bench(args) => bench(&args),
        PluginCommand::Build(args) => match toolchain::build_any(
            &args.path,
            &BuildOptions {
                profile: args.profile,
                target_dir: None,
            },
        ) {
            Ok(path) => {
                println!("{}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => fail(exit::OTHER, &e),
        },
        PluginCommand::Push(args) => push(&args),
        PluginCommand::New(args) => new_project(&args),
        PluginCommand::Diff(args) => super::rollout::diff(&args),
        PluginCommand::Capture(args) => super::rollout::capture(&args),
        PluginCommand::Apply(args) => super::apply::apply(&args),
        PluginCommand::Crd(args) => super::apply::crd(&args),
        PluginCommand::Test(args) => super::plugin_test::test(&args),
        PluginCommand::Serve(args) => super::plugin_serve::serve(&args),
    }
}

fn new_project(args: &NewArgs) -> ExitCode {
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    let written = match (args.converter, args.lang) {
        (true, None | Some(Lang::Rust)) => {
            toolchain::scaffold::new_converter(&args.name, &dir, args.sdk.as_deref())
        }
        (true, Some(_)) => {
            return fail(
                2,
                &"converters are scaffolded in Rust only (--lang rust); in Go, start from plugins/myresource-converter-go (gantry.dev/go-sdk/converter); in another language, build the `converter` world of wit/gantry.wit",
            );
        }
        (false, lang) => {
            let language = match lang.unwrap_or(Lang::Rust) {
                Lang::Rust => toolchain::Language::Rust,
                Lang::Js => toolchain::Language::JavaScript,
                Lang::Python => toolchain::Language::Python,
                Lang::C => toolchain::Language::C,
                Lang::Go => toolchain::Language::Go,
            };
            toolchain::scaffold::new_plugin(language, &args.name, &dir, args.sdk.as_deref())
        }
    };
    match written {
        Ok(files) => {
            for file in files {
                println!("{}", file.display());
            }
            eprintln!(
                "created {}; try it: cd {} && GANTRY={} ./test.sh",
                dir.display(),
                dir.display(),
                std::env::current_exe()
                    .map_or_else(|_| "gantry".into(), |p| p.display().to_string())
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(2, &e),
    }
}

/// Whether `bytes` start like a component (layer 1), not a core module.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[6..8] == [1, 0]
}

fn push(args: &PushArgs) -> ExitCode {
    let source = gantry_operator::delivery::source::SourceSpec {
        url: None,
        oci: Some(args.reference.clone()),
        insecure: args.insecure,
    };
    let (reference, insecure) = match source.check(false) {
        Ok(gantry_operator::delivery::source::PluginSource::Oci {
            reference,
            insecure,
        }) => (reference, insecure),
        Ok(_) => unreachable!("an oci source checks as one"),
        Err((_, message)) => return fail(2, &message),
    };
    if reference.contains('@') {
        return fail(2, &"push to a :tag; the registry names the digest");
    }
    let (_, bytes) = match component(&args.file) {
        Ok(c) => c,
        Err(e) => return fail(exit::OTHER, &e),
    };
    if !is_component(&bytes) {
        return fail(
            exit::LOAD,
            &format!(
                "{} is not a WebAssembly component (a core module, or not wasm)",
                args.file.display()
            ),
        );
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let size = bytes.len();
    let settings = gantry_operator::delivery::source::FetchSettings::default();
    match runtime.block_on(gantry_operator::delivery::source::oci::push(
        bytes, &reference, insecure, &settings,
    )) {
        Ok(pushed) => {
            eprintln!(
                "pushed {size} bytes to oci://{reference}; bind it with:\n  sha256: {}\n  source: {{oci: \"{}\"}}",
                pushed.component_sha256, pushed.reference
            );
            println!("{}", pushed.reference);
            ExitCode::SUCCESS
        }
        Err(e) => fail(exit::OTHER, &e),
    }
}

impl CallArgs {
    fn limits(&self) -> Limits {
        Limits {
            deadline: Duration::from_millis(self.deadline_ms),
            memory_bytes: self.memory_mib << 20,
            output_bytes: self.output_mib << 20,
            max_children: self.max_children,
        }
    }

    fn request(&self) -> anyhow::Result<Request> {
        if let Some(path) = &self.request {
            return serde_json::from_value(read_value(path)?)
                .with_context(|| format!("{} is not a reconcile request", path.display()));
        }
        let parent = self
            .parent
            .as_ref()
            .expect("clap requires --parent or --request");
        let mut request = Request::for_parent(read_object(parent)?);
        for path in &self.observed {
            request.observed.extend(read_objects(path)?);
        }
        for path in &self.related {
            request.related.extend(read_objects(path)?);
        }
        if let Some(path) = &self.config {
            request.config = read_value(path)?;
        }
        request.finalizing = self.finalizing;
        request.trigger = Trigger::ParentChanged;
        Ok(request)
    }
}

/// Load the plugin; Err is the exit code to return.
fn load(args: &CallArgs) -> Result<(std::sync::Arc<ReconcilerPlugin>, Request), ExitCode> {
    let request = args.request().map_err(|e| fail(exit::OTHER, &e))?;
    let (name, bytes) = component(&args.plugin).map_err(|e| fail(exit::OTHER, &e))?;
    let runtime = args.cache.runtime().map_err(|e| fail(exit::OTHER, &e))?;
    let plugin = runtime
        .load_reconciler(&name, &bytes)
        .map_err(|e| fail(exit::LOAD, &e))?;
    if let Err(e) = plugin.validate_config_blocking(&request.config, &args.limits()) {
        return Err(call_failed(&e));
    }
    Ok((plugin, request))
}

fn run_once(args: &RunArgs) -> ExitCode {
    let checks = match RunChecks::new(
        &args.call.plugin,
        args.binding.as_deref(),
        &args.crd,
        &args.namespace,
    ) {
        Ok(checks) => checks,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let grants = match local_grants(checks.binding(), &args.secrets) {
        Ok(grants) => grants,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let (plugin, mut request) = match load(&args.call) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    // A captured request (--request) holds the parent as the API server
    // stored it.
    if let Some(path) = &args.call.parent
        && let Err(e) = checks.admit(&mut request.parent)
    {
        return fail(exit::OTHER, &format!("{}: {e:#}", path.display()));
    }
    let parent = request.parent.clone();
    let called = super::tokio_runtime()
        .map(|tokio| tokio.block_on(plugin.reconcile_with(request, args.call.limits(), grants)));
    match called {
        Ok(Ok(response)) => {
            if let Err((reason, message)) = checks.check(&parent, response.children.clone()) {
                return fail(exit::SANDBOX, &format!("{reason}: {message}"));
            }
            print!("{}", render_yaml(&response));
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => call_failed(&e),
        Err(e) => fail(exit::OTHER, &e),
    }
}

/// What the binding grants a local call: its outbound HTTP, with the
/// `--secret` values for its secret headers.
fn local_grants(binding: Option<&BindingSpec>, secrets: &[String]) -> anyhow::Result<Grants> {
    let Some(spec) = binding else {
        anyhow::ensure!(
            secrets.is_empty(),
            "--secret fills a binding's secret headers: name the binding with --binding"
        );
        return Ok(Grants::default());
    };
    let Some(http) = &spec.capabilities.http else {
        return Ok(Grants::default());
    };
    let mut values = HashMap::new();
    for entry in secrets {
        let parsed = entry
            .split_once('=')
            .and_then(|(name, value)| Some((name.split_once('/')?, value)));
        let Some(((secret, key), value)) = parsed else {
            anyhow::bail!("--secret {entry:?}: expected SECRET/KEY=VALUE");
        };
        values.insert((secret.to_string(), key.to_string()), value.to_string());
    }
    let grant = HttpGrant::new(&spec.name, http, Arc::new(StaticSecrets(values)), None)?;
    Ok(Grants {
        http: Some(Arc::new(grant)),
        ..Grants::default()
    })
}

/// Everything in a response but the children.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Outcome<'a> {
    status: &'a Option<serde_json::Value>,
    conditions: &'a [gantry_sdk::Condition],
    events: &'a [gantry_sdk::Event],
    #[serde(skip_serializing_if = "Option::is_none")]
    requeue_after_ms: Option<u64>,
    finalized: bool,
}

/// The children as a multi-document YAML stream, then one last document
/// with status, conditions, events, requeue and finalized.
pub(super) fn render_yaml(response: &Response) -> String {
    let mut out = String::new();
    for child in &response.children {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(child).expect("JSON values serialize as YAML"));
    }
    let outcome = Outcome {
        status: &response.status,
        conditions: &response.conditions,
        events: &response.events,
        // Saturates past u64::MAX ms, as the SDK's encoding does.
        requeue_after_ms: response
            .requeue_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        finalized: response.finalized,
    };
    out.push_str("--- # gantry: status, conditions and events of the parent\n");
    out.push_str(&serde_yaml::to_string(&outcome).expect("outcome serializes as YAML"));
    out
}

fn bench(args: &BenchArgs) -> ExitCode {
    let (plugin, request) = match load(&args.call) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    match gantry_dev_tools::bench::plugin_vs_native(
        &plugin,
        &request,
        &args.call.limits(),
        args.warmup,
        args.calls,
    ) {
        Ok(rows) => {
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
