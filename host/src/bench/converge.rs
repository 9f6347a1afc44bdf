//! `gantry bench converge`: N `Fanout` parents with K ConfigMap children
//! each, reconciled by the operator running in this process against an API
//! server: by default `gantry apiserver` started as a child process (so the
//! two have separate peak RSS), or any cluster through a kubeconfig.
//!
//! Phases: create every parent and wait until each is `Synced` with its
//! `observedGeneration` current; then wait for a resync of every parent with
//! nothing changed (its writes must be 0); then change every parent's spec
//! and wait again. The operator's API writes are counted by a layer on its
//! own client, so the driver's writes (creating and changing parents) are
//! not among them.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::client::ConfigExt;
use serde_json::{Value, json};

use crate::controller::{Metrics, OperatorOptions, run_operator};
use crate::runtime::Runtime;

/// Namespace of the bench's binding, and of its parents.
pub const NAMESPACE: &str = "default";
const BINDINGS: &str = "gantry-system";

/// What to run.
#[derive(Debug, Clone)]
pub struct ConvergePlan {
    /// Parents to create.
    pub parents: usize,
    /// ConfigMaps per parent.
    pub children_per_parent: u32,
    /// Reconciles at once (`gantry run --concurrency`).
    pub concurrency: usize,
    /// The binding's resync period: the no-change phase waits for one.
    pub resync: Duration,
    /// Give up on a phase after this long.
    pub phase_timeout: Duration,
    /// Percentage of plugin calls that trap.
    pub trap_percent: u8,
    /// A cluster to use instead of starting `gantry apiserver`.
    pub kubeconfig: Option<PathBuf>,
    /// The `gantry` binary that serves `gantry apiserver`.
    pub gantry: PathBuf,
    /// The fanout component.
    pub plugin: Vec<u8>,
}

/// One phase's numbers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Phase {
    /// `converge`, `resync` or `spec-change`.
    pub name: String,
    /// Wall time of the phase.
    pub seconds: f64,
    /// API writes by the operator during the phase.
    pub writes: u64,
    /// Those writes per child.
    pub writes_per_child: f64,
    /// Reconciles during the phase.
    pub reconciles: u64,
}

/// Everything measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConvergeReport {
    /// Parents.
    pub parents: usize,
    /// Children per parent.
    pub children_per_parent: u32,
    /// Seconds the driver took to create the parents.
    pub create_seconds: f64,
    /// The phases in order.
    pub phases: Vec<Phase>,
    /// Peak RSS of this process (operator and driver), bytes.
    pub operator_peak_rss: Option<u64>,
    /// Peak RSS of the API server process, bytes (none for a given cluster).
    pub apiserver_peak_rss: Option<u64>,
    /// (seconds since the start, parents converged) during `converge`.
    pub timeline: Vec<(f64, usize)>,
}

/// Peak resident set size of process `pid` (`self` for this one), from
/// /proc: `VmHWM`.
pub fn peak_rss(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// A kube client that counts the requests it sends other than reads.
fn counting_client(config: &kube::Config, writes: Arc<AtomicU64>) -> anyhow::Result<kube::Client> {
    let https = config.rustls_https_connector()?;
    let count =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            if !matches!(request.method().as_str(), "GET" | "HEAD" | "OPTIONS") {
                writes.fetch_add(1, Ordering::Relaxed);
            }
            request
        });
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(count)
        .map_err(tower::BoxError::from)
        .service(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https),
        );
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}

/// `gantry apiserver` as a child process; its kubeconfig in `dir`.
struct ApiServerProcess {
    child: Child,
    kubeconfig: PathBuf,
}

impl ApiServerProcess {
    fn start(gantry: &Path, dir: &Path) -> anyhow::Result<Self> {
        let kubeconfig = dir.join("kubeconfig");
        let child = Command::new(gantry)
            .args(["apiserver", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {} apiserver", gantry.display()))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !kubeconfig.exists() {
            anyhow::ensure!(Instant::now() < deadline, "the API server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Self { child, kubeconfig })
    }
}

impl Drop for ApiServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fanout_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("bench.gantry.dev", "v1", "Fanout"),
        "fanouts",
    )
}

/// Parents that are `Synced` with `observedGeneration` current and carry
/// `value`.
async fn converged(parents: &Api<DynamicObject>, value: &str) -> anyhow::Result<usize> {
    let list = parents.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|p| {
            let p = serde_json::to_value(p).unwrap_or(Value::Null);
            let synced = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Synced" && c["status"] == "True");
            synced
                && p["spec"]["value"] == value
                && p["status"]["observedGeneration"] == p["metadata"]["generation"]
        })
        .count())
}

/// Run the benchmark; `progress` gets a line per step.
pub async fn run(plan: &ConvergePlan, progress: impl Fn(&str)) -> anyhow::Result<ConvergeReport> {
    let dir = tempfile::tempdir()?;
    let server = match &plan.kubeconfig {
        Some(_) => None,
        None => Some(ApiServerProcess::start(&plan.gantry, dir.path())?),
    };
    let kubeconfig_path = plan
        .kubeconfig
        .clone()
        .or_else(|| server.as_ref().map(|s| s.kubeconfig.clone()))
        .expect("a kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig_path)?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
    let driver = kube::Client::try_from(config.clone())?;
    let writes = Arc::new(AtomicU64::new(0));
    let operator_client = counting_client(&config, writes.clone())?;

    // The CRD and the binding.
    let source = crate::dev::example_dir("fanout");
    for crd in crate::manifest::read_objects(&source.join("crd.yaml"))? {
        crate::dev::apply_object(&driver, &crd).await?;
    }
    crate::dev::wait_for_crd(&driver, "fanouts.bench.gantry.dev").await?;
    crate::dev::ensure_namespace(&driver, BINDINGS).await?;
    let binding = format!(
        "name: fanout\nparent: {{apiVersion: bench.gantry.dev/v1, kind: Fanout}}\n\
         children: [{{apiVersion: v1, kind: ConfigMap}}]\nresyncSeconds: {}\n\
         config: {{children: {}, trapPercent: {}}}\n",
        plan.resync.as_secs().max(1),
        plan.children_per_parent,
        plan.trap_percent
    );
    let cm = crate::dev::binding_config_map("fanout", BINDINGS, &binding, &plan.plugin, true)?;
    crate::dev::apply_binding(&driver, &cm).await?;

    // The operator, in this process.
    let metrics = Arc::new(Metrics::default());
    let runtime = tokio::task::spawn_blocking(Runtime::with_defaults).await??;
    let options = OperatorOptions {
        namespace: BINDINGS.into(),
        concurrency: plan.concurrency,
        ..OperatorOptions::default()
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(run_operator(
        operator_client,
        runtime,
        options,
        metrics.clone(),
        async move {
            let _ = stop_rx.await;
        },
    ));

    let parents: Api<DynamicObject> =
        Api::namespaced_with(driver.clone(), NAMESPACE, &fanout_resource());
    let children = (plan.parents as f64) * f64::from(plan.children_per_parent);
    let reconciles = || metrics.binding("fanout").reconciles;
    // Where the counters stood when a phase began.
    let mark = || (Instant::now(), writes.load(Ordering::Relaxed), reconciles());
    let phase = |name: &str, (started, writes_before, reconciles_before): (Instant, u64, u64)| {
        let phase_writes = writes.load(Ordering::Relaxed) - writes_before;
        Phase {
            name: name.into(),
            seconds: started.elapsed().as_secs_f64(),
            writes: phase_writes,
            writes_per_child: phase_writes as f64 / children,
            reconciles: reconciles() - reconciles_before,
        }
    };
    let mut phases = Vec::new();

    // Phase 1: create and converge.
    progress(&format!("creating {} parents", plan.parents));
    let start = mark();
    every_parent(plan.parents, |name| {
        let parent = json!({"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {"value": "v1"}});
        let parents = parents.clone();
        async move {
            parents
                .patch(
                    &name,
                    &PatchParams::apply("gantry-bench").force(),
                    &Patch::Apply(&parent),
                )
                .await
        }
    })
    .await?;
    let create_seconds = start.0.elapsed().as_secs_f64();
    progress(&format!("created in {create_seconds:.1}s; converging"));
    let mut timeline = Vec::new();
    wait_until(plan, &parents, "v1", start.0, &mut timeline, &progress).await?;
    phases.push(phase("converge", start));

    // Phase 2: a resync of every parent with nothing changed.
    progress("waiting for a resync of every parent");
    let start = mark();
    while reconciles() < start.2 + plan.parents as u64 {
        anyhow::ensure!(
            start.0.elapsed() < plan.phase_timeout + plan.resync,
            "no full resync within {:?}",
            plan.phase_timeout + plan.resync
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    phases.push(phase("resync", start));

    // Phase 3: change every parent's spec.
    progress("changing every parent's spec");
    let start = mark();
    every_parent(plan.parents, |name| {
        let parents = parents.clone();
        async move {
            let patch = json!({"spec": {"value": "v2"}});
            parents
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
        }
    })
    .await?;
    wait_until(plan, &parents, "v2", start.0, &mut Vec::new(), &progress).await?;
    phases.push(phase("spec-change", start));

    // Phase 4: a new version (the same code under another digest) is
    // shadow-run on every parent before it serves.
    progress("pushing a new version: shadow run on every parent");
    let start = mark();
    let before = metrics.binding("fanout");
    let renamed = with_custom_section(&plan.plugin, b"gantry-bench-v2");
    let cm = crate::dev::binding_config_map("fanout", BINDINGS, &binding, &renamed, true)?;
    crate::dev::apply_binding(&driver, &cm).await?;
    loop {
        let now = metrics.binding("fanout");
        anyhow::ensure!(
            now.plugin_load_failures == before.plugin_load_failures,
            "the new version was refused"
        );
        if now.plugin_swaps > before.plugin_swaps {
            break;
        }
        anyhow::ensure!(
            start.0.elapsed() < plan.phase_timeout,
            "the new version was not in service within {:?}",
            plan.phase_timeout
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut shadow = phase("shadow", start);
    shadow.seconds = metrics.binding("fanout").last_shadow_seconds;
    anyhow::ensure!(shadow.seconds > 0.0, "the new version had no shadow run");
    phases.push(shadow);

    let _ = stop_tx.send(());
    operator.await??;
    let apiserver_peak_rss = server
        .as_ref()
        .and_then(|s| peak_rss(&s.child.id().to_string()));
    Ok(ConvergeReport {
        parents: plan.parents,
        children_per_parent: plan.children_per_parent,
        create_seconds,
        phases,
        operator_peak_rss: peak_rss("self"),
        apiserver_peak_rss,
        timeline,
    })
}

/// `component` with a custom section `payload` appended: the same code
/// under another digest. (Four bytes of framing; a Wasm encoder library
/// would add nothing here.)
fn with_custom_section(component: &[u8], payload: &[u8]) -> Vec<u8> {
    const NAME: &[u8] = b"gantry";
    let size = 1 + NAME.len() + payload.len();
    assert!(size < 128, "one LEB128 byte of size");
    let mut out = component.to_vec();
    #[allow(clippy::cast_possible_truncation)] // checked just above
    out.extend([0, size as u8, NAME.len() as u8]);
    out.extend(NAME);
    out.extend(payload);
    out
}

/// Run `write` for each parent name, 32 at a time.
async fn every_parent<F, Fut, T>(parents: usize, write: F) -> kube::Result<()>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    futures::stream::iter((0..parents).map(|i| format!("p-{i:05}")))
        .map(write)
        .buffer_unordered(32)
        .try_for_each(|_| std::future::ready(Ok(())))
        .await
}

/// Poll until every parent has converged on `value`, recording progress.
async fn wait_until(
    plan: &ConvergePlan,
    parents: &Api<DynamicObject>,
    value: &str,
    started: Instant,
    timeline: &mut Vec<(f64, usize)>,
    progress: &impl Fn(&str),
) -> anyhow::Result<()> {
    // Listing every parent costs the API server; poll less often when many.
    let interval = Duration::from_millis(200).max(Duration::from_micros(100 * plan.parents as u64));
    let mut last_report = Instant::now();
    loop {
        let done = converged(parents, value).await?;
        timeline.push((started.elapsed().as_secs_f64(), done));
        if done >= plan.parents {
            return Ok(());
        }
        anyhow::ensure!(
            started.elapsed() < plan.phase_timeout,
            "only {done} of {} parents converged within {:?}",
            plan.parents,
            plan.phase_timeout
        );
        if last_report.elapsed() > Duration::from_secs(5) {
            progress(&format!("{done}/{} converged", plan.parents));
            last_report = Instant::now();
        }
        tokio::time::sleep(interval).await;
    }
}

/// The report as text.
pub fn render(report: &ConvergeReport) -> String {
    let mb = |b: Option<u64>| {
        b.map_or("n/a".to_string(), |b| {
            format!("{:.0} MiB", b as f64 / 1_048_576.0)
        })
    };
    let mut out = format!(
        "{} parents x {} children; parents created in {:.1}s\n{:<12} {:>9} {:>9} {:>14} {:>11}\n",
        report.parents,
        report.children_per_parent,
        report.create_seconds,
        "phase",
        "seconds",
        "writes",
        "writes/child",
        "reconciles"
    );
    for p in &report.phases {
        let _ = writeln!(
            out,
            "{:<12} {:>9.1} {:>9} {:>14.2} {:>11}",
            p.name, p.seconds, p.writes, p.writes_per_child, p.reconciles
        );
    }
    let _ = writeln!(
        out,
        "peak RSS: operator {}, API server {}",
        mb(report.operator_peak_rss),
        mb(report.apiserver_peak_rss)
    );
    out
}
