//! Talking to a cluster the way `gantry dev`, the benchmarks and `gantry
//! plugin apply` do: server-side apply of any object (its kind found by
//! discovery), waiting for a CRD to be served, making sure of a namespace.

use std::path::Path;

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::{Value, json};

/// Field manager of what `gantry dev` installs.
pub const DEV_MANAGER: &str = "gantry-dev";

/// Server-side apply `object` (any kind the server knows), over any
/// other manager's changes.
pub async fn apply_object(client: &Client, object: &Value) -> anyhow::Result<DynamicObject> {
    Ok(apply_object_with(client, object, true).await?)
}

/// Server-side apply `object`; without `force`, a field another manager
/// changed is an [`ApplyError::Conflict`].
pub async fn apply_object_with(
    client: &Client,
    object: &Value,
    force: bool,
) -> Result<DynamicObject, ApplyError> {
    let mut params = PatchParams::apply(DEV_MANAGER);
    params.force = force;
    apply_object_as(client, object, &params).await
}

/// Server-side apply `object` with `params` (field manager, force); a
/// conflict with another manager is an [`ApplyError::Conflict`].
pub async fn apply_object_as(
    client: &Client,
    object: &Value,
    params: &PatchParams,
) -> Result<DynamicObject, ApplyError> {
    let (api, name) = api_for(client, object).await.map_err(ApplyError::Other)?;
    match api.patch(&name, params, &Patch::Apply(object)).await {
        Ok(applied) => Ok(applied),
        Err(kube::Error::Api(e)) if e.code == 409 => Err(ApplyError::Conflict(e.message)),
        Err(e) => Err(ApplyError::Other(
            anyhow::Error::new(e).context(format!("applying {name}")),
        )),
    }
}

/// Whether `object` exists in the cluster.
pub async fn object_exists(client: &Client, object: &Value) -> anyhow::Result<bool> {
    let (api, name) = api_for(client, object).await?;
    Ok(api.get_opt(&name).await?.is_some())
}

/// The API of `object`'s kind (in its namespace, `default` when it names
/// none) and its name.
async fn api_for(client: &Client, object: &Value) -> anyhow::Result<(Api<DynamicObject>, String)> {
    let api_version = object["apiVersion"]
        .as_str()
        .context("object has no apiVersion")?;
    let kind = object["kind"].as_str().context("object has no kind")?;
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .context("object has no metadata.name")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (resource, caps) =
        kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
            .await
            .with_context(|| format!("{api_version} {kind} is not served"))?;
    let api = if caps.scope == Scope::Namespaced {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default");
        Api::namespaced_with(client.clone(), namespace, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    Ok((api, name.to_string()))
}

/// Apply every object in the YAML file at `path`.
pub async fn apply_file(client: &Client, path: &Path) -> anyhow::Result<()> {
    for object in gantry_toolchain::manifest::read_objects(path)? {
        apply_object(client, &object).await?;
    }
    Ok(())
}

/// Wait until the CRD named `name` is Established and every version it
/// serves (only the storage version, with a conversion webhook) is
/// served: discovery names the kind and a list answers. A real
/// API server starts serving a new kind a moment after it reports
/// Established, so objects of the kind applied at once can meet a 404.
pub async fn wait_for_crd(client: &Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let condition = kube::runtime::conditions::is_crd_established();
    let served = async {
        let crd = kube::runtime::wait::await_condition(api, name, condition)
            .await?
            .with_context(|| format!("CRD {name} was deleted"))?;
        let names = &crd.spec.names;
        // A list at a version other than the storage one goes through the
        // CRD's conversion webhook, which may not serve yet (`gantry dev`
        // starts its own after installing): then only the storage version
        // is waited for.
        let webhook = crd
            .spec
            .conversion
            .as_ref()
            .is_some_and(|c| c.strategy == "Webhook");
        let waited = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served && (v.storage || !webhook));
        for version in waited {
            let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &names.kind);
            while !kind_is_served(client, &gvk).await {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), served)
        .await
        .with_context(|| format!("CRD {name} not established and served within 30s"))?
}

/// Whether discovery resolves `gvk` and a list of it answers.
async fn kind_is_served(client: &Client, gvk: &GroupVersionKind) -> bool {
    let Ok((resource, _)) = kube::discovery::pinned_kind(client, gvk).await else {
        return false;
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    api.list_metadata(&kube::api::ListParams::default().limit(1))
        .await
        .is_ok()
}

/// Make sure `namespace` exists.
pub async fn ensure_namespace(client: &Client, namespace: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    api.patch(
        namespace,
        &PatchParams::apply(DEV_MANAGER),
        &Patch::Apply(&ns),
    )
    .await?;
    Ok(())
}

/// Why a server-side apply failed.
#[derive(Debug)]
pub enum ApplyError {
    /// Another field manager owns a field with another value.
    Conflict(String),
    /// Anything else.
    Other(anyhow::Error),
}

impl From<ApplyError> for anyhow::Error {
    /// A conflict is an error like any other where the caller forces.
    fn from(error: ApplyError) -> Self {
        match error {
            ApplyError::Conflict(message) => anyhow::anyhow!(message),
            ApplyError::Other(e) => e,
        }
    }
}
