//! What `gantry dev` installs, and how a later start treats it: the
//! example CRDs, bindings, policies and samples go into a cluster once;
//! after that, an object the user changed or deleted stays as the user left
//! it, while one nobody else touched is brought up to date (a new example
//! plugin, the new address of the component server).
//!
//! Kubernetes' own field ownership tells the two apart: everything is
//! applied server-side as `gantry-dev`, without `force` once installed, so
//! a field another manager (`kubectl edit`, `kubectl apply`) changed is a
//! conflict, and the object is left alone. What was installed is listed in
//! a ConfigMap, so a deleted object is told from one never installed.

use std::collections::BTreeSet;

use anyhow::Context;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::cluster::{ApplyError, DEV_MANAGER};

/// Name of the ConfigMap (in the operator's namespace) listing what
/// `gantry dev` installed.
pub(crate) const INSTALLED_CONFIG_MAP: &str = "gantry-dev-installed";

const INSTALLED_KEY: &str = "objects";

/// What became of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Created, or brought up to date.
    Applied,
    /// Left as the user changed it; the server's conflict message.
    KeptChanges(String),
    /// Installed once and deleted since: not created again.
    KeptDeleted,
}

/// Applies what `gantry dev` installs, leaving the user's changes alone.
pub struct Installer {
    client: Client,
    namespace: String,
    /// Every object installed so far, as `apiVersion kind namespace/name`.
    installed: BTreeSet<String>,
    /// Apply with `force`, over any change (`--reset`, and clusters of
    /// tests); a first install is not forced, so it never overwrites an
    /// object someone else made under the same name.
    force: bool,
    /// Lines saying what was left as the user had it.
    kept: Vec<String>,
    /// Record what is installed for the next start.
    record: bool,
}

impl Installer {
    /// Forced applies, as for a cluster of tests that nobody edits.
    pub fn forced(client: &Client, namespace: &str) -> Self {
        Self {
            client: client.clone(),
            namespace: namespace.to_string(),
            installed: BTreeSet::new(),
            force: true,
            kept: Vec::new(),
            record: false,
        }
    }

    /// The installer for the cluster of `client`, reading what an earlier
    /// `gantry dev` installed there; `reset` installs everything again
    /// over the user's changes.
    pub async fn for_cluster(
        client: &Client,
        namespace: &str,
        reset: bool,
    ) -> anyhow::Result<Self> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let installed = match api.get_opt(INSTALLED_CONFIG_MAP).await {
            Ok(found) => found
                .and_then(|cm| cm.data)
                .and_then(|mut data| data.remove(INSTALLED_KEY))
                .map(|list| list.lines().map(str::to_string).collect())
                .unwrap_or_default(),
            // The namespace may not exist yet: nothing was installed.
            Err(kube::Error::Api(e)) if e.code == 404 => BTreeSet::new(),
            Err(e) => return Err(e).context("reading what gantry dev installed"),
        };
        Ok(Self {
            client: client.clone(),
            namespace: namespace.to_string(),
            installed: if reset { BTreeSet::new() } else { installed },
            force: reset,
            kept: Vec::new(),
            record: true,
        })
    }

    /// The cluster's client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The namespace of the bindings and policies.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Apply `object` unless the user changed or deleted it since it was
    /// installed.
    pub async fn apply(&mut self, object: &Value) -> anyhow::Result<Outcome> {
        let key = object_key(object)?;
        let was_installed = self.installed.contains(&key);
        if was_installed && !self.force && !super::object_exists(&self.client, object).await? {
            self.kept.push(format!(
                "{key}: deleted since it was installed, not created again"
            ));
            return Ok(Outcome::KeptDeleted);
        }
        let outcome = match super::apply_object_with(&self.client, object, self.force).await {
            Ok(_) => Outcome::Applied,
            Err(ApplyError::Conflict(message)) => {
                self.kept
                    .push(format!("{key}: keeping your changes ({message})"));
                Outcome::KeptChanges(message)
            }
            Err(ApplyError::Other(e)) => return Err(e),
        };
        self.installed.insert(key);
        Ok(outcome)
    }

    /// Record what is installed (for the next start); the lines saying what
    /// was left as the user had it.
    pub async fn finish(self) -> anyhow::Result<Vec<String>> {
        if !self.record {
            return Ok(self.kept);
        }
        super::ensure_namespace(&self.client, &self.namespace).await?;
        let list: Vec<&str> = self.installed.iter().map(String::as_str).collect();
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": INSTALLED_CONFIG_MAP, "namespace": self.namespace},
            "data": {INSTALLED_KEY: list.join("\n")},
        });
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        api.patch(
            INSTALLED_CONFIG_MAP,
            &PatchParams::apply(DEV_MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .context("recording what gantry dev installed")?;
        Ok(self.kept)
    }
}

/// `apiVersion kind namespace/name` (or `apiVersion kind name`).
fn object_key(object: &Value) -> anyhow::Result<String> {
    let field = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let api_version = field("/apiVersion").context("object has no apiVersion")?;
    let kind = field("/kind").context("object has no kind")?;
    let name = field("/metadata/name").context("object has no metadata.name")?;
    Ok(match field("/metadata/namespace") {
        Some(namespace) => format!("{api_version} {kind} {namespace}/{name}"),
        None => format!("{api_version} {kind} {name}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_named_by_kind_namespace_and_name() {
        let namespaced = json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "a", "namespace": "ns"}});
        assert_eq!(object_key(&namespaced).unwrap(), "v1 ConfigMap ns/a");
        let cluster = json!({"apiVersion": "apiextensions.k8s.io/v1",
                             "kind": "CustomResourceDefinition", "metadata": {"name": "x.y"}});
        assert_eq!(
            object_key(&cluster).unwrap(),
            "apiextensions.k8s.io/v1 CustomResourceDefinition x.y"
        );
        assert!(object_key(&json!({"kind": "ConfigMap"})).is_err());
    }
}
