//! `gantry dev`: the embedded API server (or a cluster), the example CRDs,
//! bindings, policies and samples embedded in this binary, and the
//! operator; and `gantry apiserver`, the embedded API server alone.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;

use super::operator::{OperatorArgs, cluster_client, cluster_config, finish, operate};
use super::tokio_runtime;
use gantry_sandbox::runtime::user_cache_dir;

/// `gantry dev`'s arguments.
#[derive(Debug, Args)]
pub(super) struct DevArgs {
    /// Where the embedded API server keeps its data (default: the user's
    /// cache dir, gantry/dev).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address of the embedded API server.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// Do not create the sample Memcached, Database and Guestbook.
    #[arg(long)]
    no_samples: bool,
    /// Start over: the examples and samples go in again over your changes
    /// (and, on the embedded API server, everything else in it is deleted).
    /// Without it, a start after the first leaves what you changed or
    /// deleted as it is.
    #[arg(long)]
    reset: bool,
    /// Run against this existing cluster (kind, k3d, a real one) instead of
    /// the embedded API server. Its API server must reach the webhooks on
    /// this machine's loopback address, or set --webhook-url.
    #[arg(long, conflicts_with_all = ["data_dir", "listen"])]
    kubeconfig: Option<PathBuf>,
    /// Do not simulate workloads on the embedded API server. By default a
    /// simulated Node "runs" every Pod (no container starts): Deployments,
    /// ReplicaSets, StatefulSets, Jobs and each DaemonSet get their Pods and
    /// status as on a healthy cluster.
    #[arg(long, conflicts_with = "kubeconfig")]
    no_simulate: bool,
    /// Milliseconds a simulated Pod stays Pending before it is Running and
    /// Ready (and a Job's Pod runs before it succeeds).
    #[arg(long, default_value_t = 500, conflicts_with = "kubeconfig")]
    simulate_pod_ready_ms: u64,
    #[command(flatten)]
    operator: OperatorArgs,
}

/// `gantry dev`.
pub(super) fn run(args: DevArgs) -> ExitCode {
    finish(tokio_runtime().and_then(|rt| rt.block_on(dev_async(args))))
}

async fn dev_async(args: DevArgs) -> anyhow::Result<()> {
    let components = dev_components()?;
    println!(
        "gantry dev: stand-in backup service for the backup-job example at {}",
        gantry_dev_tools::dev::backup_service::origin()?
    );
    match &args.kubeconfig {
        Some(kubeconfig) => {
            let client = cluster_client(Some(kubeconfig)).await?;
            let version = client
                .apiserver_version()
                .await
                .with_context(|| format!("reaching the cluster of {}", kubeconfig.display()))?;
            let expected = install_dev(&client, &args, components).await?;
            println!(
                "gantry dev: cluster of {} (Kubernetes {})",
                kubeconfig.display(),
                version.git_version
            );
            println!("gantry dev: export KUBECONFIG={}", kubeconfig.display());
            print_try_line();
            let config = cluster_config(Some(kubeconfig)).await?;
            operate(&config, &args.operator, ["127.0.0.1:0"; 2], Some(expected)).await
        }
        None => Box::pin(dev_embedded(&args, components)).await,
    }
}

/// The components of the examples `gantry dev` installs, by name, as
/// embedded in this binary.
fn dev_components() -> anyhow::Result<Vec<(&'static str, Vec<u8>)>> {
    use gantry_dev_tools::examples;
    examples::EXAMPLES
        .iter()
        .chain(examples::POLICY_EXAMPLES)
        .chain(examples::CONVERTER_EXAMPLES)
        .map(|&name| Ok((name, examples::component(name)?.to_vec())))
        .collect()
}

/// `gantry dev` on the embedded API server, with data kept between runs
/// (the kubeconfig among them).
async fn dev_embedded(
    args: &DevArgs,
    components: Vec<(&'static str, Vec<u8>)>,
) -> anyhow::Result<()> {
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => user_cache_dir()
            .context("no cache directory: set HOME or XDG_CACHE_HOME, or pass --data-dir")?
            .join("dev"),
    };
    if args.reset {
        let store = data_dir.join(gantry_apiserver::storage::STORE_FILE);
        match std::fs::remove_file(&store) {
            Ok(()) => eprintln!("gantry dev: --reset: deleted {}", store.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("deleting {}", store.display())),
        }
    }
    let kubeconfig = data_dir.join("kubeconfig");
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
    // Only here, on the embedded server: on a real cluster kube's own
    // controllers and kubelets do this.
    let simulation = (!args.no_simulate).then(|| {
        gantry_apiserver::simulate::Simulation::start(
            server.client(),
            gantry_apiserver::simulate::Settings {
                pod_ready_after: Duration::from_millis(args.simulate_pod_ready_ms),
                ..Default::default()
            },
        )
    });
    let expected = install_dev(&client, args, components).await?;
    println!(
        "gantry dev: API server at {} (data in {})",
        server.url(),
        data_dir.display()
    );
    if simulation.is_some() {
        println!(
            "gantry dev: simulating workloads on node {}: Pods become Ready, no container runs (--no-simulate turns it off)",
            gantry_apiserver::simulate::NODE_NAME
        );
    }
    println!("gantry dev: export KUBECONFIG={}", kubeconfig.display());
    print_try_line();
    let operator_config = cluster_config(Some(&kubeconfig)).await?;
    let result = operate(
        &operator_config,
        &args.operator,
        ["127.0.0.1:0"; 2],
        Some(expected),
    )
    .await;
    if let Some(simulation) = simulation {
        simulation.stop().await;
    }
    server.shutdown().await;
    result
}

/// Install what `gantry dev` runs: the example CRDs and bindings, the
/// example policies and, unless `--no-samples`, the sample parents. After
/// the first start, what the user changed or deleted stays so (unless
/// `--reset`); each such object is named. The example bindings that are
/// there to be served.
async fn install_dev(
    client: &kube::Client,
    args: &DevArgs,
    components: Vec<(&'static str, Vec<u8>)>,
) -> anyhow::Result<Vec<String>> {
    use gantry_dev_tools::dev::converters::{
        CONVERTER_EXAMPLES, install_converted_samples_with, install_converter_example_with,
    };
    use gantry_dev_tools::dev::{Installer, install_example_with, install_policy_example_with};
    gantry_dev_tools::dev::forget_webhook_configurations(
        client,
        args.operator.webhook_configuration_name(),
    )
    .await?;
    let options = args.operator.options();
    let mut installer = Installer::for_cluster(client, &options.namespace, args.reset).await?;
    gantry_dev_tools::dev::ensure_namespace(client, &options.namespace).await?;
    let store = gantry_dev_tools::dev::components::store()?;
    gantry_dev_tools::publish::place::advertise_store(client, &options.namespace, &store).await?;
    println!(
        "gantry dev: plugin store at {store}: `gantry plugin apply` publishes components too large for a ConfigMap there"
    );
    installer
        .apply(&gantry_dev_tools::dev::backup_service::token_secret(
            &options.namespace,
        ))
        .await?;
    let mut expected = Vec::new();
    for (name, component) in &components {
        if gantry_dev_tools::dev::POLICY_EXAMPLES.contains(name) {
            install_policy_example_with(&mut installer, name, component).await?;
        } else if CONVERTER_EXAMPLES.contains(name) {
            install_converter_example_with(&mut installer, name, component).await?;
        } else if install_example_with(&mut installer, name, component.clone()).await?
            != gantry_dev_tools::dev::Outcome::KeptDeleted
        {
            expected.push((*name).to_string());
        }
    }
    if !args.no_samples {
        for example in gantry_dev_tools::dev::EXAMPLES {
            gantry_dev_tools::dev::install_samples_with(&mut installer, example).await?;
        }
        for (name, component) in &components {
            if CONVERTER_EXAMPLES.contains(name) {
                install_converted_samples_with(&mut installer, name, component).await?;
            }
        }
    }
    for line in installer.finish().await? {
        println!("gantry dev: {line}");
    }
    Ok(expected)
}

fn print_try_line() {
    println!(
        "gantry dev: try `kubectl get memcacheds,databases,guestbooks,backupjobs,myresources,deployments,statefulsets -A`; Ctrl-C stops"
    );
}

/// `gantry apiserver`.
pub(super) fn apiserver(args: gantry_apiserver::ApiServerArgs) -> ExitCode {
    finish(tokio_runtime().and_then(|rt| rt.block_on(gantry_apiserver::run(args))))
}
