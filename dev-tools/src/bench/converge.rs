//! `gantry bench converge`: N `Fanout` parents with K ConfigMap children
//! each, reconciled by an operator against an API server: by default `gantry
//! apiserver` started as a child process, or any cluster through a
//! kubeconfig. Gantry runs as `gantry run`, and with `--peer
//! controller-runtime` the controller-runtime peer runs the same plan after
//! it, in a namespace of its own; both are child processes measured the same
//! way (see [`contender`](super::contender)).
//!
//! Phases: create every parent and wait until each is `Synced` with its
//! `observedGeneration` current; then wait for a resync of every parent with
//! nothing changed (its writes must be 0); then change every parent's spec
//! and wait again. With a churn plan, a share of the parents then changes
//! every second and each change is timed to its children written (see
//! [`churn`](super::churn)). Gantry then gets a last phase: a new version of its plugin is
//! shadow-run on every parent before it serves. Writes are the operator's
//! own (from its metrics), so the driver's writes (creating and changing
//! parents) are not among them; its Event writes are counted apart.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use super::churn::{self, ChurnPlan, Latency};
use super::contender::{Contender, Counters, Implementation, Launch, sum};

/// Namespace of the bench's binding.
const BINDINGS: &str = "gantry-system";

/// What to run.
#[derive(Debug, Clone)]
pub struct ConvergePlan {
    /// Parents to create.
    pub parents: usize,
    /// ConfigMaps per parent.
    pub children_per_parent: u32,
    /// Reconciles at once (`gantry run --concurrency`, the peer's
    /// `MaxConcurrentReconciles`).
    pub concurrency: usize,
    /// The resync period: the no-change phase waits for one.
    pub resync: Duration,
    /// Give up on a phase after this long.
    pub phase_timeout: Duration,
    /// Percentage of Gantry's plugin calls that trap.
    pub trap_percent: u8,
    /// A cluster to use instead of starting `gantry apiserver`.
    pub kubeconfig: Option<PathBuf>,
    /// The `gantry` binary (`gantry apiserver`, `gantry run`).
    pub gantry: PathBuf,
    /// The fanout component.
    pub plugin: Vec<u8>,
    /// The controller-runtime peer's binary, to run after Gantry.
    pub peer: Option<PathBuf>,
    /// Churn after the spec change, timing each change.
    pub churn: Option<ChurnPlan>,
    /// Stop after the converge phase (a scale run).
    pub converge_only: bool,
    /// Keep the operators' logs here (`gantry.log`,
    /// `controller-runtime.log`) rather than in a directory removed at
    /// the end.
    pub logs: Option<PathBuf>,
}

/// One phase of one implementation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    /// `gantry` or `controller-runtime`.
    pub implementation: String,
    /// `converge`, `resync`, `spec-change`, `churn` or `shadow`.
    pub phase: String,
    /// Wall time of the phase (for `shadow`: of the shadow run).
    pub seconds: f64,
    /// API writes by the operator during the phase, but for Events.
    pub writes: u64,
    /// Events the operator wrote during the phase (created or updated).
    pub events: u64,
    /// Those writes per child.
    pub writes_per_child: f64,
    /// Reconciles during the phase.
    pub reconciles: u64,
    /// CPU time of the operator process during the phase.
    pub cpu_seconds: Option<f64>,
    /// Peak RSS of the operator process at the end of the phase, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Reaction latency (the `churn` phase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
}

/// Parents converged over time, for one implementation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Timeline {
    /// Whose.
    pub implementation: String,
    /// (seconds since the first parent was created, parents converged).
    pub points: Vec<(f64, usize)>,
}

/// Everything measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ConvergeReport {
    /// Parents.
    pub parents: usize,
    /// Children per parent.
    pub children_per_parent: u32,
    /// Every phase of every implementation, in order.
    pub runs: Vec<Run>,
    /// Peak RSS of the API server process, bytes (none for a given cluster).
    pub apiserver_peak_rss: Option<u64>,
    /// The `converge` phase of each implementation.
    pub timelines: Vec<Timeline>,
}

/// `gantry apiserver` as a child process; its kubeconfig in `dir`.
pub(super) struct ApiServerProcess {
    child: Child,
    /// Where it wrote its kubeconfig.
    pub(super) kubeconfig: PathBuf,
}

impl ApiServerProcess {
    /// Its peak RSS so far.
    pub(super) fn peak_rss(&self) -> Option<u64> {
        super::contender::peak_rss(self.child.id())
    }

    pub(super) fn start(gantry: &Path, dir: &Path) -> anyhow::Result<Self> {
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
/// `value`. (The peer writes the same condition.)
pub(super) async fn converged(parents: &Api<DynamicObject>, value: &str) -> anyhow::Result<usize> {
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
    let kubeconfig = plan
        .kubeconfig
        .clone()
        .or_else(|| server.as_ref().map(|s| s.kubeconfig.clone()))
        .expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig)?,
        &kube::config::KubeConfigOptions::default(),
    )
    .await?;
    let driver = kube::Client::try_from(config)?;

    // The CRD and Gantry's binding.
    let source = crate::examples::source_dir("fanout");
    for crd in gantry_toolchain::manifest::read_objects(&source.join("crd.yaml"))? {
        crate::cluster::apply_object(&driver, &crd).await?;
    }
    crate::cluster::wait_for_crd(&driver, "fanouts.bench.gantry.dev").await?;
    crate::cluster::ensure_namespace(&driver, BINDINGS).await?;
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

    if let Some(logs) = &plan.logs {
        std::fs::create_dir_all(logs).with_context(|| format!("creating {}", logs.display()))?;
    }
    let bench = Bench {
        plan,
        driver: &driver,
        kubeconfig: &kubeconfig,
        logs: plan.logs.as_deref().unwrap_or(dir.path()),
        binding: &binding,
        progress: &progress,
    };
    let mut report = ConvergeReport {
        parents: plan.parents,
        children_per_parent: plan.children_per_parent,
        runs: Vec::new(),
        apiserver_peak_rss: None,
        timelines: Vec::new(),
    };
    let mut implementations = vec![Implementation::Gantry];
    if plan.peer.is_some() {
        implementations.push(Implementation::ControllerRuntime);
    }
    for implementation in &implementations {
        let (runs, timeline) = bench.run(*implementation).await?;
        report.runs.extend(runs);
        report.timelines.push(timeline);
    }
    // Only now: deleting one run's objects while the next runs would load
    // the API server during that one alone.
    for implementation in implementations {
        let namespace = format!("bench-{}", implementation.name());
        let _ = Api::<Namespace>::all(driver.clone())
            .delete(&namespace, &DeleteParams::background())
            .await;
    }
    report.apiserver_peak_rss = server.as_ref().and_then(ApiServerProcess::peak_rss);
    Ok(report)
}

/// One run of the bench: what every implementation shares.
struct Bench<'a, P: Fn(&str)> {
    plan: &'a ConvergePlan,
    driver: &'a kube::Client,
    kubeconfig: &'a Path,
    logs: &'a Path,
    binding: &'a str,
    progress: &'a P,
}

/// Where a contender's counters stood when a phase began.
struct Mark {
    started: Instant,
    counters: Counters,
    cpu: Option<f64>,
}

impl<P: Fn(&str)> Bench<'_, P> {
    /// The phases for `implementation`, in a namespace of its own.
    async fn run(&self, implementation: Implementation) -> anyhow::Result<(Vec<Run>, Timeline)> {
        let plan = self.plan;
        let name = implementation.name();
        let namespace = format!("bench-{name}");
        self.fresh_namespace(&namespace).await?;
        let log = self.logs.join(format!("{name}.log"));
        let launch = Launch {
            kubeconfig: self.kubeconfig,
            concurrency: plan.concurrency,
            log: &log,
        };
        (self.progress)(&format!("{name}: starting"));
        let contender = match implementation {
            Implementation::Gantry => Contender::gantry(&plan.gantry, &launch, BINDINGS)?,
            Implementation::ControllerRuntime => Contender::controller_runtime(
                plan.peer.as_deref().expect("a peer binary"),
                &launch,
                &namespace,
                "Fanout",
                plan.children_per_parent,
                plan.resync,
            )?,
        };
        let outcome = self.phases(&contender, &namespace).await;
        let stopped = contender.stop(Duration::from_mins(1));
        let (runs, timeline) = outcome.map_err(|e| {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            e.context(format!("{name} (its last log lines:\n{})", tail.join("\n")))
        })?;
        stopped?;
        Ok((
            runs,
            Timeline {
                implementation: name.into(),
                points: timeline,
            },
        ))
    }

    /// A namespace of this name with nothing in it: one left by an earlier
    /// run is deleted first.
    async fn fresh_namespace(&self, namespace: &str) -> anyhow::Result<()> {
        let namespaces = Api::<Namespace>::all(self.driver.clone());
        if namespaces.get_opt(namespace).await?.is_some() {
            (self.progress)(&format!("deleting namespace {namespace} of an earlier run"));
            let _ = namespaces
                .delete(namespace, &DeleteParams::background())
                .await;
            let deadline = Instant::now() + self.plan.phase_timeout;
            while namespaces.get_opt(namespace).await?.is_some() {
                anyhow::ensure!(
                    Instant::now() < deadline,
                    "namespace {namespace} was not deleted within {:?}",
                    self.plan.phase_timeout
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        crate::cluster::ensure_namespace(self.driver, namespace).await
    }

    async fn mark(&self, contender: &Contender) -> anyhow::Result<Mark> {
        Ok(Mark {
            started: Instant::now(),
            counters: contender.counters().await?,
            cpu: contender.cpu_seconds(),
        })
    }

    async fn finish(&self, contender: &Contender, phase: &str, mark: &Mark) -> anyhow::Result<Run> {
        let seconds = mark.started.elapsed().as_secs_f64();
        let now = contender.counters().await?;
        let events = now.event_writes - mark.counters.event_writes;
        let writes = now.writes - mark.counters.writes - events;
        #[allow(clippy::cast_precision_loss)] // counts far below 2^52
        let children = self.plan.parents as f64 * f64::from(self.plan.children_per_parent);
        #[allow(clippy::cast_precision_loss)]
        let writes_per_child = writes as f64 / children;
        Ok(Run {
            implementation: contender.implementation.name().into(),
            phase: phase.into(),
            seconds,
            writes,
            events,
            writes_per_child,
            reconciles: now.reconciles - mark.counters.reconciles,
            cpu_seconds: contender
                .cpu_seconds()
                .zip(mark.cpu)
                .map(|(now, then)| now - then),
            peak_rss_bytes: contender.peak_rss(),
            latency: None,
        })
    }

    async fn phases(
        &self,
        contender: &Contender,
        namespace: &str,
    ) -> anyhow::Result<(Vec<Run>, Vec<(f64, usize)>)> {
        let plan = self.plan;
        let name = contender.implementation.name();
        let progress = |line: &str| (self.progress)(&format!("{name}: {line}"));
        let parents: Api<DynamicObject> =
            Api::namespaced_with(self.driver.clone(), namespace, &fanout_resource());
        if contender.implementation == Implementation::Gantry {
            self.wait_for(contender, "the binding in service", |text| {
                sum(text, "gantry_bindings_active", "") >= 1.0
            })
            .await?;
        }
        let mut runs = Vec::new();

        // Phase 1: create and converge.
        progress(&format!("creating {} parents", plan.parents));
        let start = self.mark(contender).await?;
        every_parent(plan.parents, |parent| {
            let object = json!({"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout",
                "metadata": {"name": parent, "namespace": namespace}, "spec": {"value": "v1"}});
            let parents = parents.clone();
            async move {
                parents
                    .patch(
                        &parent,
                        &PatchParams::apply("gantry-bench").force(),
                        &Patch::Apply(&object),
                    )
                    .await
            }
        })
        .await?;
        progress(&format!(
            "created in {:.1}s; converging",
            start.started.elapsed().as_secs_f64()
        ));
        let mut timeline = Vec::new();
        wait_until(
            plan,
            &parents,
            "v1",
            start.started,
            &mut timeline,
            &progress,
        )
        .await?;
        runs.push(self.finish(contender, "converge", &start).await?);
        if plan.converge_only {
            return Ok((runs, timeline));
        }

        // Phase 2: a resync of every parent with nothing changed.
        progress("waiting for a resync of every parent");
        let start = self.mark(contender).await?;
        let wanted = start.counters.reconciles + plan.parents as u64;
        while contender.counters().await?.reconciles < wanted {
            anyhow::ensure!(
                start.started.elapsed() < plan.phase_timeout + plan.resync,
                "no full resync within {:?}",
                plan.phase_timeout + plan.resync
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        runs.push(self.finish(contender, "resync", &start).await?);

        // Phase 3: change every parent's spec.
        progress("changing every parent's spec");
        let start = self.mark(contender).await?;
        every_parent(plan.parents, |parent| {
            let parents = parents.clone();
            async move {
                let patch = json!({"spec": {"value": "v2"}});
                parents
                    .patch(&parent, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
            }
        })
        .await?;
        wait_until(
            plan,
            &parents,
            "v2",
            start.started,
            &mut Vec::new(),
            &progress,
        )
        .await?;
        runs.push(self.finish(contender, "spec-change", &start).await?);

        // Phase 4: churn, timing each change.
        if let Some(churn) = plan.churn {
            progress(&format!(
                "changing {}% of the parents every second for {:?}",
                churn.percent, churn.duration
            ));
            let start = self.mark(contender).await?;
            let config_maps = Api::namespaced(self.driver.clone(), namespace);
            let latency = churn::run(
                &parents,
                config_maps,
                plan.parents,
                plan.children_per_parent,
                churn,
                plan.phase_timeout,
            )
            .await?;
            let mut run = self.finish(contender, "churn", &start).await?;
            run.latency = Some(latency);
            runs.push(run);
        }

        if contender.implementation == Implementation::Gantry {
            runs.push(self.shadow(contender).await?);
        }
        Ok((runs, timeline))
    }

    /// Gantry's fourth phase: a new version (the same code under another
    /// digest) is shadow-run on every parent before it serves.
    async fn shadow(&self, contender: &Contender) -> anyhow::Result<Run> {
        (self.progress)("gantry: pushing a new version: shadow run on every parent");
        let start = self.mark(contender).await?;
        let swaps = |text: &str| sum(text, "gantry_plugin_swaps_total", "binding=\"fanout\"");
        let refusals = |text: &str| {
            sum(
                text,
                "gantry_plugin_load_failures_total",
                "binding=\"fanout\"",
            )
        };
        let before = contender.metrics().await?;
        let renamed = with_custom_section(&self.plan.plugin, b"gantry-bench-v2");
        let cm = crate::dev::binding_config_map("fanout", BINDINGS, self.binding, &renamed, true)?;
        crate::dev::apply_binding(self.driver, &cm).await?;
        let text = self
            .wait_for(contender, "the new version in service", |text| {
                swaps(text) > swaps(&before) || refusals(text) > refusals(&before)
            })
            .await?;
        anyhow::ensure!(
            refusals(&text) <= refusals(&before),
            "the new version was refused"
        );
        let mut run = self.finish(contender, "shadow", &start).await?;
        run.seconds = sum(&text, "gantry_shadow_run_seconds", "binding=\"fanout\"");
        anyhow::ensure!(run.seconds > 0.0, "the new version had no shadow run");
        Ok(run)
    }

    /// Scrape `contender` until its metrics satisfy `done`; their text.
    async fn wait_for(
        &self,
        contender: &Contender,
        what: &str,
        done: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let deadline = Instant::now() + self.plan.phase_timeout;
        loop {
            let text = contender.metrics().await?;
            if done(&text) {
                return Ok(text);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{what}: not within {:?}",
                self.plan.phase_timeout
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// `component` with a custom section `payload` appended: the same code
/// under another digest. (Four bytes of framing; a Wasm encoder library
/// would add nothing here.)
pub(super) fn with_custom_section(component: &[u8], payload: &[u8]) -> Vec<u8> {
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

/// The report as text: a table of every phase, then Gantry's numbers over
/// the peer's for the phases both ran.
pub fn render(report: &ConvergeReport) -> String {
    let mib = |b: Option<u64>| {
        #[allow(clippy::cast_precision_loss)] // sizes far below 2^52
        b.map_or("n/a".to_string(), |b| {
            format!("{:.0}", b as f64 / 1_048_576.0)
        })
    };
    let cpu = |c: Option<f64>| c.map_or("n/a".to_string(), |c| format!("{c:.1}"));
    let mut out = format!(
        "{} parents x {} children\n{:<20} {:<12} {:>9} {:>9} {:>13} {:>7} {:>11} {:>8} {:>9}\n",
        report.parents,
        report.children_per_parent,
        "implementation",
        "phase",
        "seconds",
        "writes",
        "writes/child",
        "events",
        "reconciles",
        "cpu s",
        "rss MiB"
    );
    for r in &report.runs {
        let _ = writeln!(
            out,
            "{:<20} {:<12} {:>9.2} {:>9} {:>13.2} {:>7} {:>11} {:>8} {:>9}",
            r.implementation,
            r.phase,
            r.seconds,
            r.writes,
            r.writes_per_child,
            r.events,
            r.reconciles,
            cpu(r.cpu_seconds),
            mib(r.peak_rss_bytes)
        );
    }
    let ratios = ratios(report);
    if !ratios.is_empty() {
        let _ = writeln!(
            out,
            "\ngantry / controller-runtime\n{:<12} {:>9} {:>9} {:>8} {:>9}",
            "phase", "seconds", "writes", "cpu", "rss"
        );
        let ratio = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.2}"));
        for (phase, [seconds, writes, cpu, rss]) in ratios {
            let _ = writeln!(
                out,
                "{phase:<12} {:>9} {:>9} {:>8} {:>9}",
                ratio(seconds),
                ratio(writes),
                ratio(cpu),
                ratio(rss)
            );
        }
    }
    let churned: Vec<(&str, &Latency)> = report
        .runs
        .iter()
        .filter_map(|r| Some((r.implementation.as_str(), r.latency.as_ref()?)))
        .collect();
    if !churned.is_empty() {
        let _ = writeln!(
            out,
            "\nreaction latency under churn, spec change to children written\n{:<20} {:>8} {:>10} {:>9} {:>9} {:>9}",
            "implementation", "changes", "changes/s", "p50 s", "p99 s", "max s"
        );
        for (implementation, l) in &churned {
            let _ = writeln!(
                out,
                "{implementation:<20} {:>8} {:>10.1} {:>9.3} {:>9.3} {:>9.3}",
                l.changes, l.changes_per_second, l.p50_seconds, l.p99_seconds, l.max_seconds
            );
        }
        if let [(_, gantry), (_, peer)] = churned[..] {
            let _ = writeln!(
                out,
                "gantry / controller-runtime: p50 {:.2}, p99 {:.2}",
                gantry.p50_seconds / peer.p50_seconds,
                gantry.p99_seconds / peer.p99_seconds
            );
        }
    }
    let _ = writeln!(
        out,
        "peak RSS of the API server: {} MiB",
        mib(report.apiserver_peak_rss)
    );
    out
}

/// Per phase both implementations ran: Gantry's seconds, writes, CPU
/// seconds and peak RSS over the peer's.
pub fn ratios(report: &ConvergeReport) -> Vec<(String, [Option<f64>; 4])> {
    let find = |implementation: Implementation, phase: &str| {
        report
            .runs
            .iter()
            .find(|r| r.implementation == implementation.name() && r.phase == phase)
    };
    let over = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    report
        .runs
        .iter()
        .filter(|r| r.implementation == Implementation::Gantry.name())
        .filter_map(|gantry| {
            let peer = find(Implementation::ControllerRuntime, &gantry.phase)?;
            #[allow(clippy::cast_precision_loss)] // counts far below 2^52
            let as_f64 = |n: u64| Some(n as f64);
            #[allow(clippy::cast_precision_loss)]
            let rss = |r: &Run| r.peak_rss_bytes.map(|b| b as f64);
            Some((
                gantry.phase.clone(),
                [
                    over(Some(gantry.seconds), Some(peer.seconds)),
                    over(as_f64(gantry.writes), as_f64(peer.writes)),
                    over(gantry.cpu_seconds, peer.cpu_seconds),
                    over(rss(gantry), rss(peer)),
                ],
            ))
        })
        .collect()
}
