//! `gantry dev` and the helpers it shares with the tests: install CRDs,
//! example bindings and sample objects into a cluster (usually the
//! embedded API server).

pub mod backup_service;
pub mod components;
pub mod converters;
pub mod install;
pub mod loopback;

use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::Scope;
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::controller::spec::{BINDING_KEY, BINDING_LABEL};
use crate::publish::config_map;
use crate::toolchain;
pub use install::{ApplyError, Installer, Outcome};

/// Field manager of what `gantry dev` installs.
pub const DEV_MANAGER: &str = "gantry-dev";

/// The example plugins `gantry dev` installs, by directory under `plugins/`:
/// Rust crates, and Guestbook in Go.
pub const EXAMPLES: &[&str] = &["memcached", "database", "guestbook", BACKUP_JOB];

/// The example whose binding is pointed at [`backup_service`]'s stand-in.
const BACKUP_JOB: &str = "backup-job";

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
    for object in crate::manifest::read_objects(path)? {
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

/// A binding ConfigMap named `name` with `binding_yaml` and the component
/// (zstd-compressed when `compress`).
pub fn binding_config_map(
    name: &str,
    namespace: &str,
    binding_yaml: &str,
    component: &[u8],
    compress: bool,
) -> anyhow::Result<ConfigMap> {
    let mut cm =
        config_map::with_component(name, namespace, BINDING_LABEL, Some(component), compress)?;
    cm.data = Some([(BINDING_KEY.to_string(), binding_yaml.to_string())].into());
    Ok(cm)
}

/// Apply a binding ConfigMap.
pub async fn apply_binding(client: &Client, cm: &ConfigMap) -> anyhow::Result<()> {
    let namespace = cm.metadata.namespace.as_deref().unwrap_or("default");
    let name = cm
        .metadata
        .name
        .as_deref()
        .context("binding ConfigMap has no name")?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let object = config_map::as_object(cm)?;
    api.patch(
        name,
        &PatchParams::apply(DEV_MANAGER).force(),
        &Patch::Apply(&object),
    )
    .await?;
    Ok(())
}

/// The directory of example `name` in this source tree.
pub fn example_dir(name: &str) -> PathBuf {
    toolchain::source_workspace_root()
        .join("plugins")
        .join(name)
}

/// How the Rust crate of an example is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RustBuild {
    /// With every example of the workspace, once per process (tests).
    WithAll,
    /// Alone (`gantry dev`, which installs a few).
    Alone,
}

/// The component of example `name`: its Rust crate, or its Go module
/// (Guestbook). Blocks while it builds.
pub fn build_example(name: &str, rust: RustBuild) -> anyhow::Result<Vec<u8>> {
    let dir = example_dir(name);
    if toolchain::go::is_go_plugin(&dir) {
        let built = toolchain::go::build_plugin(&dir)?;
        std::fs::read(&built).with_context(|| format!("reading {}", built.display()))
    } else if rust == RustBuild::Alone {
        toolchain::rust::example_plugin_alone(name)
    } else {
        toolchain::example_plugin(name)
    }
}

/// Install example `name` into a cluster nobody edits (tests): see
/// [`install_example_with`].
pub async fn install_example(client: &Client, name: &str, namespace: &str) -> anyhow::Result<()> {
    let example = name.to_string();
    let component =
        tokio::task::spawn_blocking(move || build_example(&example, RustBuild::WithAll))
            .await
            .context("building an example")??;
    install_example_with(&mut Installer::forced(client, namespace), name, component).await?;
    Ok(())
}

/// Install example `name`: its CRD (waiting until it is served) and its
/// binding with its `component`: a Rust plugin inline (zstd-compressed), a
/// Go plugin (too large for a ConfigMap) served by [`components`] and bound
/// by URL. What became of the binding.
pub async fn install_example_with(
    installer: &mut Installer,
    name: &str,
    component: Vec<u8>,
) -> anyhow::Result<Outcome> {
    let client = installer.client().clone();
    let dir = example_dir(name);
    for crd in crate::manifest::read_objects(&dir.join("crd.yaml"))? {
        if installer.apply(&crd).await? == Outcome::KeptDeleted {
            continue;
        }
        let crd_name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        wait_for_crd(&client, crd_name).await?;
    }
    let mut binding_yaml = std::fs::read_to_string(dir.join("binding.yaml"))
        .with_context(|| format!("reading {name}/binding.yaml"))?;
    if name == BACKUP_JOB {
        binding_yaml = backup_service::point_binding_at_stand_in(&binding_yaml)?;
    }
    let namespace = installer.namespace().to_string();
    ensure_namespace(&client, &namespace).await?;
    let cm = if toolchain::go::is_go_plugin(&dir) {
        binding_yaml.push_str(&components::serve(component)?);
        let mut cm = binding_config_map(name, &namespace, &binding_yaml, &[], false)?;
        cm.binary_data = None;
        cm
    } else {
        binding_config_map(name, &namespace, &binding_yaml, &component, true)?
    };
    installer.apply(&config_map::as_object(&cm)?).await
}

/// Apply the sample objects of example `name` (its `example.yaml`).
pub async fn install_samples_with(installer: &mut Installer, name: &str) -> anyhow::Result<()> {
    for object in crate::manifest::read_objects(&example_dir(name).join("example.yaml"))? {
        installer.apply(&object).await?;
    }
    Ok(())
}

/// The example admission policies `gantry dev` installs, by directory
/// under `plugins/` (each has a `policy.yaml`).
pub const POLICY_EXAMPLES: &[&str] = &["disallow-privileged"];

/// A policy binding ConfigMap named `name` with `policy_yaml` and the
/// component (zstd-compressed when `compress`).
pub fn policy_config_map(
    name: &str,
    namespace: &str,
    policy_yaml: &str,
    component: &[u8],
    compress: bool,
) -> anyhow::Result<ConfigMap> {
    use crate::policy::spec::{POLICY_KEY, POLICY_LABEL};
    let mut cm =
        config_map::with_component(name, namespace, POLICY_LABEL, Some(component), compress)?;
    cm.data = Some([(POLICY_KEY.to_string(), policy_yaml.to_string())].into());
    Ok(cm)
}

/// Install the example policy `name`: its `policy.yaml` with its built
/// `component`.
pub async fn install_policy_example_with(
    installer: &mut Installer,
    name: &str,
    component: &[u8],
) -> anyhow::Result<()> {
    let policy_yaml = std::fs::read_to_string(example_dir(name).join("policy.yaml"))
        .with_context(|| format!("reading {name}/policy.yaml"))?;
    let namespace = installer.namespace().to_string();
    ensure_namespace(installer.client(), &namespace).await?;
    let cm = policy_config_map(name, &namespace, &policy_yaml, component, true)?;
    installer.apply(&config_map::as_object(&cm)?).await?;
    Ok(())
}

/// Delete the webhook configurations named `name` left by an earlier run:
/// they point at a server (port, CA) that is gone, and would fail every
/// matching request until the new server's sync replaces them.
pub async fn forget_webhook_configurations(client: &Client, name: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let params = kube::api::DeleteParams::default();
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    for result in [
        validating.delete(name, &params).await.map(|_| ()),
        mutating.delete(name, &params).await.map(|_| ()),
    ] {
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e).context("deleting stale webhook configurations"),
        }
    }
    Ok(())
}
