//! `POST .../pods/NAME/eviction` (policy/v1 `Eviction`, `kubectl drain`): deletes the
//! Pod unless its `PodDisruptionBudget` forbids it, as kube's eviction registry does.
//!
//! Terminal, Pending and already-deleting Pods are deleted without looking at budgets.
//! Otherwise the one budget whose selector matches the Pod decides: not yet observed
//! by its controller (`status.observedGeneration` behind) or no disruption left →
//! 429; else one disruption is spent (`status.disruptionsAllowed`, `disruptedPods`)
//! in the same commit that deletes the Pod with kube's `DisruptionTarget` condition.
//! Budget status comes from whoever computes it (kube's disruption controller; here
//! the simulation or a client), as in kube. Admission webhooks see the request first:
//! a CREATE of the `Eviction` on `pods/eviction`, mutating then validating.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::response::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::delete;
use crate::admission::matching::{selector_is_empty, selector_matches};
use crate::admission::{self as adm, Attributes, Operation};
use crate::app::App;
use crate::error::{ApiError, ApiResult};
use crate::http::body;
use crate::http::request::ResourceRequest;
use crate::http::respond::json_response;
use crate::objects::meta;
use crate::storage::{View, Write};

/// kube's limit on evictions its disruption controller has not confirmed yet.
const MAX_DISRUPTED_PODS: usize = 2000;

/// The words kube answers a refused eviction with.
const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// Evicts the Pod the request names.
pub async fn evict(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let name = r.name.clone().unwrap_or_default();
    let namespace = r.namespace.clone().unwrap_or_default();
    let mut eviction = body::object(&r.content_type(), &r.body)?;
    match meta::meta_str(&eviction, "namespace").unwrap_or("") {
        "" => {
            meta::meta_mut(&mut eviction).insert("namespace".into(), json!(namespace));
        }
        ns if ns != namespace => {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        _ => {}
    }
    let attrs = admission_attributes(&r, &name, &namespace);
    let mut warnings = adm::mutate(app, &attrs, Some(&mut eviction), None).await?;
    if meta::meta_str(&eviction, "name").unwrap_or("") != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    warnings.extend(adm::validate(app, &attrs, Some(&eviction), None).await?);
    let delete_options = eviction
        .get("deleteOptions")
        .filter(|o| o.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let opts = delete::options_from(&r, &delete_options)?;
    let info = r.info.clone();
    let pdbs = app
        .registry
        .get("policy", "v1", "poddisruptionbudgets")
        .ok_or_else(|| ApiError::Internal("PodDisruptionBudgets are not served".into()))?;
    let pdb_prefix = pdbs.ns_prefix(Some(&namespace));
    let key = r.key();
    app.commit(move |view| {
        let pod = view
            .get(&key)
            .ok_or_else(|| ApiError::not_found("", "pods", &name))?;
        let mut writes = vec![];
        if !can_ignore_budgets(pod) {
            let budgets = budgets_of(view, &pdb_prefix, pod);
            match budgets.as_slice() {
                [] => {}
                [_, _, ..] => {
                    return Err(ApiError::Rejected(Box::new(json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                        "code": 500,
                    }))));
                }
                [(_, pdb)] if !spends_budget(pod, pdb) => {}
                [(pdb_key, pdb)] => {
                    let spent = spend(pdb, &name, opts.dry_run)?;
                    writes.push(Write::Put(pdb_key.clone(), spent));
                }
            }
        }
        let mut target = (**pod).clone();
        if !opts.dry_run {
            add_disruption_condition(&mut target);
        }
        let (_, deleted) = delete::delete_live(&info, &key, &name, &target, &opts)?;
        writes.extend(deleted);
        Ok(((), if opts.dry_run { vec![] } else { writes }))
    })
    .await?;
    Ok(json_response(
        201,
        &json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201 }),
        &warnings,
    ))
}

/// What admission webhooks see of an eviction: a CREATE of the `policy/v1 Eviction`
/// on the Pod's `eviction` subresource, as kube sends it.
fn admission_attributes(r: &ResourceRequest, name: &str, namespace: &str) -> Attributes {
    let mut options = json!({ "kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1" });
    if r.dry_run() {
        options["dryRun"] = json!(["All"]);
    }
    if let Some(m) = r.query.get("fieldManager").filter(|m| !m.is_empty()) {
        options["fieldManager"] = json!(m);
    }
    Attributes {
        info: r.info.clone(),
        subresource: Some("eviction".into()),
        operation: Operation::Create,
        namespace: Some(namespace.to_string()),
        name: name.to_string(),
        user: r.user.clone(),
        dry_run: r.dry_run(),
        options,
        object_kind: Some(("policy".into(), "v1".into(), "Eviction".into())),
    }
}

/// kube's `canIgnorePDB`: terminal, Pending or deleting Pods.
fn can_ignore_budgets(pod: &Value) -> bool {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    matches!(phase, Some("Succeeded" | "Failed" | "Pending")) || meta::is_deleting(pod)
}

/// The budgets in the Pod's namespace whose (non-empty) selector matches it.
fn budgets_of(view: &View<'_>, prefix: &str, pod: &Value) -> Vec<(String, Arc<Value>)> {
    let labels: BTreeMap<String, String> = crate::admission::matching::labels(Some(pod));
    view.list(prefix)
        .into_iter()
        .filter(|(_, pdb)| {
            pdb.pointer("/spec/selector")
                .and_then(|s| serde_json::from_value::<LabelSelector>(s.clone()).ok())
                .is_some_and(|s| !selector_is_empty(&s) && selector_matches(&s, &labels))
        })
        .collect()
}

fn status_i64(pdb: &Value, field: &str) -> i64 {
    pdb.pointer(&format!("/status/{field}"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Whether evicting `pod` spends one of the budget's disruptions: not when the Pod
/// is not Ready and the budget has its healthy Pods anyway.
fn spends_budget(pod: &Value, pdb: &Value) -> bool {
    let (current, desired) = (
        status_i64(pdb, "currentHealthy"),
        status_i64(pdb, "desiredHealthy"),
    );
    is_ready(pod) || current < desired || desired <= 0
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// kube's `checkAndDecrement`: the budget with one disruption spent (and, unless a
/// dry run, the Pod recorded in `disruptedPods`), or kube's refusal.
fn spend(pdb: &Value, pod_name: &str, dry_run: bool) -> ApiResult<Value> {
    let pdb_name = meta::meta_str(pdb, "name").unwrap_or("");
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if status_i64(pdb, "observedGeneration") < generation {
        return Err(too_many_requests(
            10,
            &format!("The disruption budget {pdb_name} is still being processed by the server."),
        ));
    }
    let allowed = status_i64(pdb, "disruptionsAllowed");
    let forbidden = |why: &str| ApiError::Forbidden {
        message: format!("poddisruptionbudget.policy {pdb_name:?} is forbidden: {why}"),
        details: crate::error::Details::new("policy", "poddisruptionbudget", pdb_name),
    };
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, serde_json::Map::len);
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(
            0,
            &format!(
                "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                status_i64(pdb, "desiredHealthy"),
                status_i64(pdb, "currentHealthy")
            ),
        ));
    }
    let mut spent = pdb.clone();
    spent["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed == 1 {
        set_condition(
            &mut spent,
            json!({
                "type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                "message": "", "observedGeneration": generation,
            }),
        );
    }
    if !dry_run {
        spent["status"]["disruptedPods"][pod_name] = json!(meta::now_rfc3339());
    }
    Ok(spent)
}

/// Sets a condition in `status.conditions`, keeping its `lastTransitionTime` when
/// its status does not change.
fn set_condition(obj: &mut Value, mut condition: Value) {
    let conditions = &mut obj["status"]["conditions"];
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("an array");
    let now = meta::now_rfc3339();
    if let Some(old) = list.iter_mut().find(|c| c["type"] == condition["type"]) {
        let time = if old["status"] == condition["status"] {
            old["lastTransitionTime"].clone()
        } else {
            json!(now)
        };
        condition["lastTransitionTime"] = time;
        *old = condition;
    } else {
        condition["lastTransitionTime"] = json!(now);
        list.push(condition);
    }
}

/// The condition kube's eviction sets on the Pod it deletes.
fn add_disruption_condition(pod: &mut Value) {
    set_condition(
        pod,
        json!({
            "type": "DisruptionTarget", "status": "True",
            "reason": "EvictionByEvictionAPI", "message": "Eviction API: evicting",
        }),
    );
}

/// kube's 429 for a refused eviction, with a `DisruptionBudget` cause.
fn too_many_requests(retry_after: u64, cause: &str) -> ApiError {
    let mut details = json!({ "causes": [{ "reason": "DisruptionBudget", "message": cause }] });
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    ApiError::Rejected(Box::new(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": REFUSED, "reason": "TooManyRequests", "details": details, "code": 429,
    })))
}
