//! `gantry dev` and the helpers it shares with the tests: install CRDs,
//! example bindings and sample objects into a cluster (usually the
//! embedded API server).

pub mod backup_service;
pub mod components;
pub mod converters;
pub(crate) mod install;
pub(crate) mod loopback;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

pub use crate::cluster::{
    ApplyError, DEV_MANAGER, apply_file, apply_object, apply_object_as, apply_object_with,
    ensure_namespace, object_exists, wait_for_crd,
};
use crate::examples::{self, BACKUP_JOB};
pub use crate::examples::{EXAMPLES, POLICY_EXAMPLES};
use crate::publish::config_map;
use gantry_operator::controller::spec::{BINDING_KEY, BINDING_LABEL};
pub use install::{Installer, Outcome};

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

/// The component of example `name` built from this source tree: its Rust
/// crate (with every example of the workspace, once per process), or its
/// Go module (Guestbook). Blocks while it builds. `gantry dev` uses the
/// components embedded in the binary instead ([`examples::component`]).
pub fn build_example(name: &str) -> anyhow::Result<Vec<u8>> {
    let dir = examples::source_dir(name);
    if gantry_toolchain::go::is_go_plugin(&dir) {
        let built = gantry_toolchain::go::build_plugin(&dir)?;
        std::fs::read(&built).with_context(|| format!("reading {}", built.display()))
    } else {
        gantry_toolchain::example_plugin(name)
    }
}

/// Install example `name` into a cluster nobody edits (tests): see
/// [`install_example_with`].
pub async fn install_example(client: &Client, name: &str, namespace: &str) -> anyhow::Result<()> {
    let example = name.to_string();
    let component = tokio::task::spawn_blocking(move || build_example(&example))
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
    for crd in examples::objects(name, "crd.yaml")? {
        if installer.apply(&crd).await? == Outcome::KeptDeleted {
            continue;
        }
        let crd_name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        wait_for_crd(&client, crd_name).await?;
    }
    let mut binding_yaml = examples::text(name, "binding.yaml")?.into_owned();
    if name == BACKUP_JOB {
        binding_yaml = backup_service::point_binding_at_stand_in(&binding_yaml)?;
    }
    let namespace = installer.namespace().to_string();
    ensure_namespace(&client, &namespace).await?;
    let cm = if examples::is_go(name) {
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
    for object in examples::objects(name, "example.yaml")? {
        installer.apply(&object).await?;
    }
    Ok(())
}

/// A policy binding ConfigMap named `name` with `policy_yaml` and the
/// component (zstd-compressed when `compress`).
pub fn policy_config_map(
    name: &str,
    namespace: &str,
    policy_yaml: &str,
    component: &[u8],
    compress: bool,
) -> anyhow::Result<ConfigMap> {
    use gantry_operator::policy::spec::{POLICY_KEY, POLICY_LABEL};
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
    let policy_yaml = examples::text(name, "policy.yaml")?;
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
