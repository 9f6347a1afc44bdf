//! Put a plugin into service on a cluster, as `gantry plugin apply` does:
//! the binding (or policy) ConfigMap made from a document and a component,
//! the plugin's CRDs installed first, everything server-side applied, and
//! the operator's answer awaited.
//!
//! Read top-down: [`document`] (which kind of binding, and its name) →
//! [`config_map`] (the ConfigMap, within the size a ConfigMap holds) →
//! [`answer`] (the operator's Event or annotation for this version).

pub mod answer;
pub mod config_map;
pub mod place;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use gantry_operator::document::Document;

pub use answer::Answer;

/// Field manager of what `gantry plugin apply` writes.
pub const APPLY_MANAGER: &str = "gantry-plugin-apply";

/// What goes into a cluster: CRDs, then the binding ConfigMap.
pub struct Publication {
    /// The binding or policy document.
    pub document: Document,
    /// The ConfigMap holding it (and the component, unless it has a source).
    pub config_map: ConfigMap,
    /// The digest the operator should put into service (`None`: fetched by
    /// the operator from the document's unpinned source).
    pub digest: Option<String>,
    /// CustomResourceDefinitions the plugin ships.
    pub crds: Vec<Value>,
}

/// Apply `publication` into `namespace`: its CRDs (waiting until each is
/// served), then its ConfigMap. What was there before, so that
/// [`answer::wait`] sees only the operator's answer to this apply, and the
/// ConfigMap as applied.
pub async fn apply(
    client: &Client,
    namespace: &str,
    publication: &Publication,
) -> anyhow::Result<(answer::Seen, ConfigMap)> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(namespace).await?.is_none() {
        anyhow::bail!(
            "namespace {namespace} does not exist: is Gantry installed there? (--namespace names the operator's namespace)"
        );
    }
    for crd in &publication.crds {
        apply_forced(client, crd).await?;
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("a CRD has no metadata.name")?;
        crate::cluster::wait_for_crd(client, name).await?;
        eprintln!("gantry: CRD {name} is served");
    }
    let cm_name = publication
        .config_map
        .metadata
        .name
        .clone()
        .context("the ConfigMap has no name")?;
    let seen = answer::Seen::now(client, namespace, &cm_name).await?;
    let object = config_map::as_object(&publication.config_map)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    drop_stale_components(&api, &cm_name, &object).await?;
    let applied = api
        .patch(
            &cm_name,
            &PatchParams::apply(APPLY_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("applying ConfigMap {namespace}/{cm_name}"))?;
    Ok((seen, applied))
}

/// Server-side apply leaves what other managers set: an inline component
/// that `gantry dev` or kubectl put in the ConfigMap would stay beside a
/// new `source`, and the operator refuses a binding with both. So a
/// component the ConfigMap holds and `object` does not is removed in the
/// same write that brings `object`'s values (a merge patch; the apply that
/// follows then changes nothing but field ownership).
async fn drop_stale_components(
    api: &Api<ConfigMap>,
    name: &str,
    object: &Value,
) -> anyhow::Result<()> {
    let Some(live) = api.get_opt(name).await? else {
        return Ok(());
    };
    let ours = object.get("binaryData").and_then(Value::as_object);
    let stale: Vec<String> = live
        .binary_data
        .unwrap_or_default()
        .into_keys()
        .filter(|key| !ours.is_some_and(|ours| ours.contains_key(key)))
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let mut patch = object.clone();
    for key in stale {
        patch["binaryData"][key] = Value::Null;
    }
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("removing the inline component of ConfigMap {name}"))?;
    Ok(())
}

/// Server-side apply `object` as [`APPLY_MANAGER`], over other managers'
/// values: `plugin apply` is the user saying what the object is.
async fn apply_forced(client: &Client, object: &Value) -> anyhow::Result<()> {
    let mut params = PatchParams::apply(APPLY_MANAGER);
    params.force = true;
    crate::cluster::apply_object_as(client, object, &params).await?;
    Ok(())
}
