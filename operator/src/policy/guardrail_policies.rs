//! Guardrail policies: a reconcile binding's `guardrailPolicies` judge
//! every desired child before anything is applied, exactly as the API
//! server would have them judged at admission (same rules, selectors, mode
//! and failurePolicy). One denial fails the whole reconcile: nothing is
//! applied or pruned, the parent gets `Synced=False` with the policy's
//! message, and a Warning Event.
//!
//! Each child is sent as a synthesized `AdmissionRequest`: `CREATE` when the
//! child is not in the cache, `UPDATE` (with `oldObject`) when it is, with
//! the object as it will be applied (the binding label included), by the
//! user `gantry:binding:<name>`.
//!
//! Mutations are not applied here: a guardrail answers yes or no. The
//! host applies what the plugin asked for, and a mutating policy that is
//! also registered as a webhook changes the object at admission, as it
//! would for any other client. Applying the patch here as well would make
//! the host's intent differ from the plugin's output on every reconcile.

use std::collections::BTreeMap;

use gantry_kube::rules::selector_matches;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::ApiResource;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use thiserror::Error;

use super::{LoadedPolicy, Policies};

/// A child as its apply would send it: what guardrail policies judge. The
/// controller computes these once per reconcile and applies the same
/// objects.
#[derive(Debug, Clone)]
pub struct ChildIntent<'a> {
    /// Its resource.
    pub resource: &'a ApiResource,
    /// Whether its kind is namespaced.
    pub namespaced: bool,
    /// Its name.
    pub name: &'a str,
    /// Its namespace (`None` for cluster-scoped kinds).
    pub namespace: Option<&'a str>,
    /// `Kind namespace/name`, for messages.
    pub display: String,
    /// The object to apply (owner reference and binding label set).
    pub object: &'a Value,
    /// The live object, as JSON, when it exists: the apply is an UPDATE;
    /// otherwise a CREATE.
    pub old: Option<Value>,
}

impl ChildIntent<'_> {
    fn operation(&self) -> &'static str {
        if self.old.is_some() {
            "UPDATE"
        } else {
            "CREATE"
        }
    }
}

/// Why guardrail policies did not let the children through.
#[derive(Debug, Error)]
pub enum GuardrailError {
    /// A named policy is not in service (it may be on its way).
    #[error("{}", .0.join("; "))]
    Unavailable(Vec<String>),
    /// Policies denied children: one message per denial.
    #[error("{}", .0.join("; "))]
    Denied(Vec<String>),
    /// Reading a namespace's labels for a namespace selector failed.
    #[error("reading namespace labels: {0}")]
    Kube(#[source] kube::Error),
}

/// Labels of namespaces, fetched once per check when a policy has a
/// namespace selector.
struct NamespaceLabels<'a> {
    client: &'a Client,
    known: BTreeMap<String, BTreeMap<String, String>>,
}

impl NamespaceLabels<'_> {
    async fn get(&mut self, namespace: &str) -> Result<&BTreeMap<String, String>, kube::Error> {
        if !self.known.contains_key(namespace) {
            let api: Api<Namespace> = Api::all(self.client.clone());
            let labels = api.get(namespace).await?.labels().clone();
            self.known.insert(namespace.to_string(), labels);
        }
        Ok(&self.known[namespace])
    }
}

/// Whether `selector` (none: everything) selects `labels`, judged as the
/// embedded API server judges a webhook's selectors.
fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    selector.is_none_or(|s| selector_matches(s, labels))
}

/// The admission request the apply of `child` would cause, by binding
/// `binding`.
pub(crate) fn synthesized_request(binding: &str, child: &ChildIntent<'_>) -> Value {
    let resource = child.resource;
    let (group, version) = (&resource.group, &resource.version);
    let options_kind = if child.old.is_some() {
        "PatchOptions"
    } else {
        "CreateOptions"
    };
    let gvk = json!({"group": group, "version": version, "kind": resource.kind});
    let gvr = json!({"group": group, "version": version, "resource": resource.plural});
    json!({
        "uid": format!("gantry-guardrail-{:016x}", fastrand::u64(..)),
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": child.name,
        "namespace": child.namespace,
        "operation": child.operation(),
        "userInfo": {"username": format!("gantry:binding:{binding}"), "groups": ["gantry:bindings"]},
        "object": child.object,
        "oldObject": child.old,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options_kind, "fieldManager": format!("gantry/{binding}")},
    })
}

fn lookup(
    policies: &Policies,
    names: &[String],
) -> Result<Vec<std::sync::Arc<LoadedPolicy>>, GuardrailError> {
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in names {
        match policies.get(name) {
            Some(policy) => found.push(policy),
            None => missing.push(format!("guardrail policy {name} is not in service")),
        }
    }
    if missing.is_empty() {
        Ok(found)
    } else {
        Err(GuardrailError::Unavailable(missing))
    }
}

/// Judge every child of binding `binding` with the policies `names`; Ok
/// when all allow (or do not apply).
pub(crate) async fn check(
    policies: &Policies,
    client: &Client,
    binding: &str,
    names: &[String],
    children: &[ChildIntent<'_>],
) -> Result<(), GuardrailError> {
    if names.is_empty() {
        return Ok(());
    }
    let judges = lookup(policies, names)?;
    let mut namespaces = NamespaceLabels {
        client,
        known: BTreeMap::new(),
    };
    let mut denials = Vec::new();
    for child in children {
        let resource = child.resource;
        let labels: BTreeMap<String, String> = child
            .object
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        for policy in &judges {
            let spec = &policy.spec;
            if !spec.matches(
                child.operation(),
                &resource.group,
                &resource.version,
                &resource.plural,
                "",
                child.namespaced,
            ) || !selects(spec.object_selector.as_ref(), &labels)
            {
                continue;
            }
            if spec.namespace_selector.is_some()
                && let Some(namespace) = child.namespace
            {
                let labels = namespaces
                    .get(namespace)
                    .await
                    .map_err(GuardrailError::Kube)?;
                if !selects(spec.namespace_selector.as_ref(), labels) {
                    continue;
                }
            }
            let request = synthesized_request(binding, child);
            let decision = policy.evaluate(request, policies.metrics()).await;
            if !decision.response.allowed {
                denials.push(format!(
                    "policy {} denied {}: {}",
                    spec.name,
                    child.display,
                    decision.response.message.unwrap_or_default()
                ));
            } else if decision.response.patch.is_some() {
                tracing::debug!(%binding, policy = %spec.name, child = %child.display, "guardrail policy would mutate the child; guardrails do not apply mutations");
            }
        }
    }
    if denials.is_empty() {
        Ok(())
    } else {
        Err(GuardrailError::Denied(denials))
    }
}

#[cfg(test)]
mod tests {
    use kube::core::GroupVersionKind;

    use super::*;

    #[test]
    fn a_child_becomes_the_request_its_apply_would_cause() {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        );
        let object =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let mut child = ChildIntent {
            resource: &resource,
            namespaced: true,
            name: "web",
            namespace: Some("default"),
            display: "Deployment default/web".into(),
            object: &object,
            old: None,
        };
        let create = synthesized_request("memcached", &child);
        assert_eq!(create["operation"], "CREATE");
        assert_eq!(
            create["kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        assert_eq!(
            create["resource"],
            json!({"group": "apps", "version": "v1", "resource": "deployments"})
        );
        assert_eq!(
            (&create["namespace"], &create["name"]),
            (&json!("default"), &json!("web"))
        );
        assert_eq!(create["userInfo"]["username"], "gantry:binding:memcached");
        assert_eq!(create["oldObject"], Value::Null);
        assert!(
            create["uid"]
                .as_str()
                .unwrap()
                .starts_with("gantry-guardrail-")
        );
        child.old = Some(object.clone());
        let update = synthesized_request("memcached", &child);
        assert_eq!(update["operation"], "UPDATE");
        assert_eq!(update["options"]["kind"], "PatchOptions");
        assert_eq!(update["oldObject"], object);
        // What a policy sees parses as the SDK's request.
        let request = gantry_sdk::AdmissionRequest {
            request: update,
            settings: Value::Null,
        };
        assert_eq!(
            request.group_kind(),
            Some(("apps".into(), "Deployment".into()))
        );
    }
}
