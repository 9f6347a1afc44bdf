//! `gantry plugin apply` and `gantry plugin crd`: from a plugin project to
//! a plugin in service on a cluster.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;

use super::{exit, fail, tokio_runtime};
use crate::publish::{self, Answer, Document, Publication};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plugin project directory (built first), or a built component
    /// (.wasm, with --binding).
    #[arg(default_value = ".")]
    path: PathBuf,
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
}

#[derive(Debug, Args)]
pub struct CrdArgs {
    /// The plugin project directory.
    #[arg(default_value = ".")]
    path: PathBuf,
}

/// `gantry plugin crd`: print the project's CRDs as YAML.
pub fn crd(args: &CrdArgs) -> ExitCode {
    match crate::toolchain::crd::of_project(&args.path) {
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

/// `gantry plugin apply`.
pub fn apply(args: &ApplyArgs) -> ExitCode {
    let publication = match publication(args) {
        Ok(publication) => publication,
        Err(e) => return fail(exit::OTHER, &e),
    };
    let answered = tokio_runtime().and_then(|rt| rt.block_on(apply_and_wait(args, &publication)));
    let document = &publication.document;
    let what = format!("{} {}", document.noun(), document.name());
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
            exit::OTHER,
            &format!(
                "{what} applied, but the operator said nothing within {}s: is gantry running with --namespace {}?",
                args.timeout_secs, args.namespace
            ),
        ),
        Err(e) => fail(exit::OTHER, &e),
    }
}

/// The document, component and CRDs `args` name, as one publication.
fn publication(args: &ApplyArgs) -> anyhow::Result<Publication> {
    let project = args.path.is_dir().then_some(args.path.as_path());
    let document_path = match (&args.binding, project) {
        (Some(path), _) => path.clone(),
        (None, Some(dir)) => ["binding.yaml", "policy.yaml", "converter.yaml"]
            .iter()
            .map(|name| dir.join(name))
            .find(|path| path.is_file())
            .with_context(|| {
                format!(
                    "{} has no binding.yaml, policy.yaml or converter.yaml",
                    dir.display()
                )
            })?,
        (None, None) => anyhow::bail!(
            "{} is a component: say what binds it with --binding",
            args.path.display()
        ),
    };
    let document = Document::read(&document_path)?;
    let component = if document.has_source() {
        None
    } else {
        let (_, bytes) = super::component::component(&args.path)?;
        Some(bytes)
    };
    let digest = component
        .as_deref()
        .map(crate::runtime::digest)
        .or_else(|| document.pinned_sha256().map(str::to_string));
    let crds = if args.crd.is_empty() {
        match (project, &document) {
            (Some(dir), Document::Binding { .. } | Document::Converter { .. }) => {
                crate::toolchain::crd::of_project(dir)?
            }
            _ => Vec::new(),
        }
    } else {
        read_crds(&args.crd)?
    };
    let config_map =
        publish::config_map::for_document(&document, &args.namespace, component.as_deref())?;
    Ok(Publication {
        document,
        config_map,
        digest,
        crds,
    })
}

fn read_crds(paths: &[PathBuf]) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut crds = Vec::new();
    for path in paths {
        crds.extend(crate::manifest::read_objects(Path::new(path))?);
    }
    Ok(crds)
}

/// Apply, then (unless `--no-wait`) wait for the operator's answer.
async fn apply_and_wait(
    args: &ApplyArgs,
    publication: &Publication,
) -> anyhow::Result<Option<Answer>> {
    let client = super::operator::cluster_client(args.kubeconfig.as_deref()).await?;
    let (seen, applied) = publish::apply(&client, &args.namespace, publication).await?;
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
    .await?;
    Ok(Some(answer))
}
