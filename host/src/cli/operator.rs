//! `gantry run`, `gantry dev` and `gantry apiserver`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::{exit, tokio_runtime};
use gantry_operator::controller::leader::{LeaderElector, LeaseConfig};
use gantry_operator::controller::shard::Shard;
use gantry_operator::controller::{Metrics, OperatorOptions, run_operator};
use gantry_sandbox::runtime::{Runtime, RuntimeSettings};

/// Operator flags shared by `run` and `dev`.
#[derive(Debug, Args)]
pub(super) struct OperatorArgs {
    /// Namespace whose ConfigMaps labelled gantry.dev/plugin are the bindings.
    #[arg(long, env = "GANTRY_NAMESPACE", default_value = "gantry-system")]
    namespace: String,
    /// Reconciles running at once across all bindings.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Longest one reconcile may take, in seconds.
    #[arg(long, default_value_t = 60)]
    reconcile_timeout_secs: u64,
    /// Address of the probes /livez and /readyz, or "off" (default:
    /// 0.0.0.0:8081 for `run`, a free loopback port for `dev`).
    #[arg(long)]
    health_addr: Option<String>,
    /// Address of /metrics, or "off" (default: 0.0.0.0:8080 for `run`, a
    /// free loopback port for `dev`).
    #[arg(long)]
    metrics_addr: Option<String>,
    /// This replica's shard, `0..shard-count`.
    #[arg(long, default_value_t = 0)]
    shard_index: u32,
    /// Split the parents over this many replicas by a stable hash of
    /// namespace/name; each shard has its own Lease.
    #[arg(long, default_value_t = 1)]
    shard_count: u32,
    /// Reconcile only while holding a Lease, so that of several replicas
    /// one reconciles and another takes over when it stops.
    #[arg(long)]
    leader_elect: bool,
    /// Name of the Lease (in the bindings namespace).
    #[arg(long, default_value = "gantry-leader")]
    lease_name: String,
    /// Seconds a Lease holds without renewal.
    #[arg(long, default_value_t = 15)]
    lease_duration_secs: u64,
    /// Seconds between renewals and between attempts to acquire.
    #[arg(long, default_value_t = 2)]
    lease_retry_secs: u64,
    /// Watch parents, children and related objects only in these
    /// namespaces (comma-separated), which needs only a Role in each;
    /// default: every namespace. Cluster-scoped kinds are watched
    /// cluster-wide either way.
    #[arg(long, env = "GANTRY_WATCH_NAMESPACES", value_parser = gantry_operator::watch_scope::WatchScope::parse, default_value = "")]
    watch_namespaces: gantry_operator::watch_scope::WatchScope,
    #[command(flatten)]
    webhook: super::webhook::WebhookArgs,
    /// Where plugins fetched from URLs and OCI registries are cached, by
    /// digest (default: the user's cache dir, gantry/plugins).
    #[arg(long, env = "GANTRY_PLUGIN_CACHE_DIR")]
    plugin_cache_dir: Option<PathBuf>,
}

impl OperatorArgs {
    #[cfg(feature = "dev-tools")]
    pub(super) fn webhook_configuration_name(&self) -> &str {
        self.webhook.configuration_name()
    }

    pub(super) fn options(&self) -> OperatorOptions {
        let shard = Shard::new(self.shard_index, self.shard_count).unwrap_or_default();
        OperatorOptions {
            shard,
            namespace: self.namespace.clone(),
            concurrency: self.concurrency,
            reconcile_timeout: Duration::from_secs(self.reconcile_timeout_secs),
            plugin_sources: gantry_operator::delivery::source::FetchSettings {
                cache_dir: self
                    .plugin_cache_dir
                    .clone()
                    .or(gantry_operator::delivery::source::FetchSettings::default().cache_dir),
                ..gantry_operator::delivery::source::FetchSettings::default()
            },
            watch_scope: self.watch_namespaces.clone(),
            ..OperatorOptions::default()
        }
    }
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    operator: OperatorArgs,
}

/// Wait until this replica is ready (bindings loaded, caches synced) before
/// it asks for the Lease, so that a released Lease goes to a warm standby
/// rather than to a replica that has just started; but no longer than
/// `bound`, so that a replica that cannot get ready (a cache that never
/// syncs) still leads when no other replica does.
async fn ready_to_lead(readiness: &gantry_operator::controller::Readiness, bound: Duration) {
    let deadline = tokio::time::Instant::now() + bound;
    while !readiness.report().0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Completes on SIGINT or SIGTERM.
pub(super) async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("install SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
    tracing::info!("shutting down: finishing in-flight reconciles");
}

fn plugin_runtime() -> anyhow::Result<Runtime> {
    let cache_dir = gantry_sandbox::runtime::default_compile_cache_dir();
    Runtime::new(RuntimeSettings {
        cache_dir,
        ..RuntimeSettings::default()
    })
}

pub(super) fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::OTHER)
        }
    }
}

/// The configuration of `kubeconfig`, or the inferred one ($KUBECONFIG,
/// ~/.kube/config, in-cluster).
pub(super) async fn cluster_config(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let options = kube::config::KubeConfigOptions::default();
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None => kube::Config::infer().await?,
    })
}

/// A client from `kubeconfig`, or the inferred configuration.
pub(super) async fn cluster_client(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(cluster_config(kubeconfig).await?)?)
}

pub(super) fn run(args: &RunArgs) -> ExitCode {
    finish(tokio_runtime().and_then(|rt| {
        rt.block_on(async {
            let config = cluster_config(args.kubeconfig.as_deref()).await?;
            operate(
                &config,
                &args.operator,
                ["0.0.0.0:8081", "0.0.0.0:8080"],
                None,
            )
            .await
        })
    }))
}

/// Print one line when the operator is ready and the `expected` bindings
/// serve (remote ones, such as Guestbook's, load after readiness), naming
/// what is in service; after ten minutes, whatever serves by then.
async fn say_when_ready(
    readiness: Arc<gantry_operator::controller::Readiness>,
    expected: Vec<String>,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_mins(10);
    let (bindings, policies) = loop {
        let (bindings, policies) = readiness.in_service();
        let all_serve = expected.iter().all(|name| bindings.contains(name));
        if (readiness.report().0 && all_serve) || tokio::time::Instant::now() > deadline {
            break (bindings, policies);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "gantry dev: ready: bindings {} in service; admission policies {}",
        list_or_none(&bindings),
        list_or_none(&policies)
    );
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

/// Serve `router` on `addr` (unless "off") and print `label` and the URL
/// of `path` on the bound address.
async fn serve_endpoint(
    flag: &str,
    addr: &str,
    router: axum::Router,
    label: &str,
    path: &str,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    if addr == "off" {
        return Ok(None);
    }
    let addr = addr.parse().with_context(|| format!("{flag} {addr:?}"))?;
    let (bound, task) = gantry_operator::health::serve(addr, router).await?;
    println!("gantry: {label} at http://{bound}{path}");
    Ok(Some(task))
}

/// Run the operator with its health and metrics endpoints until
/// SIGINT/SIGTERM. `dev`, for `gantry dev`: the example bindings to name
/// in a ready line once they serve (and the webhooks are local).
pub(super) async fn operate(
    config: &kube::Config,
    args: &OperatorArgs,
    defaults: [&str; 2],
    dev: Option<Vec<String>>,
) -> anyhow::Result<()> {
    Shard::new(args.shard_index, args.shard_count).map_err(anyhow::Error::msg)?;
    let runtime = plugin_runtime()?;
    let metrics = Arc::new(Metrics::default());
    let client = gantry_kube::api_client::counting_writes(
        config,
        metrics.api_writes(),
        metrics.api_event_writes(),
    )?;
    let mut options = args.options();
    let [default_health, default_metrics] = defaults;
    let health = serve_endpoint(
        "--health-addr",
        args.health_addr.as_deref().unwrap_or(default_health),
        gantry_operator::health::health_router(runtime.clone(), options.readiness.clone()),
        "health probes",
        "/readyz",
    )
    .await?;
    let metrics_server = serve_endpoint(
        "--metrics-addr",
        args.metrics_addr.as_deref().unwrap_or(default_metrics),
        gantry_operator::health::metrics_router(metrics.clone()),
        "metrics",
        "/metrics",
    )
    .await?;
    let elector = args.leader_elect.then(|| {
        let identity =
            std::env::var("HOSTNAME").unwrap_or_else(|_| format!("gantry-{}", std::process::id()));
        LeaderElector::new(
            client.clone(),
            LeaseConfig {
                namespace: args.namespace.clone(),
                name: if args.shard_count > 1 {
                    format!("{}-shard-{}", args.lease_name, args.shard_index)
                } else {
                    args.lease_name.clone()
                },
                identity,
                lease_duration: Duration::from_secs(args.lease_duration_secs),
                retry_period: Duration::from_secs(args.lease_retry_secs.max(1)),
            },
        )
    });
    // A follower loads its bindings and warms its caches at once; it
    // reconciles from the moment the Lease is its own.
    let (leading_tx, leading_rx) = tokio::sync::watch::channel(false);
    options.leading = elector.as_ref().map(|_| leading_rx);
    // Leadership is held (renewed) until the operator has drained after
    // SIGTERM, so no other replica starts while reconciles finish.
    let readiness = options.readiness.clone();
    let leadership = async {
        match &elector {
            Some(elector) => {
                tracing::info!(lease = %elector.config().name, identity = %elector.config().identity, "standing by until this replica holds the Lease");
                ready_to_lead(&readiness, elector.config().lease_duration).await;
                elector.acquire().await;
                tracing::info!("became the leader");
                let _ = leading_tx.send(true);
                elector.hold().await;
            }
            None => std::future::pending().await,
        }
    };
    let (policies_stop, policies_stopped) = tokio::sync::oneshot::channel::<()>();
    let served = super::webhook::Served::default();
    metrics.register(|registry| {
        served.policies.metrics().register(registry);
        served.converters.metrics().register(registry);
    });
    // Webhooks have call slots of their own: reconciles that sleep to
    // their deadline on every slot never make a webhook wait.
    let certificate_served = super::webhook::start_webhooks(
        &client,
        &runtime.with_own_slots(),
        &args.namespace,
        options.plugin_sources.clone(),
        &args.webhook,
        dev.is_some(),
        &served,
        async move {
            let _ = policies_stopped.await;
        },
    )
    .await?;
    if let Some(served) = certificate_served {
        options.readiness.set_webhook_certificate(served);
    }
    options.policies = served.policies;
    options.readiness.set_policies(options.policies.clone());
    if let Some(expected) = dev {
        tokio::spawn(say_when_ready(options.readiness.clone(), expected));
    }
    let result = tokio::select! {
        result = run_operator(client, runtime, options, metrics, shutdown_signal()) => result,
        () = leadership => Err(anyhow::anyhow!(
            "lost the leader Lease; exiting so that a new replica takes over"
        )),
    };
    // The Lease goes as soon as in-flight reconciles have drained, so that
    // a standby takes over at once; the webhooks, which answered all along,
    // keep answering until the Service has dropped this Pod.
    if result.is_ok()
        && let Some(elector) = &elector
        && let Err(e) = elector.release().await
    {
        tracing::warn!(error = %e, "could not release the leader Lease");
    }
    tokio::time::sleep(args.webhook.drain()).await;
    let _ = policies_stop.send(());
    for task in [health, metrics_server].into_iter().flatten() {
        task.abort();
    }
    result
}
