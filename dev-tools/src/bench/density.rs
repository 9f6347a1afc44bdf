//! `gantry bench density`: N operators in one cluster, each its own CRD
//! (`Density0` .. `DensityN-1` in `bench.gantry.dev/v1`, with the schema of
//! `Fanout`) with M parents of K ConfigMap children. Gantry runs all N as
//! bindings of one `gantry run`; with `--peer controller-runtime`, the peer
//! runs them after it as N processes, one controller-runtime manager per
//! CRD, as N teams would deploy them.
//!
//! Each implementation is measured from outside, summed over its
//! processes: CPU time and peak RSS while every parent converges, CPU time
//! over a steady window with nothing changing (resyncs only), and RSS at
//! its end. Then one more operator at a time joins (Gantry: a binding;
//! the peer: a process), its parents converge and another steady window
//! passes; the least-squares slope of the total RSS over the operator
//! count is the memory one more operator adds.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::{Value, json};

use super::contender::{Contender, Implementation, Launch, sum};
use super::converge::{ApiServerProcess, converged, with_custom_section};

/// The group and version of every operator's kind.
const GROUP: &str = "bench.gantry.dev";
const VERSION: &str = "v1";

/// Namespace of Gantry's bindings in this bench.
const BINDINGS: &str = "density-gantry-system";

/// What to run.
#[derive(Debug, Clone)]
pub struct DensityPlan {
    /// Operators (CRDs, bindings, peer processes) measured together.
    pub operators: usize,
    /// Parents of each operator.
    pub parents_per_operator: usize,
    /// ConfigMaps per parent.
    pub children_per_parent: u32,
    /// Reconciles at once per operator: each binding's
    /// `maxConcurrentReconciles` and each peer's `MaxConcurrentReconciles`;
    /// Gantry's `--concurrency` is this times the operators, so that no
    /// binding waits for another's slot.
    pub concurrency: usize,
    /// Every operator's resync period.
    pub resync: Duration,
    /// Length of each steady window.
    pub steady: Duration,
    /// Operators added one at a time after the steady window, for the
    /// memory one more adds (at least 1).
    pub extra_operators: usize,
    /// Give up on a phase after this long.
    pub phase_timeout: Duration,
    /// A cluster to use instead of starting `gantry apiserver`.
    pub kubeconfig: Option<PathBuf>,
    /// The `gantry` binary (`gantry apiserver`, `gantry run`).
    pub gantry: PathBuf,
    /// The fanout component.
    pub plugin: Vec<u8>,
    /// The controller-runtime peer's binary, to run after Gantry.
    pub peer: Option<PathBuf>,
}

/// One operator at the end of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OperatorOutcome {
    /// Its kind.
    pub kind: String,
    /// The namespace of its parents.
    pub namespace: String,
    /// Parents created.
    pub parents: usize,
    /// Parents `Synced` with `observedGeneration` current.
    pub converged: usize,
    /// ConfigMaps in its namespace controlled by a parent of its kind.
    pub children: usize,
}

/// Everything measured of one implementation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DensityRun {
    /// `gantry` or `controller-runtime`.
    pub implementation: String,
    /// Operator processes at N operators.
    pub processes: usize,
    /// From starting the processes until every operator serves (Gantry:
    /// every binding in service; the peer: every cache synced).
    pub start_seconds: f64,
    /// CPU time of the processes from their start until then.
    pub start_cpu_seconds: Option<f64>,
    /// From creating the first parent until all N×M have converged.
    pub converge_seconds: f64,
    /// CPU time of the processes meanwhile.
    pub converge_cpu_seconds: Option<f64>,
    /// The sum over the processes of each one's peak RSS during converge
    /// (from its start where Linux cannot reset the peak), bytes.
    pub converge_peak_rss_bytes: Option<u64>,
    /// CPU time of the processes over the steady window.
    pub steady_cpu_seconds: Option<f64>,
    /// Their total RSS at the end of the steady window, bytes.
    pub steady_rss_bytes: Option<u64>,
    /// Total RSS at the end of a steady window, by operators: N, then each
    /// one added.
    pub rss_by_operators: Vec<(usize, u64)>,
    /// The least-squares slope of `rss_by_operators`: bytes one more
    /// operator adds.
    pub marginal_rss_bytes: Option<f64>,
    /// Every operator, the added ones included.
    pub operators: Vec<OperatorOutcome>,
}

/// Everything measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DensityReport {
    /// Operators N.
    pub operators: usize,
    /// Parents per operator M.
    pub parents_per_operator: usize,
    /// Children per parent K.
    pub children_per_parent: u32,
    /// Length of each steady window.
    pub steady_seconds: f64,
    /// One per implementation, in the order they ran.
    pub runs: Vec<DensityRun>,
    /// Peak RSS of the API server process, bytes (none for a given cluster).
    pub apiserver_peak_rss: Option<u64>,
}

/// One operator of one implementation: its kind and namespace.
struct Operator {
    index: usize,
    namespace: String,
}

impl Operator {
    fn new(implementation: Implementation, index: usize) -> Self {
        Self {
            index,
            namespace: format!("density-{}-{index}", implementation.name()),
        }
    }

    fn kind(&self) -> String {
        kind(self.index)
    }

    /// Gantry's binding of it.
    fn binding(&self) -> String {
        format!("density-{}", self.index)
    }

    fn parents(&self, driver: &kube::Client) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(GROUP, VERSION, &self.kind());
        let resource = ApiResource::from_gvk_with_plural(&gvk, &plural(self.index));
        Api::namespaced_with(driver.clone(), &self.namespace, &resource)
    }
}

/// The kind of operator `index`.
fn kind(index: usize) -> String {
    format!("Density{index}")
}

/// The plural of operator `index`'s kind.
fn plural(index: usize) -> String {
    format!("density{index}s")
}

/// The CRD of operator `index`: the Fanout CRD (`fanout_crd`) under the
/// operator's names.
fn crd(fanout_crd: &Value, index: usize) -> Value {
    let mut crd = fanout_crd.clone();
    let kind = kind(index);
    crd["metadata"] = json!({"name": format!("{}.{GROUP}", plural(index))});
    crd["spec"]["names"] = json!({
        "kind": kind,
        "listKind": format!("{kind}List"),
        "plural": plural(index),
        "singular": kind.to_lowercase(),
    });
    crd
}

/// Run the benchmark; `progress` gets a line per step.
pub async fn run(plan: &DensityPlan, progress: impl Fn(&str)) -> anyhow::Result<DensityReport> {
    anyhow::ensure!(plan.operators >= 1, "at least one operator");
    anyhow::ensure!(plan.extra_operators >= 1, "at least one extra operator");
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

    let total = plan.operators + plan.extra_operators;
    // Every namespace either implementation uses, the bindings' first:
    // objects an earlier run left there would be reconciled in this one.
    let mut namespaces = vec![BINDINGS.to_string()];
    for implementation in [Implementation::Gantry, Implementation::ControllerRuntime] {
        namespaces.extend((0..total).map(|i| Operator::new(implementation, i).namespace));
    }
    delete_namespaces(&driver, &namespaces, Some(plan.phase_timeout), &progress).await?;
    progress(&format!("installing {total} CRDs"));
    let source = crate::examples::source_dir("fanout").join("crd.yaml");
    let fanout_crd = gantry_toolchain::manifest::read_objects(&source)?
        .into_iter()
        .next()
        .with_context(|| format!("no CRD in {}", source.display()))?;
    for index in 0..total {
        crate::cluster::apply_object(&driver, &crd(&fanout_crd, index)).await?;
    }
    for index in 0..total {
        crate::cluster::wait_for_crd(&driver, &format!("{}.{GROUP}", plural(index))).await?;
    }

    let bench = Bench {
        plan,
        driver: &driver,
        kubeconfig: &kubeconfig,
        logs: dir.path(),
        progress: &progress,
    };
    let mut implementations = vec![Implementation::Gantry];
    if plan.peer.is_some() {
        implementations.push(Implementation::ControllerRuntime);
    }
    let mut runs = Vec::new();
    for implementation in implementations {
        runs.push(bench.run(implementation).await?);
    }
    // Only now: deleting one run's objects while the next runs would load
    // the API server during that one alone.
    delete_namespaces(&driver, &namespaces, None, &progress).await?;
    let crds = Api::<CustomResourceDefinition>::all(driver.clone());
    for index in 0..total {
        let name = format!("{}.{GROUP}", plural(index));
        let _ = crds.delete(&name, &DeleteParams::background()).await;
    }
    Ok(DensityReport {
        operators: plan.operators,
        parents_per_operator: plan.parents_per_operator,
        children_per_parent: plan.children_per_parent,
        steady_seconds: plan.steady.as_secs_f64(),
        runs,
        apiserver_peak_rss: server.as_ref().and_then(ApiServerProcess::peak_rss),
    })
}

/// Delete those of `namespaces` that exist; with a `wait`, until they are
/// gone (at most that long).
async fn delete_namespaces(
    driver: &kube::Client,
    namespaces: &[String],
    wait: Option<Duration>,
    progress: &impl Fn(&str),
) -> anyhow::Result<()> {
    let api = Api::<Namespace>::all(driver.clone());
    let mut doomed = Vec::new();
    for namespace in namespaces {
        if api.get_opt(namespace).await?.is_some() {
            let _ = api.delete(namespace, &DeleteParams::background()).await;
            doomed.push(namespace);
        }
    }
    let Some(wait) = wait else { return Ok(()) };
    if !doomed.is_empty() {
        progress(&format!(
            "deleting {} namespaces of an earlier run",
            doomed.len()
        ));
    }
    let deadline = Instant::now() + wait;
    for namespace in doomed {
        while api.get_opt(namespace).await?.is_some() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "namespace {namespace} was not deleted within {wait:?}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(())
}

/// What every implementation's run shares.
struct Bench<'a, P: Fn(&str)> {
    plan: &'a DensityPlan,
    driver: &'a kube::Client,
    kubeconfig: &'a Path,
    logs: &'a Path,
    progress: &'a P,
}

/// The processes of one implementation: Gantry's one, or one peer per
/// operator.
struct Fleet {
    implementation: Implementation,
    processes: Vec<Contender>,
}

impl Fleet {
    /// CPU time of every process so far, seconds.
    fn cpu_seconds(&self) -> Option<f64> {
        self.processes.iter().map(Contender::cpu_seconds).sum()
    }

    /// Total RSS now, bytes.
    fn rss(&self) -> Option<u64> {
        self.processes.iter().map(Contender::rss).sum()
    }

    /// Start each process's peak RSS afresh from its RSS now.
    fn reset_peak_rss(&self) {
        for process in &self.processes {
            process.reset_peak_rss();
        }
    }

    /// The sum of each process's peak RSS, bytes.
    fn peak_rss(&self) -> Option<u64> {
        self.processes.iter().map(Contender::peak_rss).sum()
    }

    /// SIGTERM to every process, and wait for each (killed after `grace`).
    async fn stop(self, grace: Duration) -> anyhow::Result<()> {
        let stops = self
            .processes
            .into_iter()
            .map(|p| tokio::task::spawn_blocking(move || p.stop(grace)));
        for stopped in futures::future::try_join_all(stops).await? {
            stopped?;
        }
        Ok(())
    }
}

impl<P: Fn(&str)> Bench<'_, P> {
    /// Every phase for `implementation`.
    async fn run(&self, implementation: Implementation) -> anyhow::Result<DensityRun> {
        let plan = self.plan;
        let name = implementation.name();
        let progress = |line: &str| (self.progress)(&format!("{name}: {line}"));
        let total = plan.operators + plan.extra_operators;
        let operators: Vec<Operator> = (0..total)
            .map(|i| Operator::new(implementation, i))
            .collect();
        if implementation == Implementation::Gantry {
            crate::cluster::ensure_namespace(self.driver, BINDINGS).await?;
        }
        for operator in &operators {
            crate::cluster::ensure_namespace(self.driver, &operator.namespace).await?;
        }
        let (first, extra) = operators.split_at(plan.operators);

        progress(&format!("starting {} operators", first.len()));
        let started = Instant::now();
        let mut fleet = Fleet {
            implementation,
            processes: Vec::new(),
        };
        let outcome = async {
            self.add(&mut fleet, first).await?;
            let start_seconds = started.elapsed().as_secs_f64();
            let start_cpu_seconds = fleet.cpu_seconds();
            let mut run = self.phases(&fleet, first, &progress).await?;
            run.start_seconds = start_seconds;
            run.start_cpu_seconds = start_cpu_seconds;
            for (i, operator) in extra.iter().enumerate() {
                let count = first.len() + i + 1;
                progress(&format!("one more operator: {count}"));
                self.add(&mut fleet, std::slice::from_ref(operator)).await?;
                self.converge(std::slice::from_ref(operator), &progress)
                    .await?;
                tokio::time::sleep(plan.steady).await;
                let rss = fleet.rss().context("reading RSS")?;
                run.rss_by_operators.push((count, rss));
            }
            run.marginal_rss_bytes = slope(&run.rss_by_operators);
            run.operators = self.outcomes(&operators).await?;
            anyhow::Ok(run)
        }
        .await;
        let stopped = fleet.stop(Duration::from_mins(1)).await;
        let run = outcome.map_err(|e| e.context(format!("{name}{}", self.log_tails(name))))?;
        stopped?;
        Ok(run)
    }

    /// Bring `operators` into service in `fleet`: Gantry's bindings (and
    /// Gantry itself, the first time); a peer process each.
    async fn add(&self, fleet: &mut Fleet, operators: &[Operator]) -> anyhow::Result<()> {
        let plan = self.plan;
        match fleet.implementation {
            Implementation::Gantry => {
                for operator in operators {
                    // A digest of its own, as N teams' plugins would have:
                    // each binding compiles and holds its own component.
                    let plugin = with_custom_section(&plan.plugin, operator.binding().as_bytes());
                    let binding = format!(
                        "name: {}\nparent: {{apiVersion: {GROUP}/{VERSION}, kind: {}}}\n\
                         children: [{{apiVersion: v1, kind: ConfigMap}}]\nresyncSeconds: {}\n\
                         maxConcurrentReconciles: {}\nconfig: {{children: {}}}\n",
                        operator.binding(),
                        operator.kind(),
                        plan.resync.as_secs().max(1),
                        plan.concurrency,
                        plan.children_per_parent,
                    );
                    let cm = crate::dev::binding_config_map(
                        &operator.binding(),
                        BINDINGS,
                        &binding,
                        &plugin,
                        true,
                    )?;
                    crate::dev::apply_binding(self.driver, &cm).await?;
                }
                if fleet.processes.is_empty() {
                    let log = self.logs.join("gantry.log");
                    let launch = Launch {
                        kubeconfig: self.kubeconfig,
                        concurrency: plan.concurrency * (plan.operators + plan.extra_operators),
                        log: &log,
                    };
                    fleet
                        .processes
                        .push(Contender::gantry(&plan.gantry, &launch, BINDINGS)?);
                }
                let wanted = operators.last().map_or(0, |o| o.index + 1);
                self.bindings_active(&fleet.processes[0], wanted).await
            }
            Implementation::ControllerRuntime => {
                let peer = plan.peer.clone().context("no peer binary")?;
                let starts = operators.iter().map(|operator| {
                    let peer = peer.clone();
                    let kubeconfig = self.kubeconfig.to_path_buf();
                    let log = self
                        .logs
                        .join(format!("controller-runtime-{}.log", operator.index));
                    let (namespace, kind) = (operator.namespace.clone(), operator.kind());
                    let (concurrency, children, resync) =
                        (plan.concurrency, plan.children_per_parent, plan.resync);
                    tokio::task::spawn_blocking(move || {
                        let launch = Launch {
                            kubeconfig: &kubeconfig,
                            concurrency,
                            log: &log,
                        };
                        Contender::controller_runtime(
                            &peer, &launch, &namespace, &kind, children, resync,
                        )
                    })
                });
                for started in futures::future::try_join_all(starts).await? {
                    fleet.processes.push(started?);
                }
                Ok(())
            }
        }
    }

    /// Wait until `gantry` has `wanted` bindings in service.
    async fn bindings_active(&self, gantry: &Contender, wanted: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.plan.phase_timeout;
        #[allow(clippy::cast_precision_loss)] // a few operators
        let wanted = wanted as f64;
        loop {
            let text = gantry.metrics().await?;
            let active = sum(&text, "gantry_bindings_active", "");
            if active >= wanted {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "{active} of {wanted} bindings in service within {:?}",
                self.plan.phase_timeout
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Converge and steady state at N operators.
    async fn phases(
        &self,
        fleet: &Fleet,
        operators: &[Operator],
        progress: &impl Fn(&str),
    ) -> anyhow::Result<DensityRun> {
        fleet.reset_peak_rss();
        let cpu = fleet.cpu_seconds();
        let started = Instant::now();
        self.converge(operators, progress).await?;
        let converge_seconds = started.elapsed().as_secs_f64();
        let converge_cpu_seconds = minus(fleet.cpu_seconds(), cpu);
        let converge_peak_rss_bytes = fleet.peak_rss();

        progress(&format!(
            "steady for {:.0}s",
            self.plan.steady.as_secs_f64()
        ));
        let cpu = fleet.cpu_seconds();
        tokio::time::sleep(self.plan.steady).await;
        let steady_cpu_seconds = minus(fleet.cpu_seconds(), cpu);
        let steady_rss_bytes = fleet.rss();
        Ok(DensityRun {
            implementation: fleet.implementation.name().into(),
            processes: fleet.processes.len(),
            start_seconds: 0.0,
            start_cpu_seconds: None,
            converge_seconds,
            converge_cpu_seconds,
            converge_peak_rss_bytes,
            steady_cpu_seconds,
            steady_rss_bytes,
            rss_by_operators: steady_rss_bytes
                .map(|rss| vec![(operators.len(), rss)])
                .unwrap_or_default(),
            marginal_rss_bytes: None,
            operators: Vec::new(),
        })
    }

    /// Create every parent of `operators`, the operators in turn, and wait
    /// until all have converged.
    async fn converge(
        &self,
        operators: &[Operator],
        progress: &impl Fn(&str),
    ) -> anyhow::Result<()> {
        let plan = self.plan;
        let parents = operators.len() * plan.parents_per_operator;
        progress(&format!("creating {parents} parents"));
        let started = Instant::now();
        let apis: Vec<_> = operators
            .iter()
            .map(|o| (o.parents(self.driver), o))
            .collect();
        let each = &apis;
        let writes = (0..plan.parents_per_operator)
            .flat_map(|p| each.iter().map(move |(api, operator)| (p, api, operator)));
        futures::stream::iter(writes)
            .map(|(p, api, operator)| async move {
                let name = format!("p-{p:05}");
                let object = json!({"apiVersion": format!("{GROUP}/{VERSION}"),
                    "kind": operator.kind(),
                    "metadata": {"name": name, "namespace": operator.namespace},
                    "spec": {"value": "v1"}});
                api.patch(
                    &name,
                    &PatchParams::apply("gantry-bench").force(),
                    &Patch::Apply(&object),
                )
                .await
            })
            .buffer_unordered(32)
            .try_for_each(|_| std::future::ready(Ok(())))
            .await?;
        progress(&format!(
            "created in {:.1}s; converging",
            started.elapsed().as_secs_f64()
        ));
        // Listing every parent costs the API server; poll less often when many.
        let interval = Duration::from_millis(200).max(Duration::from_micros(100 * parents as u64));
        let mut last_report = Instant::now();
        loop {
            let done: usize = futures::stream::iter(&apis)
                .map(|(api, _)| converged(api, "v1"))
                .buffer_unordered(8)
                .try_collect::<Vec<usize>>()
                .await?
                .into_iter()
                .sum();
            if done >= parents {
                return Ok(());
            }
            anyhow::ensure!(
                started.elapsed() < plan.phase_timeout,
                "only {done} of {parents} parents converged within {:?}",
                plan.phase_timeout
            );
            if last_report.elapsed() > Duration::from_secs(5) {
                progress(&format!("{done}/{parents} converged"));
                last_report = Instant::now();
            }
            tokio::time::sleep(interval).await;
        }
    }

    /// Each operator's parents, converged parents and children now.
    async fn outcomes(&self, operators: &[Operator]) -> anyhow::Result<Vec<OperatorOutcome>> {
        let mut out = Vec::with_capacity(operators.len());
        for operator in operators {
            let parents = operator.parents(self.driver);
            let created = parents.list_metadata(&ListParams::default()).await?;
            let config_maps: Api<ConfigMap> =
                Api::namespaced(self.driver.clone(), &operator.namespace);
            let kind = operator.kind();
            let children = config_maps
                .list_metadata(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|cm| {
                    cm.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.controller == Some(true) && r.kind == kind)
                })
                .count();
            out.push(OperatorOutcome {
                kind,
                namespace: operator.namespace.clone(),
                parents: created.items.len(),
                converged: converged(&parents, "v1").await?,
                children,
            });
        }
        Ok(out)
    }

    /// The last lines of the logs of `implementation`'s processes (the
    /// first few), for an error message.
    fn log_tails(&self, implementation: &str) -> String {
        let mut logs: Vec<PathBuf> = std::fs::read_dir(self.logs)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension().is_some_and(|e| e == "log")
                    && p.file_stem()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(implementation))
            })
            .collect();
        logs.sort();
        let mut out = String::new();
        for log in logs.iter().take(3) {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(15)..];
            let _ = write!(
                out,
                "\n(last lines of {}:\n{})",
                log.file_name().unwrap_or_default().to_string_lossy(),
                tail.join("\n")
            );
        }
        out
    }
}

/// Bytes in MiB.
#[allow(clippy::cast_precision_loss)] // sizes far below 2^52
fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

/// `now - then`, when both are known.
fn minus(now: Option<f64>, then: Option<f64>) -> Option<f64> {
    now.zip(then).map(|(now, then)| now - then)
}

/// The least-squares slope of `y` over `x`; none for fewer than two
/// distinct `x`. (Two sums; a statistics crate would add nothing.)
#[allow(clippy::cast_precision_loss)] // counts and sizes far below 2^52
pub fn slope(points: &[(usize, u64)]) -> Option<f64> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let (sxx, sxy) = points.iter().fold((0.0, 0.0), |(sxx, sxy), &(x, y)| {
        let dx = x as f64 - mean_x;
        (sxx + dx * dx, sxy + dx * (y as f64 - mean_y))
    });
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The report as text: each measure for each implementation, side by side,
/// with Gantry's over the peer's; then whether every operator converged.
pub fn render(report: &DensityReport) -> String {
    type Measure = fn(&DensityRun) -> Option<f64>;
    // (label, decimals, measure)
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let measures: [(String, usize, Measure); 10] = [
        ("processes".into(), 0, |r| Some(r.processes as f64)),
        ("start: seconds".into(), 1, |r| Some(r.start_seconds)),
        ("start: CPU s".into(), 1, |r| r.start_cpu_seconds),
        ("converge: seconds".into(), 1, |r| Some(r.converge_seconds)),
        ("converge: CPU s".into(), 1, |r| r.converge_cpu_seconds),
        ("converge: peak RSS MiB".into(), 1, |r| {
            r.converge_peak_rss_bytes.map(mib)
        }),
        (
            format!("steady {:.0}s: CPU s", report.steady_seconds),
            2,
            |r| r.steady_cpu_seconds,
        ),
        ("steady: RSS MiB".into(), 1, |r| r.steady_rss_bytes.map(mib)),
        ("steady: RSS MiB per operator".into(), 1, |r| {
            let (operators, rss) = r.rss_by_operators.first()?;
            Some(mib(*rss) / *operators as f64)
        }),
        ("one more operator: RSS MiB".into(), 1, |r| {
            r.marginal_rss_bytes.map(|b| b / 1_048_576.0)
        }),
    ];
    let mut out = format!(
        "{} operators x {} parents x {} children\n{:<30}",
        report.operators, report.parents_per_operator, report.children_per_parent, ""
    );
    for run in &report.runs {
        let _ = write!(out, " {:>19}", run.implementation);
    }
    let ratio = report.runs.len() == 2;
    if ratio {
        let _ = write!(out, " {:>12}", "gantry/peer");
    }
    out.push('\n');
    for (label, decimals, measure) in &measures {
        let _ = write!(out, "{label:<30}");
        for run in &report.runs {
            let cell = measure(run).map_or("n/a".to_string(), |v| format!("{v:.decimals$}"));
            let _ = write!(out, " {cell:>19}");
        }
        if ratio {
            let over = match (measure(&report.runs[0]), measure(&report.runs[1])) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                _ => "n/a".into(),
            };
            let _ = write!(out, " {over:>12}");
        }
        out.push('\n');
    }
    let children = report.parents_per_operator * report.children_per_parent as usize;
    for run in &report.runs {
        let whole = run
            .operators
            .iter()
            .filter(|o| {
                o.parents == report.parents_per_operator
                    && o.converged == o.parents
                    && o.children == children
            })
            .count();
        let _ = writeln!(
            out,
            "{}: {whole} of {} operators converged with {} parents and {children} children each",
            run.implementation,
            run.operators.len(),
            report.parents_per_operator,
        );
        let points: Vec<String> = run
            .rss_by_operators
            .iter()
            .map(|(n, b)| format!("{n}: {:.1}", mib(*b)))
            .collect();
        let _ = writeln!(
            out,
            "{}: total RSS MiB by operators {}",
            run.implementation,
            points.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "peak RSS of the API server: {}",
        report
            .apiserver_peak_rss
            .map_or("n/a".into(), |b| format!("{:.0} MiB", mib(b)))
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::float_cmp)] // exact in binary
    fn slope_is_least_squares_over_operators() {
        assert_eq!(slope(&[(3, 100), (4, 150)]), Some(50.0));
        assert_eq!(slope(&[(3, 100), (4, 140), (5, 200)]), Some(50.0));
        assert_eq!(slope(&[(3, 100)]), None);
        assert_eq!(slope(&[(3, 100), (3, 200)]), None);
    }

    fn run(implementation: &str, processes: usize, rss_mib: u64) -> DensityRun {
        let outcome = |i: usize| OperatorOutcome {
            kind: kind(i),
            namespace: format!("density-{implementation}-{i}"),
            parents: 2,
            converged: 2,
            children: if i == 2 { 3 } else { 4 },
        };
        DensityRun {
            implementation: implementation.into(),
            processes,
            start_seconds: 1.0,
            start_cpu_seconds: Some(0.5),
            converge_seconds: 2.0,
            converge_cpu_seconds: Some(1.0),
            converge_peak_rss_bytes: Some(rss_mib << 20),
            steady_cpu_seconds: Some(0.1),
            steady_rss_bytes: Some(rss_mib << 20),
            rss_by_operators: vec![(3, rss_mib << 20), (4, (rss_mib + 3) << 20)],
            marginal_rss_bytes: Some(3.0 * 1_048_576.0),
            operators: (0..4).map(outcome).collect(),
        }
    }

    #[test]
    fn the_report_sets_each_measure_side_by_side_with_gantrys_over_the_peers() {
        let report = DensityReport {
            operators: 3,
            parents_per_operator: 2,
            children_per_parent: 2,
            steady_seconds: 5.0,
            runs: vec![run("gantry", 1, 60), run("controller-runtime", 3, 120)],
            apiserver_peak_rss: None,
        };
        let text = render(&report);
        let line = |label: &str| {
            text.lines()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label}: {text}"))
                .split_whitespace()
                .rev()
                .take(3)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            line("steady: RSS MiB "),
            ["0.50", "120.0", "60.0"],
            "{text}"
        );
        assert_eq!(line("steady: RSS MiB per"), ["0.50", "40.0", "20.0"]);
        assert_eq!(line("one more operator"), ["1.00", "3.0", "3.0"]);
        assert_eq!(line("processes"), ["0.33", "3", "1"]);
        assert!(text.contains("steady 5s: CPU s"), "{text}");
        assert!(
            text.contains("gantry: 3 of 4 operators converged with 2 parents and 4 children each"),
            "{text}"
        );
        assert!(
            text.contains("total RSS MiB by operators 3: 60.0, 4: 63.0"),
            "{text}"
        );
    }

    #[test]
    fn each_operator_gets_the_fanout_schema_under_its_own_names() {
        let fanout = json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "fanouts.bench.gantry.dev"},
            "spec": {"group": "bench.gantry.dev", "scope": "Namespaced",
                "names": {"kind": "Fanout", "plural": "fanouts"},
                "versions": [{"name": "v1"}]}});
        let crd = crd(&fanout, 7);
        assert_eq!(crd["metadata"]["name"], "density7s.bench.gantry.dev");
        assert_eq!(crd["spec"]["names"]["kind"], "Density7");
        assert_eq!(crd["spec"]["names"]["listKind"], "Density7List");
        assert_eq!(crd["spec"]["names"]["singular"], "density7");
        assert_eq!(crd["spec"]["versions"], fanout["spec"]["versions"]);
        assert_eq!(crd["spec"]["scope"], "Namespaced");
    }
}
