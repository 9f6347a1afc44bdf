//! Where `gantry plugin apply` publishes a component too large for a
//! ConfigMap, so that the operator can fetch it: gantry dev's plugin store
//! (HTTP on loopback, beside the operator it runs), or an OCI registry the
//! user names once with `--registry`.
//!
//! Both are remembered in the cluster, in the ConfigMap [`PUBLISHING`] of
//! the operator's namespace: `gantry dev` writes its store's address there
//! when it starts, `plugin apply --registry` the registry. A later apply to
//! the same cluster finds them without being told again. The component is
//! then bound by `source` and a `sha256` pin written into the ConfigMap's
//! copy of the document; the project's file is left as it is.

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::APPLY_MANAGER;
use gantry_operator::delivery::source::{FetchSettings, PluginSource, SourceSpec};

/// The ConfigMap, in the operator's namespace, naming where components are
/// published.
pub const PUBLISHING: &str = "gantry-plugin-publishing";
/// Its key for gantry dev's store (`http://127.0.0.1:PORT`).
pub const STORE_KEY: &str = "store";
/// Its key for the registry (`oci://host/repository`).
pub const REGISTRY_KEY: &str = "registry";
/// Field manager of what `gantry dev` writes there.
const DEV_MANAGER: &str = "gantry-dev";

/// A place the cluster's operator fetches components from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// gantry dev's store: `PUT` and `GET` `<base>/sha256/<hex>`.
    Store(String),
    /// An OCI registry and repository prefix (`host[:port]/path`, without
    /// `oci://`); each binding gets a repository under it.
    Registry {
        /// `host[:port]/path`.
        prefix: String,
        /// Plain HTTP to a registry that is not on loopback.
        insecure: bool,
    },
}

/// Where a component went: the document's `sha256` and `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The component's sha256 (hex).
    pub sha256: String,
    /// Its source, as `binding.yaml` writes it.
    pub source: SourceSpec,
}

/// Remember `value` under `key` in [`PUBLISHING`] of `namespace`, as
/// `manager`.
async fn remember(
    client: &Client,
    namespace: &str,
    key: &str,
    value: &str,
    manager: &str,
) -> anyhow::Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": PUBLISHING, "namespace": namespace},
        "data": {key: value},
    });
    api.patch(
        PUBLISHING,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&object),
    )
    .await
    .with_context(|| format!("writing ConfigMap {namespace}/{PUBLISHING}"))?;
    Ok(())
}

/// Say that gantry dev's store for the operator of `namespace` is at
/// `base` (`http://127.0.0.1:PORT`).
pub async fn advertise_store(client: &Client, namespace: &str, base: &str) -> anyhow::Result<()> {
    remember(client, namespace, STORE_KEY, base, DEV_MANAGER).await
}

/// The place to publish to: `registry` if given (and remembered for later
/// applies), else the registry remembered, else gantry dev's store; `None`
/// when the cluster has neither.
pub async fn find(
    client: &Client,
    namespace: &str,
    registry: Option<&str>,
    insecure: bool,
) -> anyhow::Result<Option<Place>> {
    if let Some(registry) = registry {
        let place = registry_place(registry, insecure)?;
        let remembered = match &place {
            Place::Registry { prefix, insecure } if *insecure => {
                format!("oci://{prefix}?insecure")
            }
            Place::Registry { prefix, .. } => format!("oci://{prefix}"),
            Place::Store(_) => unreachable!("a registry is not a store"),
        };
        remember(client, namespace, REGISTRY_KEY, &remembered, APPLY_MANAGER).await?;
        return Ok(Some(place));
    }
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let data = api
        .get_opt(PUBLISHING)
        .await
        .with_context(|| format!("reading ConfigMap {namespace}/{PUBLISHING}"))?
        .and_then(|cm| cm.data)
        .unwrap_or_default();
    if let Some(registry) = data.get(REGISTRY_KEY) {
        let (registry, insecure) = registry
            .strip_suffix("?insecure")
            .map_or((registry.as_str(), false), |r| (r, true));
        return registry_place(registry, insecure).map(Some);
    }
    Ok(data.get(STORE_KEY).map(|base| Place::Store(base.clone())))
}

/// `registry` (`oci://host[:port]/path` or without `oci://`) as a place.
fn registry_place(registry: &str, insecure: bool) -> anyhow::Result<Place> {
    let prefix = registry
        .strip_prefix("oci://")
        .unwrap_or(registry)
        .trim_end_matches('/');
    // Checked as the operator will check the sources made from it.
    let probe = SourceSpec {
        url: None,
        oci: Some(format!("oci://{prefix}/probe:tag")),
        insecure,
    };
    match probe.check(true) {
        Ok(PluginSource::Oci { insecure, .. }) => Ok(Place::Registry {
            prefix: prefix.to_string(),
            insecure,
        }),
        Ok(PluginSource::Url { .. }) => unreachable!("an oci source checks as one"),
        Err((_, message)) => anyhow::bail!("--registry {registry}: {message}"),
    }
}

/// Publish `component` of binding `name` at `place`.
pub async fn publish(place: &Place, name: &str, component: Vec<u8>) -> anyhow::Result<Published> {
    let sha256 = gantry_sandbox::runtime::digest(&component);
    match place {
        Place::Store(base) => {
            let url = format!("{}/sha256/{sha256}", base.trim_end_matches('/'));
            let response = reqwest::Client::new()
                .put(&url)
                .body(component)
                .send()
                .await
                .with_context(|| {
                    format!(
                        "uploading to gantry dev's plugin store at {base}: is gantry dev running?"
                    )
                })?;
            anyhow::ensure!(
                response.status().is_success(),
                "gantry dev's plugin store at {base} refused the component: {}",
                response.status()
            );
            Ok(Published {
                sha256,
                source: SourceSpec {
                    url: Some(url),
                    oci: None,
                    insecure: false,
                },
            })
        }
        Place::Registry { prefix, insecure } => {
            let reference = format!("{prefix}/{name}:sha256-{sha256}");
            let pushed = gantry_operator::delivery::source::oci::push(
                component,
                &reference,
                *insecure,
                &FetchSettings::default(),
            )
            .await
            .with_context(|| format!("pushing to oci://{reference}"))?;
            Ok(Published {
                sha256,
                source: SourceSpec {
                    url: None,
                    oci: Some(pushed.reference),
                    insecure: *insecure,
                },
            })
        }
    }
}

/// `text` (a binding, policy or converter document) with `published`'s
/// `sha256` and `source` set, over any it had.
pub fn bind(text: &str, published: &Published) -> anyhow::Result<String> {
    let mut document: serde_yaml::Mapping =
        serde_yaml::from_str(text).context("the document is not a YAML mapping")?;
    document.insert("sha256".into(), published.sha256.clone().into());
    let mut source = serde_yaml::Mapping::new();
    let SourceSpec { url, oci, insecure } = &published.source;
    for (key, value) in [("url", url), ("oci", oci)] {
        if let Some(value) = value {
            source.insert(key.into(), value.clone().into());
        }
    }
    if *insecure {
        source.insert("insecure".into(), true.into());
    }
    document.insert("source".into(), source.into());
    Ok(serde_yaml::to_string(&document)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_is_checked_as_the_operator_checks_sources() {
        assert_eq!(
            registry_place("oci://127.0.0.1:5000/plugins/", false).unwrap(),
            Place::Registry {
                prefix: "127.0.0.1:5000/plugins".into(),
                insecure: true
            }
        );
        assert_eq!(
            registry_place("ghcr.io/me", false).unwrap(),
            Place::Registry {
                prefix: "ghcr.io/me".into(),
                insecure: false
            }
        );
        assert!(registry_place("oci://", false).is_err());
    }

    #[test]
    fn the_document_gets_the_pin_and_source_and_keeps_the_rest() {
        let text = "name: web\n# a comment\nparent: {apiVersion: example.com/v1, kind: WebApp}\nsha256: old\n";
        let published = Published {
            sha256: "a".repeat(64),
            source: SourceSpec {
                url: Some("http://127.0.0.1:1/sha256/aa".into()),
                oci: None,
                insecure: false,
            },
        };
        let bound = bind(text, &published).unwrap();
        let value: serde_yaml::Value = serde_yaml::from_str(&bound).unwrap();
        assert_eq!(value["name"], "web");
        assert_eq!(value["parent"]["kind"], "WebApp");
        assert_eq!(value["sha256"], "a".repeat(64).as_str());
        assert_eq!(value["source"]["url"], "http://127.0.0.1:1/sha256/aa");
        let document = super::super::Document::parse(&bound).unwrap();
        assert!(document.has_source());
    }
}
