//! `gantry plugin diff` and `gantry plugin capture`: a binding of a live
//! cluster, reproduced on this machine, to try a new version on every
//! parent before pushing it, or to save one parent's request for replay.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use gantry_sdk::{Request, Trigger};
use serde_json::Value;

use super::answer_diff::ParentDiff;
use super::component::component;
use super::exit;
use super::operator::cluster_client;
use gantry_operator::controller::context::object_key;
use gantry_operator::controller::offline::OfflineBinding;
use gantry_operator::controller::request::request;
use gantry_operator::controller::rollout::answer;

/// How long the binding's caches may take to fill.
const SYNC_TIMEOUT: Duration = Duration::from_mins(2);

/// Exit code of `diff`: the new version answers otherwise on some parent.
const CHANGES: u8 = 1;
/// Exit code of `diff`: the new version fails on some parent.
const FAILS: u8 = 3;

/// Which binding of which cluster.
#[derive(Debug, Args)]
pub(super) struct BindingArgs {
    /// The cluster (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The binding: its name, or its ConfigMap's.
    #[arg(long)]
    binding: String,
    /// The namespace of the bindings' ConfigMaps.
    #[arg(long, default_value = "gantry-system")]
    namespace: String,
    #[command(flatten)]
    cache: super::CompileCacheArgs,
}

#[derive(Debug, Args)]
pub(super) struct DiffArgs {
    #[command(flatten)]
    binding: BindingArgs,
    /// The new version: a component, a plugin directory to build, or an
    /// OCI artifact.
    #[arg(long)]
    plugin: PathBuf,
    /// Only this parent (`namespace/name`, or `name` when cluster-scoped).
    #[arg(long)]
    parent: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct CaptureArgs {
    #[command(flatten)]
    binding: BindingArgs,
    /// The parent (`namespace/name`, or `name` when cluster-scoped).
    #[arg(long)]
    parent: String,
    /// The directory to write `request.yaml` and `response.yaml` into.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Keep Secrets among the related and observed objects (left out by
    /// default).
    #[arg(long)]
    include_secrets: bool,
}

fn block_on<T>(future: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    super::tokio_runtime()?.block_on(future)
}

async fn open(
    args: &BindingArgs,
) -> anyhow::Result<(OfflineBinding, gantry_sandbox::runtime::Runtime)> {
    let client = cluster_client(args.kubeconfig.as_deref()).await?;
    let runtime = args.cache.runtime()?;
    let binding = OfflineBinding::open(
        &client,
        &runtime,
        &args.namespace,
        &args.binding,
        SYNC_TIMEOUT,
    )
    .await?;
    for note in &binding.notes {
        eprintln!("note: {note}");
    }
    Ok((binding, runtime))
}

/// `plugin diff`: exit 0 when nothing changes, 1 when something does, 3
/// when the new version fails on some parent.
pub(super) fn diff(args: &DiffArgs) -> ExitCode {
    match block_on(compare(args)) {
        Ok(diffs) => {
            let failed = diffs.iter().filter(|d| d.failure.is_some()).count();
            let unchanged = diffs.iter().filter(|d| d.unchanged()).count();
            let changed = diffs.len() - failed - unchanged;
            for diff in &diffs {
                print!("{}", diff.render());
            }
            println!(
                "{} parents: {unchanged} unchanged, {changed} changed, {failed} failed",
                diffs.len()
            );
            ExitCode::from(if failed > 0 {
                FAILS
            } else if changed > 0 {
                CHANGES
            } else {
                0
            })
        }
        Err(e) => fail(&e),
    }
}

async fn compare(args: &DiffArgs) -> anyhow::Result<Vec<ParentDiff>> {
    let (binding, runtime) = open(&args.binding).await?;
    let (name, bytes) = component(&args.plugin)?;
    let new = runtime
        .load_reconciler(&name, &bytes)
        .with_context(|| format!("loading {}", args.plugin.display()))?;
    let spec = &binding.spec;
    new.validate_config(spec.config.clone(), spec.call_limits())
        .await
        .context("the new version refuses the binding's config")?;
    let ctx = binding.ctx();
    let mut diffs = Vec::new();
    for parent in binding.parents(args.parent.as_deref())? {
        let current = answer(ctx, &parent, &binding.current, spec).await;
        let candidate = answer(ctx, &parent, &new, spec).await;
        diffs.push(ParentDiff::new(object_key(&parent), &current, &candidate));
    }
    Ok(diffs)
}

/// `plugin capture`: write the request the operator would build now for
/// one parent, and the answer of the version in service.
pub(super) fn capture(args: &CaptureArgs) -> ExitCode {
    match block_on(write_capture(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

async fn write_capture(args: &CaptureArgs) -> anyhow::Result<()> {
    let (binding, _runtime) = open(&args.binding).await?;
    let parent = binding
        .parents(Some(&args.parent))?
        .pop()
        .expect("parents() fails when the parent is missing");
    let mut captured = request(binding.ctx(), &parent, &binding.spec, Trigger::Resync);
    let response = binding
        .current
        .reconcile(captured.clone(), binding.spec.call_limits())
        .await
        .map(|r| super::plugin::render_yaml(&r));
    let left_out = if args.include_secrets {
        0
    } else {
        leave_out_secrets(&mut captured)
    };
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    let mut text = String::from("# gantry plugin capture: the request of a resync");
    if left_out > 0 {
        let _ = write!(
            text,
            "; {left_out} Secret(s) left out (--include-secrets keeps them)"
        );
    }
    text.push('\n');
    text.push_str(&serde_yaml::to_string(&captured)?);
    write(&args.output.join("request.yaml"), &text)?;
    match &response {
        Ok(yaml) => write(&args.output.join("response.yaml"), yaml)?,
        Err(e) => write(
            &args.output.join("response.yaml"),
            &format!("# the version in service failed: {e}\n"),
        )?,
    }
    eprintln!(
        "captured {} of binding {} (plugin sha256:{}) into {}; replay it with:\n  gantry plugin run --plugin PLUGIN --request {}",
        args.parent,
        binding.spec.name,
        binding.current.digest(),
        args.output.display(),
        args.output.join("request.yaml").display()
    );
    if left_out > 0 {
        eprintln!(
            "note: {left_out} Secret(s) left out; the replay may answer otherwise than response.yaml"
        );
    }
    Ok(())
}

/// Take Secrets out of the request's related and observed objects; how many.
fn leave_out_secrets(request: &mut Request) -> usize {
    let is_secret = |o: &Value| o["apiVersion"] == "v1" && o["kind"] == "Secret";
    let before = request.related.len() + request.observed.len();
    request.related.retain(|o| !is_secret(o));
    request.observed.retain(|o| !is_secret(o));
    before - request.related.len() - request.observed.len()
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn fail(error: &anyhow::Error) -> ExitCode {
    super::fail(exit::OTHER, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_left_out_of_a_capture() {
        let mut request = Request::for_parent(json!({}));
        request.related = vec![
            json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "c2VjcmV0"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
        ];
        request.observed = vec![json!({"apiVersion": "v1", "kind": "Secret"})];
        assert_eq!(leave_out_secrets(&mut request), 2);
        assert_eq!(
            request.related,
            vec![json!({"apiVersion": "v1", "kind": "ConfigMap"})]
        );
        assert!(request.observed.is_empty());
    }
}
