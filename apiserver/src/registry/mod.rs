//! The resource table: which group/version/resource paths exist, their kind, scope,
//! subresources and discovery metadata. Built-ins come from k8s-openapi's metadata
//! ([`builtin`]); custom resources are added and removed as CRDs change.

pub mod builtin;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

/// Paths of `.spec.replicas`-like fields used by the `scale` subresource.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalePaths {
    /// JSON path of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas: String,
    /// JSON path of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// JSON path of the label selector string, if any.
    pub label_selector: Option<String>,
}

/// Custom-resource specifics of one served version.
#[derive(Clone, Debug)]
pub struct CrdVersion {
    /// The structural schema of this version (None when the CRD has none).
    pub schema: Option<Arc<gantry_schema::StructuralSchema>>,
    /// The raw openAPIV3Schema (for `gantry_merge::Schema::from_openapi`).
    pub raw_schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<Value>,
    /// The CRD's name (`plural.group`).
    pub crd_name: String,
    /// The conversion webhook (None: strategy `None`).
    pub conversion: Option<Arc<crate::conversion::Webhook>>,
}

/// Converts a JSON object through a built-in's typed representation. Returns the
/// normalized object, or a decode error message.
pub type RoundTrip = fn(&Value) -> Result<Value, String>;

/// One servable resource (a group/version/plural).
#[derive(Clone, Debug)]
pub struct ResourceInfo {
    /// API group ("" for core).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// Plural resource name (URL segment).
    pub plural: String,
    /// Lower-case singular name.
    pub singular: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names for discovery.
    pub short_names: Vec<String>,
    /// Categories (e.g. `all`).
    pub categories: Vec<String>,
    /// Whether a `status` subresource exists.
    pub has_status: bool,
    /// The `scale` subresource, if any.
    pub scale: Option<ScalePaths>,
    /// Typed round trip for built-ins (None for custom resources).
    pub roundtrip: Option<RoundTrip>,
    /// Custom-resource data (None for built-ins).
    pub crd: Option<CrdVersion>,
    /// The version objects are stored in (all versions share one storage).
    pub storage_version: String,
    /// The API group whose storage holds these objects (differs from `group` only for
    /// events.k8s.io Events, stored as core/v1 Events as kube does).
    pub storage_group: String,
    /// Whether this version is the group's preferred version.
    pub preferred: bool,
}

impl ResourceInfo {
    /// `group/version` or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key prefix of all objects of this resource.
    pub fn prefix(&self) -> String {
        format!("{}/{}/", self.storage_group, self.plural)
    }

    /// Storage key prefix of this resource in one namespace (or all, for None).
    pub fn ns_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => {
                format!("{}/{}/{}/", self.storage_group, self.plural, ns)
            }
            _ => self.prefix(),
        }
    }

    /// Storage key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        let ns = if self.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        format!("{}/{}/{}/{}", self.storage_group, self.plural, ns, name)
    }

    /// Whether this is a custom resource.
    pub fn is_custom(&self) -> bool {
        self.crd.is_some()
    }
}

/// The live resource table.
#[derive(Default)]
pub struct Registry {
    inner: RwLock<Table>,
}

#[derive(Default, Clone)]
struct Table {
    /// (group, version, plural) -> info
    resources: BTreeMap<(String, String, String), Arc<ResourceInfo>>,
}

impl Registry {
    /// A registry holding every built-in resource.
    pub fn with_builtins() -> Self {
        let reg = Registry::default();
        {
            let mut t = reg.inner.write().expect("registry lock");
            for info in builtin::all() {
                t.resources.insert(
                    (
                        info.group.clone(),
                        info.version.clone(),
                        info.plural.clone(),
                    ),
                    Arc::new(info),
                );
            }
        }
        reg
    }

    /// Looks up a resource by group, version and plural.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        let t = self.inner.read().expect("registry lock");
        t.resources
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// The resource of a group/kind at its storage version (used by the GC and CRD code).
    pub fn by_group_plural(&self, group: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        let t = self.inner.read().expect("registry lock");
        t.resources
            .values()
            .find(|r| r.group == group && r.plural == plural && r.version == r.storage_version)
            .cloned()
    }

    /// The resource serving `apiVersion`/`kind`.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        let (group, version) = split_api_version(api_version);
        let t = self.inner.read().expect("registry lock");
        t.resources
            .values()
            .find(|r| r.group == group && r.version == version && r.kind == kind)
            .cloned()
    }

    /// Every resource (all groups and versions).
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        self.inner
            .read()
            .expect("registry lock")
            .resources
            .values()
            .cloned()
            .collect()
    }

    /// Every distinct (group, plural) at its storage version.
    pub fn storage_resources(&self) -> Vec<Arc<ResourceInfo>> {
        self.all()
            .into_iter()
            .filter(|r| r.version == r.storage_version)
            .collect()
    }

    /// Replaces all resources of one CRD (identified by group and plural).
    pub fn set_custom(&self, group: &str, plural: &str, infos: Vec<ResourceInfo>) {
        let mut t = self.inner.write().expect("registry lock");
        t.resources
            .retain(|(g, _, p), r| !(g == group && p == plural && r.is_custom()));
        for info in infos {
            t.resources.insert(
                (
                    info.group.clone(),
                    info.version.clone(),
                    info.plural.clone(),
                ),
                Arc::new(info),
            );
        }
    }

    /// Removes all resources of one CRD.
    pub fn remove_custom(&self, group: &str, plural: &str) {
        self.set_custom(group, plural, vec![]);
    }
}

/// Splits `group/version` (or `v1`) into (group, version).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}
