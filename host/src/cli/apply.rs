//! `gantry plugin apply` and `gantry plugin crd`: from a plugin project to
//! a plugin in service on a cluster.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::{exit, fail, tokio_runtime};
use gantry_dev_tools::publish::{self, Answer, Publication, config_map, place};
use gantry_operator::document::Document;

#[derive(Debug, Args)]
pub(super) struct ApplyArgs {
    /// A plugin project directory (built first; default: the current
    /// directory), or a built component (.wasm, with --binding).
    path: Option<PathBuf>,
    /// The binding, policy or converter document (default: the project's
    /// binding.yaml, policy.yaml or converter.yaml).
    #[arg(long)]
    binding: Option<PathBuf>,
    /// CRDs to install first (default: the project's, derived from its
    /// types or its crd.yaml).
    #[arg(long)]
    crd: Vec<PathBuf>,
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The operator's namespace, where its bindings are.
    #[arg(long, env = "GANTRY_NAMESPACE", default_value = "gantry-system")]
    namespace: String,
    /// Seconds to wait for the operator to put the version into service or
    /// refuse it.
    #[arg(long, default_value_t = 120)]
    timeout_secs: u64,
    /// Apply and return without waiting for the operator.
    #[arg(long)]
    no_wait: bool,
    /// An OCI registry the cluster pulls from (`oci://HOST[:PORT]/PATH`):
    /// components too large for a ConfigMap are pushed to PATH/NAME there.
    /// Remembered in the cluster for later applies.
    #[arg(long, value_name = "oci://HOST/PATH")]
    registry: Option<String>,
    /// Speak plain HTTP to a registry that is not on loopback.
    #[arg(long, requires = "registry")]
    registry_insecure: bool,
}

#[derive(Debug, Args)]
pub(super) struct CrdArgs {
    /// The plugin project directory.
    #[arg(default_value = ".")]
    path: PathBuf,
}

/// `gantry plugin crd`: print the project's CRDs as YAML.
pub(super) fn crd(args: &CrdArgs) -> ExitCode {
    match gantry_toolchain::crd::of_project(&args.path) {
        Ok(crds) if crds.is_empty() => fail(
            exit::OTHER,
            &format!(
                "{} ships no CRD: derive one from your types (a Rust project's src/bin/crd.rs, see `gantry plugin new --lang rust`) or write crd.yaml",
                args.path.display()
            ),
        ),
        Ok(crds) => {
            for crd in crds {
                match serde_yaml::to_string(&crd) {
                    Ok(yaml) => print!("---\n{yaml}"),
                    Err(e) => return fail(exit::OTHER, &e),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(exit::OTHER, &e),
    }
}

/// Why `plugin apply` stopped before the operator answered, with its exit
/// code.
struct Stop {
    code: u8,
    error: anyhow::Error,
}

impl Stop {
    /// What was given cannot be applied as it is.
    fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::USAGE,
            error: error.into(),
        }
    }

    /// Building, publishing or applying failed.
    fn failed(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: exit::NOT_APPLIED,
            error: error.into(),
        }
    }
}

/// `gantry plugin apply`.
pub(super) fn apply(args: &ApplyArgs) -> ExitCode {
    let prepared = match prepare(args) {
        Ok(prepared) => prepared,
        Err(stop) => return fail(stop.code, &stop.error),
    };
    let what = format!("{} {}", prepared.document.noun(), prepared.document.name());
    let answered = match tokio_runtime() {
        Ok(rt) => rt.block_on(publish_apply_and_wait(args, prepared)),
        Err(e) => Err(Stop::failed(e)),
    };
    match answered {
        Ok(None) => {
            println!("gantry: {what} applied to {}", args.namespace);
            ExitCode::SUCCESS
        }
        Ok(Some(Answer::InService { message, warnings })) => {
            println!("gantry: {what}: {message}");
            for warning in warnings {
                eprintln!("warning: {warning}");
            }
            ExitCode::SUCCESS
        }
        Ok(Some(Answer::Refused { reason, message })) => fail(
            exit::LOAD,
            &format!("{what} was refused by the operator: {reason}: {message}"),
        ),
        Ok(Some(Answer::Silent)) => fail(
            exit::NO_ANSWER,
            &format!(
                "{what} applied, but the operator said nothing within {}s: is gantry running with --namespace {}?",
                args.timeout_secs, args.namespace
            ),
        ),
        Err(stop) => fail(stop.code, &stop.error),
    }
}

/// What `plugin apply` read and built before it reaches the cluster.
struct Prepared {
    document: Document,
    /// The component to bind, unless the document's source is bound as it
    /// is.
    component: Option<Vec<u8>>,
    /// The digest that should serve (`None`: an unpinned source).
    digest: Option<String>,
    crds: Vec<serde_json::Value>,
}

/// Read the document, build the component and find the CRDs `args` name.
fn prepare(args: &ApplyArgs) -> Result<Prepared, Stop> {
    let path = args.path.as_deref().unwrap_or(Path::new("."));
    let project = path.is_dir().then_some(path);
    let document_path = match (&args.binding, project) {
        (Some(path), _) => path.clone(),
        (None, Some(dir)) => ["binding.yaml", "policy.yaml", "converter.yaml"]
            .iter()
            .map(|name| dir.join(name))
            .find(|path| path.is_file())
            .ok_or_else(|| {
                Stop::usage(anyhow::anyhow!(
                    "{} has no binding.yaml, policy.yaml or converter.yaml",
                    dir.display()
                ))
            })?,
        (None, None) => {
            return Err(Stop::usage(anyhow::anyhow!(
                "{} is a component: say what binds it with --binding",
                path.display()
            )));
        }
    };
    let document = Document::read(&document_path).map_err(Stop::usage)?;
    // A document with a source and nothing to build (`--binding` alone) is
    // applied as it is.
    let nothing_to_build = document.has_source() && args.binding.is_some() && args.path.is_none();
    let component = if nothing_to_build {
        None
    } else {
        let (_, bytes) = super::component::component(path).map_err(Stop::failed)?;
        if document.has_source() {
            bound_source(
                &document,
                &document_path,
                path,
                &gantry_sandbox::runtime::digest(&bytes),
            )?;
            None
        } else {
            Some(bytes)
        }
    };
    let digest = match &component {
        Some(bytes) => Some(gantry_sandbox::runtime::digest(bytes)),
        None => document.pinned_sha256().map(str::to_string),
    };
    let crds = if args.crd.is_empty() {
        match (project, &document) {
            (Some(dir), Document::Binding { .. } | Document::Converter { .. }) => {
                gantry_toolchain::crd::of_project(dir).map_err(Stop::failed)?
            }
            _ => Vec::new(),
        }
    } else {
        read_crds(&args.crd).map_err(Stop::usage)?
    };
    Ok(Prepared {
        document,
        component,
        digest,
        crds,
    })
}

/// Check a document that names its own source against what `path` builds
/// (`digest`): the build is what the user means to serve, and a pin of
/// another version would quietly leave the old one serving.
fn bound_source(
    document: &Document,
    document_path: &Path,
    path: &Path,
    digest: &str,
) -> Result<(), Stop> {
    match document.pinned_sha256() {
        Some(pin) if pin == digest => Ok(()),
        Some(pin) => Err(Stop::usage(anyhow::anyhow!(
            "{doc} binds sha256:{pin} from its `source`, but {path} is sha256:{digest}: \
             plugin apply does not publish over a source you manage. Remove `source` and `sha256` \
             from {doc}, and plugin apply publishes each build itself and pins it (inline, to \
             gantry dev's plugin store, or to the registry named once with --registry); or push \
             the build yourself (gantry plugin push) and pin what it prints",
            doc = document_path.display(),
            path = path.display(),
        ))),
        None => {
            eprintln!(
                "warning: {} names a `source` without `sha256`: the operator serves whatever it finds there, not necessarily what {} builds",
                document_path.display(),
                path.display()
            );
            Ok(())
        }
    }
}

/// The ConfigMap of `prepared`: the component inline when it fits, else
/// published where the operator can fetch it and bound by source and pin.
async fn config_map(
    args: &ApplyArgs,
    client: &kube::Client,
    prepared: &mut Prepared,
) -> Result<k8s_openapi::api::core::v1::ConfigMap, Stop> {
    let namespace = &args.namespace;
    let registry = args.registry.as_deref();
    if registry.is_some() {
        // Remembered for later applies to this cluster, also when this
        // component fits inline.
        place::find(client, namespace, registry, args.registry_insecure)
            .await
            .map_err(Stop::failed)?;
    }
    let component = prepared.component.as_deref();
    let too_large = match config_map::for_document(&prepared.document, namespace, component) {
        Ok(cm) => return Ok(cm),
        Err(e) => match e.downcast::<config_map::TooLarge>() {
            Ok(too_large) => too_large,
            Err(e) => return Err(Stop::failed(e)),
        },
    };
    let Some(place) = place::find(client, namespace, registry, args.registry_insecure)
        .await
        .map_err(Stop::failed)?
    else {
        return Err(Stop::failed(anyhow::anyhow!(
            "{too_large}, and this cluster has nowhere to publish it: under `gantry dev` plugin apply \
             publishes to its plugin store; for another cluster, name an OCI registry it can pull \
             from once, with --registry oci://HOST/PATH (remembered in {namespace}/{})",
            place::PUBLISHING
        )));
    };
    let component = prepared
        .component
        .take()
        .expect("only a component is too large");
    let name = prepared.document.name().to_string();
    let published = place::publish(&place, &name, component)
        .await
        .map_err(Stop::failed)?;
    let source = published
        .source
        .oci
        .as_ref()
        .or(published.source.url.as_ref());
    eprintln!(
        "gantry: {too_large}: published sha256:{} to {}",
        published.sha256,
        source.map_or("", String::as_str)
    );
    let text = place::bind(prepared.document.text(), &published).map_err(Stop::failed)?;
    prepared.document = Document::parse(&text).map_err(Stop::failed)?;
    config_map::for_document(&prepared.document, namespace, None).map_err(Stop::failed)
}

fn read_crds(paths: &[PathBuf]) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut crds = Vec::new();
    for path in paths {
        crds.extend(gantry_toolchain::manifest::read_objects(Path::new(path))?);
    }
    Ok(crds)
}

/// Publish if need be, apply, then (unless `--no-wait`) wait for the
/// operator's answer.
async fn publish_apply_and_wait(
    args: &ApplyArgs,
    mut prepared: Prepared,
) -> Result<Option<Answer>, Stop> {
    let client = super::operator::cluster_client(args.kubeconfig.as_deref())
        .await
        .map_err(Stop::failed)?;
    let config_map = config_map(args, &client, &mut prepared).await?;
    let publication = Publication {
        document: prepared.document,
        config_map,
        digest: prepared.digest,
        crds: prepared.crds,
    };
    let (seen, applied) = publish::apply(&client, &args.namespace, &publication)
        .await
        .map_err(Stop::failed)?;
    if args.no_wait {
        return Ok(None);
    }
    eprintln!(
        "gantry: {} {} applied; waiting for the operator...",
        publication.document.noun(),
        publication.document.name()
    );
    let answer = publish::answer::wait(
        &client,
        &seen,
        &publication.document,
        &applied,
        publication.digest.as_deref(),
        Duration::from_secs(args.timeout_secs),
    )
    .await
    .map_err(Stop::failed)?;
    Ok(Some(answer))
}
