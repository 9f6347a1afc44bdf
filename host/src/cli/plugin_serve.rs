//! `gantry plugin serve`: one plugin project in service on a fresh
//! embedded API server, for tests (an envtest): the API server in memory,
//! the project's CRDs installed, its binding applied (the component inline,
//! or from an in-process store when it is too large for a ConfigMap), and
//! the operator running. Once the binding serves, one JSON line on stdout
//! says where; the Go (`gantry.dev/go-sdk/gantrytest`) and Rust
//! (`gantry-envtest`) harnesses read it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use tokio::io::AsyncReadExt as _;

use super::{exit, fail, tokio_runtime};
use gantry_dev_tools::publish::{self, Answer, Publication, config_map, place};
use gantry_operator::controller::{Metrics, OperatorOptions, run_operator};
use gantry_operator::document::Document;

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// The plugin project: its binding.yaml and CRDs; built unless
    /// --plugin names the component.
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Serve this component (.wasm, or oci://…) instead of DIR's build.
    #[arg(long)]
    plugin: Option<PathBuf>,
    /// CRDs to install (default: the project's, derived from its types or
    /// its crd.yaml).
    #[arg(long)]
    crd: Vec<PathBuf>,
    /// Where to write the kubeconfig, as JSON (default: a temporary file,
    /// removed when the command ends).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Simulate workloads as `gantry dev` does: Pods of Deployments,
    /// StatefulSets and Jobs become Running and Ready on a simulated Node.
    #[arg(long)]
    simulate: bool,
    /// Stop when standard input reaches its end, as well as on SIGINT or
    /// SIGTERM: a test harness that holds the pipe takes the server down
    /// with it, however it ends.
    #[arg(long)]
    until_stdin_closes: bool,
    /// Seconds to wait for the binding to serve.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
}

/// Why the command stopped before serving, with its exit code (those of
/// `plugin apply`).
struct Stop {
    code: u8,
    error: anyhow::Error,
}

impl Stop {
    fn with(code: u8) -> impl FnOnce(anyhow::Error) -> Self {
        move |error| Self { code, error }
    }
}

/// `gantry plugin serve`.
pub(super) fn serve(args: &ServeArgs) -> ExitCode {
    let result = tokio_runtime()
        .map_err(Stop::with(exit::OTHER))
        .and_then(|rt| rt.block_on(serve_async(args)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(stop) => fail(stop.code, &stop.error),
    }
}

/// What is read and built before anything starts.
struct Project {
    document: Document,
    component: Vec<u8>,
    crds: Vec<serde_json::Value>,
}

fn project(args: &ServeArgs) -> Result<Project, Stop> {
    let path = args.path.join("binding.yaml");
    let document = Document::read(&path).map_err(Stop::with(exit::USAGE))?;
    if !matches!(document, Document::Binding { .. }) || document.has_source() {
        return Err(Stop::with(exit::USAGE)(anyhow::anyhow!(
            "{} must be a reconcile binding without a `source`: plugin serve binds the component it builds or is given",
            path.display()
        )));
    }
    let source = args.plugin.as_deref().unwrap_or(args.path.as_path());
    let (_, component) =
        super::component::component(source).map_err(Stop::with(exit::NOT_APPLIED))?;
    let crds = if args.crd.is_empty() {
        gantry_toolchain::crd::of_project(&args.path)
    } else {
        args.crd.iter().try_fold(Vec::new(), |mut all, path| {
            all.extend(gantry_toolchain::manifest::read_objects(path)?);
            anyhow::Ok(all)
        })
    }
    .map_err(Stop::with(exit::NOT_APPLIED))?;
    Ok(Project {
        document,
        component,
        crds,
    })
}

async fn serve_async(args: &ServeArgs) -> Result<(), Stop> {
    let started = Instant::now();
    let project = tokio::task::block_in_place(|| project(args))?;
    let failed = Stop::with(exit::NOT_APPLIED);
    let server = gantry_apiserver::ApiServer::start(gantry_apiserver::Config::default())
        .await
        .context("starting the embedded API server")
        .map_err(Stop::with(exit::OTHER))?;
    let temporary = tempfile::tempdir()
        .context("a temporary directory")
        .map_err(Stop::with(exit::OTHER))?;
    let kubeconfig = args
        .kubeconfig_out
        .clone()
        .unwrap_or_else(|| temporary.path().join("kubeconfig"));
    write_kubeconfig(&server, &kubeconfig).map_err(Stop::with(exit::OTHER))?;
    let simulation = args.simulate.then(|| {
        gantry_apiserver::simulate::Simulation::start(
            server.client(),
            gantry_apiserver::simulate::Settings::default(),
        )
    });
    let client = server.client();
    let options = OperatorOptions::default();
    let namespace = options.namespace.clone();
    gantry_dev_tools::dev::ensure_namespace(&client, &namespace)
        .await
        .map_err(Stop::with(exit::OTHER))?;
    let (stop_operator, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(run_operator(
        client.clone(),
        plugin_runtime().map_err(Stop::with(exit::OTHER))?,
        options,
        Arc::new(Metrics::default()),
        async move {
            let _ = stopped.await;
        },
    ));
    let name = project.document.name().to_string();
    let digest = gantry_sandbox::runtime::digest(&project.component);
    let answer = bind(&client, &namespace, project, args.timeout_secs)
        .await
        .map_err(failed)?;
    match answer {
        Answer::InService { .. } => {}
        Answer::Refused { reason, message } => {
            return Err(Stop::with(exit::LOAD)(anyhow::anyhow!(
                "binding {name} was refused by the operator: {reason}: {message}"
            )));
        }
        Answer::Silent => {
            return Err(Stop::with(exit::NO_ANSWER)(anyhow::anyhow!(
                "binding {name} did not serve within {}s",
                args.timeout_secs
            )));
        }
    }
    eprintln!(
        "gantry plugin serve: binding {name} serves sha256:{digest} on {} ({} ms); KUBECONFIG={}",
        server.url(),
        started.elapsed().as_millis(),
        kubeconfig.display()
    );
    println!(
        "{}",
        json!({
            "ready": true,
            "kubeconfig": kubeconfig,
            "server": server.url(),
            "namespace": namespace,
            "binding": name,
            "sha256": digest,
        })
    );
    until_stopped(args.until_stdin_closes).await;
    let _ = stop_operator.send(());
    if let Ok(Ok(Err(e))) = tokio::time::timeout(Duration::from_secs(10), operator).await {
        tracing::warn!(error = %e, "the operator stopped with an error");
    }
    if let Some(simulation) = simulation {
        simulation.stop().await;
    }
    server.shutdown().await;
    Ok(())
}

/// Components up to this size are tried inline (zstd-compressed) in the
/// binding's ConfigMap; a larger one would have to shrink more than
/// fourfold to fit, which a component does not.
const INLINE_MAX: usize = 4 * config_map::MAX_CONFIG_MAP_BYTES;

/// Apply the project's CRDs and binding, and wait for the operator's
/// answer.
async fn bind(
    client: &kube::Client,
    namespace: &str,
    project: Project,
    timeout_secs: u64,
) -> anyhow::Result<Answer> {
    let Project {
        mut document,
        component,
        crds,
    } = project;
    let digest = gantry_sandbox::runtime::digest(&component);
    // A large component goes to the store without compressing its
    // megabytes first (seconds, for a Go one).
    let inline = if component.len() <= INLINE_MAX {
        match config_map::for_document(&document, namespace, Some(&component)) {
            Ok(cm) => Some(cm),
            Err(e) if e.is::<config_map::TooLarge>() => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let config_map = if let Some(cm) = inline {
        cm
    } else {
        let store = place::Place::Store(gantry_dev_tools::dev::components::store()?);
        let published = place::publish(&store, document.name(), component).await?;
        document = Document::parse(&place::bind(document.text(), &published)?)?;
        config_map::for_document(&document, namespace, None)?
    };
    let publication = Publication {
        document,
        config_map,
        digest: Some(digest),
        crds,
    };
    let (seen, applied) = publish::apply(client, namespace, &publication).await?;
    publish::answer::wait(
        client,
        &seen,
        &publication.document,
        &applied,
        publication.digest.as_deref(),
        Duration::from_secs(timeout_secs),
    )
    .await
}

/// The server's kubeconfig at `path`, as JSON (a kubeconfig all the
/// same, which a harness reads without a YAML parser), mode 0600.
fn write_kubeconfig(
    server: &gantry_apiserver::ApiServerHandle,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let config: serde_json::Value = serde_yaml::from_str(&server.kubeconfig_yaml())?;
    gantry_apiserver::private_file::write(path, serde_json::to_string_pretty(&config)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn plugin_runtime() -> anyhow::Result<gantry_sandbox::runtime::Runtime> {
    gantry_sandbox::runtime::Runtime::new(gantry_sandbox::runtime::RuntimeSettings {
        cache_dir: gantry_sandbox::runtime::default_compile_cache_dir(),
        ..Default::default()
    })
}

/// Until SIGINT or SIGTERM, or (with `stdin`) the end of standard input.
async fn until_stopped(stdin: bool) {
    let closed = async {
        if !stdin {
            return std::future::pending().await;
        }
        let mut input = tokio::io::stdin();
        let mut buffer = [0_u8; 512];
        while matches!(input.read(&mut buffer).await, Ok(n) if n > 0) {}
    };
    tokio::select! {
        () = super::operator::shutdown_signal() => {}
        () = closed => {}
    }
}
