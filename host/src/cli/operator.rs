//! `gantry run`, `gantry dev` and `gantry apiserver`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::exit;
use crate::controller::leader::{LeaderElector, LeaseConfig};
use crate::controller::shard::Shard;
use crate::controller::{Metrics, OperatorOptions, run_operator};
use crate::runtime::{Runtime, RuntimeSettings, user_cache_dir};

/// Operator flags shared by `run` and `dev`.
#[derive(Debug, Args)]
pub struct OperatorArgs {
    /// Namespace whose ConfigMaps labelled gantry.dev/plugin are the bindings.
    #[arg(long, env = "GANTRY_NAMESPACE", default_value = "gantry-system")]
    namespace: String,
    /// Reconciles running at once across all bindings.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Longest one reconcile may take, in seconds.
    #[arg(long, default_value_t = 60)]
    reconcile_timeout_secs: u64,
    /// Address of /livez, /readyz and /metrics, or "off" (default:
    /// 0.0.0.0:8080 for `run`, a free loopback port for `dev`).
    #[arg(long)]
    health_addr: Option<String>,
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
    /// Where plugins fetched from URLs and OCI registries are cached, by
    /// digest (default: the user's cache dir, gantry/plugins).
    #[arg(long, env = "GANTRY_PLUGIN_CACHE_DIR")]
    plugin_cache_dir: Option<PathBuf>,
}

impl OperatorArgs {
    fn options(&self) -> OperatorOptions {
        let shard = Shard::new(self.shard_index, self.shard_count).unwrap_or_default();
        OperatorOptions {
            shard,
            namespace: self.namespace.clone(),
            concurrency: self.concurrency,
            reconcile_timeout: Duration::from_secs(self.reconcile_timeout_secs),
            plugin_sources: crate::source::FetchSettings {
                cache_dir: self
                    .plugin_cache_dir
                    .clone()
                    .or(crate::source::FetchSettings::default().cache_dir),
                ..crate::source::FetchSettings::default()
            },
            ..OperatorOptions::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    operator: OperatorArgs,
}

#[derive(Debug, Args)]
pub struct DevArgs {
    /// Where the embedded API server keeps its data (default: the user's
    /// cache dir, gantry/dev).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address of the embedded API server.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Do not create the sample Memcached and Database.
    #[arg(long)]
    no_samples: bool,
    #[command(flatten)]
    operator: OperatorArgs,
}

fn tokio_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
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
    let cache_dir = user_cache_dir().map(|d| d.join("compiled"));
    Runtime::new(RuntimeSettings {
        cache_dir,
        ..RuntimeSettings::default()
    })
}

fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::OTHER)
        }
    }
}

pub fn run(args: RunArgs) -> ExitCode {
    finish(tokio_runtime().and_then(|rt| {
        rt.block_on(async {
            let config = match &args.kubeconfig {
                Some(path) => {
                    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
                    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
                }
                None => kube::Config::infer().await?,
            };
            let client = kube::Client::try_from(config)?;
            operate(client, &args.operator, "0.0.0.0:8080").await
        })
    }))
}

pub fn dev(args: DevArgs) -> ExitCode {
    finish(tokio_runtime().and_then(|rt| rt.block_on(dev_async(args))))
}

async fn dev_async(args: DevArgs) -> anyhow::Result<()> {
    let base = user_cache_dir()
        .context("no cache directory: set HOME or XDG_CACHE_HOME, or pass --data-dir")?
        .join("dev");
    let data_dir = args
        .data_dir
        .clone()
        .unwrap_or_else(|| base.join("apiserver"));
    let kubeconfig = data_dir.parent().unwrap_or(&base).join("kubeconfig");
    eprintln!("building the example plugins (first time: a few minutes)...");
    let plugins = tokio::task::spawn_blocking(crate::toolchain::example_plugins).await??;
    tracing::info!(dir = %plugins.display(), "example plugins built");

    let config = gantry_apiserver::Config {
        listen: args.listen,
        data_dir: Some(data_dir.clone()),
        ..Default::default()
    };
    let server = gantry_apiserver::ApiServer::start(config)
        .await
        .context("starting the embedded API server")?;
    server
        .write_kubeconfig(&kubeconfig)
        .context("writing the kubeconfig")?;
    let client = server.client();
    let options = args.operator.options();
    for example in crate::dev::EXAMPLES {
        crate::dev::install_example(&client, example, &options.namespace).await?;
    }
    if !args.no_samples {
        for example in crate::dev::EXAMPLES {
            crate::dev::apply_file(
                &client,
                &crate::dev::example_dir(example).join("example.yaml"),
            )
            .await?;
        }
    }
    println!(
        "gantry dev: API server at {} (data in {})",
        server.url(),
        data_dir.display()
    );
    println!("gantry dev: export KUBECONFIG={}", kubeconfig.display());
    println!(
        "gantry dev: try `kubectl get memcacheds,databases,deployments,statefulsets -A`; Ctrl-C stops"
    );
    let result = operate(client, &args.operator, "127.0.0.1:0").await;
    server.shutdown().await;
    result
}

/// Run the operator with its health endpoints until SIGINT/SIGTERM.
async fn operate(
    client: kube::Client,
    args: &OperatorArgs,
    default_health: &str,
) -> anyhow::Result<()> {
    Shard::new(args.shard_index, args.shard_count).map_err(anyhow::Error::msg)?;
    let runtime = plugin_runtime()?;
    let metrics = Arc::new(Metrics::default());
    let health_addr = args.health_addr.as_deref().unwrap_or(default_health);
    let health = if health_addr == "off" {
        None
    } else {
        let addr = health_addr
            .parse()
            .with_context(|| format!("--health-addr {health_addr:?}"))?;
        let (bound, task) = crate::health::serve(addr, metrics.clone(), runtime.clone()).await?;
        println!("gantry: health and metrics at http://{bound}/metrics");
        Some(task)
    };
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
    let mut options = args.options();
    options.leading = elector.as_ref().map(|_| leading_rx);
    let lost = std::sync::atomic::AtomicBool::new(false);
    let stop = async {
        match &elector {
            Some(elector) => {
                tracing::info!(lease = %elector.config().name, identity = %elector.config().identity, "standing by until this replica holds the Lease");
                tokio::select! {
                    () = shutdown_signal() => {}
                    () = async {
                        elector.acquire().await;
                        tracing::info!("became the leader");
                        let _ = leading_tx.send(true);
                        elector.hold().await;
                    } => lost.store(true, std::sync::atomic::Ordering::Relaxed),
                }
            }
            None => shutdown_signal().await,
        }
    };
    let result = run_operator(client, runtime, options, metrics, stop).await;
    if let Some(task) = health {
        task.abort();
    }
    if lost.load(std::sync::atomic::Ordering::Relaxed) {
        anyhow::bail!("lost the leader Lease; exiting so that a new replica takes over");
    }
    if let Some(elector) = &elector
        && let Err(e) = elector.release().await
    {
        tracing::warn!(error = %e, "could not release the leader Lease");
    }
    result
}

pub fn apiserver(args: gantry_apiserver::ApiServerArgs) -> ExitCode {
    finish(tokio_runtime().and_then(|rt| rt.block_on(gantry_apiserver::run(args))))
}
