//! The example CRD converters of `gantry dev` (`plugins/*/converter.yaml`):
//! each one's CRD and converter binding, and its samples, written at the
//! CRD's storage version.
//!
//! A sample written at another version would need the converter to be
//! serving already, and `gantry dev` installs before its operator starts;
//! so the samples are converted here, by the same component, before they
//! are applied. Read back at any served version they go through the
//! operator's conversion webhook like any other object.

use anyhow::Context;
use serde_json::Value;

use super::{Installer, Outcome, ensure_namespace, wait_for_crd};
use crate::examples;
pub use crate::examples::CONVERTER_EXAMPLES;
use crate::publish::config_map;
use gantry_operator::document::Document;
use gantry_sandbox::runtime::{Limits, Runtime, RuntimeSettings, default_compile_cache_dir};

/// Install converter example `name`: its CRD, then its `converter.yaml`
/// with `component`.
pub async fn install_converter_example_with(
    installer: &mut Installer,
    name: &str,
    component: &[u8],
) -> anyhow::Result<Outcome> {
    for crd in examples::objects(name, "crd.yaml")? {
        if installer.apply(&crd).await? != Outcome::KeptDeleted {
            let crd_name = crd["metadata"]["name"].as_str().unwrap_or_default();
            wait_for_crd(installer.client(), crd_name).await?;
        }
    }
    let document = Document::parse(&examples::text(name, "converter.yaml")?)
        .with_context(|| format!("reading {name}/converter.yaml"))?;
    let namespace = installer.namespace().to_string();
    ensure_namespace(installer.client(), &namespace).await?;
    let cm = config_map::for_document(&document, &namespace, Some(component))?;
    installer.apply(&config_map::as_object(&cm)?).await
}

/// Apply the samples of converter example `name` (its `example.yaml`),
/// each converted by `component` to its CRD's storage version first.
pub async fn install_converted_samples_with(
    installer: &mut Installer,
    name: &str,
    component: &[u8],
) -> anyhow::Result<()> {
    let storage = storage_api_version(&examples::objects(name, "crd.yaml")?)
        .with_context(|| format!("{name}/crd.yaml has no storage version"))?;
    let samples = examples::objects(name, "example.yaml")?;
    let runtime = Runtime::new(RuntimeSettings {
        cache_dir: default_compile_cache_dir(),
        ..RuntimeSettings::default()
    })?;
    let plugin = runtime.load_converter(name, component)?;
    let converted =
        gantry_operator::conversion::convert_with(&plugin, Limits::default(), &samples, &storage)
            .await
            .with_context(|| format!("converting {name}'s samples to {storage}"))?;
    for object in &converted {
        installer.apply(object).await?;
    }
    Ok(())
}

/// `group/version` of the storage version of the (one) CRD in `crds`.
fn storage_api_version(crds: &[Value]) -> Option<String> {
    crds.iter().find_map(|crd| {
        let group = crd.pointer("/spec/group")?.as_str()?;
        let version = crd
            .pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|version| version["storage"] == true)?;
        Some(format!("{group}/{}", version["name"].as_str()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_storage_version_is_the_one_marked_so() {
        let crds = examples::objects("myresource-converter", "crd.yaml").unwrap();
        assert_eq!(
            storage_api_version(&crds).as_deref(),
            Some("example.com/v1")
        );
        assert_eq!(storage_api_version(&[]), None);
    }
}
