//! Guardrail policies: a reconcile binding's `guardrailPolicies` judge
//! every desired child before anything is applied, exactly as the API
//! server would have them judged at admission (same rules, selectors, mode
//! and failurePolicy). One denial fails the whole reconcile: nothing is
//! applied or pruned, the parent gets `Synced=False` with the policy's
//! message, and a Warning Event.
//!
//! Each child is sent as a synthesized AdmissionRequest: `CREATE` when the
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

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject};
use kube::core::{Selector, SelectorExt};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::{LoadedPolicy, Policies};
use crate::controller::ReconcileError;
use crate::controller::context::BindingContext;
use crate::controller::guardrails::DesiredChild;

/// Labels of `namespace`, fetched once per reconcile when a policy has a
/// namespace selector.
struct NamespaceLabels<'a> {
    ctx: &'a BindingContext,
    known: BTreeMap<String, BTreeMap<String, String>>,
}

impl NamespaceLabels<'_> {
    async fn get(&mut self, namespace: &str) -> Result<&BTreeMap<String, String>, kube::Error> {
        if !self.known.contains_key(namespace) {
            let api: Api<Namespace> = Api::all(self.ctx.client.clone());
            let labels = api.get(namespace).await?.labels().clone();
            self.known.insert(namespace.to_string(), labels);
        }
        Ok(&self.known[namespace])
    }
}

fn selects(
    selector: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> bool {
    match selector {
        None => true,
        Some(s) => Selector::try_from(s.clone()).is_ok_and(|s| s.matches(labels)),
    }
}

/// The admission request a child's apply would cause.
pub fn synthesized_request(
    binding: &str,
    resource: &ApiResource,
    child: &DesiredChild,
    object: &Value,
    old: Option<Value>,
) -> Value {
    let (group, version) = (&resource.group, &resource.version);
    let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
    let options_kind = if old.is_some() {
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
        "operation": operation,
        "userInfo": {"username": format!("gantry:binding:{binding}"), "groups": ["gantry:bindings"]},
        "object": object,
        "oldObject": old,
        "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options_kind, "fieldManager": format!("gantry/{binding}")},
    })
}

fn lookup(
    policies: &Policies,
    names: &[String],
) -> Result<Vec<std::sync::Arc<LoadedPolicy>>, ReconcileError> {
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
        // It may be on its way (policies load beside reconcile bindings).
        Err(ReconcileError::PolicyUnavailable(missing))
    }
}

/// Judge every desired child of `parent` with the binding's guardrail
/// policies; Ok when all allow (or do not apply).
pub async fn check(
    ctx: &BindingContext,
    parent: &DynamicObject,
    names: &[String],
    desired: &[DesiredChild],
) -> Result<(), ReconcileError> {
    if names.is_empty() {
        return Ok(());
    }
    let policies = &ctx.shared.options.policies;
    let judges = lookup(policies, names)?;
    let mut namespaces = NamespaceLabels {
        ctx,
        known: BTreeMap::new(),
    };
    let mut denials = Vec::new();
    for child in desired {
        let Some(kind) = ctx.children.iter().find(|c| c.info.kind == child.kind) else {
            continue;
        };
        let resource = &kind.info.resource;
        let reference = ObjectRef::new_with(&child.name, resource.clone());
        let reference = match &child.namespace {
            Some(ns) => reference.within(ns),
            None => reference,
        };
        let old = kind
            .store
            .get(&reference)
            .map(|live| kind.info.to_json(&live));
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        let object = crate::controller::apply::intent(ctx, parent, child);
        let labels: BTreeMap<String, String> = object
            .pointer("/metadata/labels")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
            .unwrap_or_default();
        for policy in &judges {
            let spec = &policy.spec;
            if !spec.matches(
                operation,
                &resource.group,
                &resource.version,
                &resource.plural,
                "",
                kind.info.namespaced,
            ) || !selects(&spec.object_selector, &labels)
            {
                continue;
            }
            if spec.namespace_selector.is_some()
                && let Some(namespace) = &child.namespace
            {
                let labels = namespaces
                    .get(namespace)
                    .await
                    .map_err(ReconcileError::Kube)?;
                if !selects(&spec.namespace_selector, labels) {
                    continue;
                }
            }
            let request = synthesized_request(&ctx.name, resource, child, &object, old.clone());
            let decision = policy.evaluate(request, policies.metrics()).await;
            if !decision.response.allowed {
                denials.push(format!(
                    "policy {} denied {}: {}",
                    spec.name,
                    child.display(),
                    decision.response.message.unwrap_or_default()
                ));
            } else if decision.response.patch.is_some() {
                tracing::debug!(binding = %ctx.name, policy = %spec.name, child = %child.display(), "guardrail policy would mutate the child; guardrails do not apply mutations");
            }
        }
    }
    if denials.is_empty() {
        Ok(())
    } else {
        Err(ReconcileError::PolicyDenied(denials))
    }
}

#[cfg(test)]
mod tests {
    use kube::core::GroupVersionKind;

    use super::*;
    use crate::controller::binding::KindRef;

    #[test]
    fn a_child_becomes_the_request_its_apply_would_cause() {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apps", "v1", "Deployment"),
            "deployments",
        );
        let child = DesiredChild {
            kind: KindRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
            },
            namespace: Some("default".into()),
            name: "web".into(),
            object: json!({}),
        };
        let object =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}});
        let create = synthesized_request("memcached", &resource, &child, &object, None);
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
        let update = synthesized_request(
            "memcached",
            &resource,
            &child,
            &object,
            Some(object.clone()),
        );
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
