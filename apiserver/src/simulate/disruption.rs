//! kube's disruption controller: the status of every `PodDisruptionBudget` (healthy
//! Pods, how many must stay healthy, expected Pods, disruptions allowed, the
//! `DisruptionAllowed` condition), so that evictions of Pods with a budget are
//! decided as in a cluster. Evictions the eviction API recorded in
//! `disruptedPods` count as gone until the Pod is deleted or two minutes pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::conditions::Conditions;
use super::pods::is_ready;
use super::{Ctx, Result};
use crate::admission::matching::selector_matches;

/// How long an eviction recorded in `disruptedPods` is expected to take (kube's
/// `DeletionTimeout`).
const DELETION_TIMEOUT_MS: i64 = 2 * 60 * 1000;

/// Runs the controller until dropped: every budget, again when a Pod in its
/// namespace changes.
pub async fn run(ctx: Arc<Ctx>) {
    let controller = Controller::new(
        Api::<PodDisruptionBudget>::all(ctx.client.clone()),
        watcher::Config::default(),
    );
    let budgets = controller.store();
    controller
        .watches(
            Api::<Pod>::all(ctx.client.clone()),
            watcher::Config::default(),
            move |pod: Pod| {
                // Every budget of the Pod's namespace (the reconcile selects).
                budgets
                    .state()
                    .into_iter()
                    .filter(|b| b.metadata.namespace == pod.metadata.namespace)
                    .map(|b| ObjectRef::from_obj(&*b))
                    .collect::<Vec<_>>()
            },
        )
        .run(reconcile, super::retry, ctx)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Ctx>) -> Result<Action> {
    sync(&pdb, &ctx).await
}

/// kube's `trySync` (or `failSafe` when a Pod's controller cannot be found).
async fn sync(pdb: &PodDisruptionBudget, ctx: &Ctx) -> Result<Action> {
    if pdb.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name, _) = super::identity(&pdb.metadata)?;
    let spec = pdb.spec.clone().unwrap_or_default();
    let pods: Vec<Pod> = match &spec.selector {
        None => vec![],
        Some(selector) => Api::<Pod>::namespaced(ctx.client.clone(), namespace)
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|p| {
                let labels = p.metadata.labels.clone().unwrap_or_default();
                selector_matches(selector, &labels)
            })
            .collect(),
    };
    let now = super::now_ms();
    let status = pdb.status.clone().unwrap_or_default();
    let live = serde_json::to_value(&status).unwrap_or(Value::Null);
    let conditions = Conditions::of(status.conditions.as_ref());
    let generation = pdb.metadata.generation.unwrap_or(0);
    let mut wanted = match expected_and_desired(ctx, &spec, &pods).await? {
        Ok((expected, desired)) => {
            let (disrupted, recheck) = disrupted_pods(&live, &pods, now);
            let healthy = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    let name = p.metadata.name.as_deref().unwrap_or_default();
                    !disrupted.contains_key(name)
                })
                .filter(|p| is_ready(p))
                .count();
            let healthy = i32::try_from(healthy).unwrap_or(i32::MAX);
            let allowed = if expected <= 0 {
                0
            } else {
                (healthy - desired).max(0)
            };
            let (ok, reason) = if allowed > 0 {
                (true, "SufficientPods")
            } else {
                (false, "InsufficientPods")
            };
            let mut condition = conditions.set("DisruptionAllowed", ok, reason, "");
            condition["message"] = json!("");
            condition["observedGeneration"] = json!(generation);
            let status = json!({
                "currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
                "disruptionsAllowed": allowed, "observedGeneration": generation,
                "disruptedPods": if disrupted.is_empty() { Value::Null } else { json!(disrupted) },
                "conditions": [condition],
            });
            (status, recheck)
        }
        Err(why) => {
            let mut status = live.clone();
            status["disruptionsAllowed"] = json!(0);
            let mut condition = conditions.set("DisruptionAllowed", false, "SyncFailed", &why);
            condition["observedGeneration"] =
                live.get("observedGeneration").cloned().unwrap_or(json!(0));
            status["conditions"] = json!([condition]);
            (status, None)
        }
    };
    keep_other_conditions(&live, &mut wanted.0);
    if !super::same_status(&live, &wanted.0) || changed_keys(&live, &wanted.0) {
        let mut updated = serde_json::to_value(pdb).map_err(|_| super::Error::Missing("status"))?;
        updated["status"] = strip_nulls(wanted.0);
        let api: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), namespace);
        let params = PostParams {
            field_manager: Some(super::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let updated: PodDisruptionBudget =
            serde_json::from_value(updated).map_err(|_| super::Error::Missing("status"))?;
        api.replace_status(name, &params, &updated).await?;
    }
    Ok(match wanted.1 {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// Conditions of other types stay as they are.
fn keep_other_conditions(live: &Value, wanted: &mut Value) {
    let others = live
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| c["type"] != "DisruptionAllowed")
        .cloned();
    if let Some(list) = wanted.get_mut("conditions").and_then(Value::as_array_mut) {
        let ours = list.clone();
        *list = others.chain(ours).collect();
    }
}

/// Whether a key of the `disruptedPods` map differs (a merge-style comparison
/// would not see a removed entry).
fn changed_keys(live: &Value, wanted: &Value) -> bool {
    let keys = |v: &Value| -> Vec<String> {
        v.get("disruptedPods")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    keys(live) != keys(wanted)
}

fn strip_nulls(status: Value) -> Value {
    match status {
        Value::Object(m) => Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        other => other,
    }
}

/// The evictions still expected to complete (Pods not deleting, recorded less than
/// two minutes ago), and when the first of them expires.
fn disrupted_pods(
    live: &Value,
    pods: &[Pod],
    now: i64,
) -> (BTreeMap<String, Value>, Option<Duration>) {
    let recorded = live.get("disruptedPods").and_then(Value::as_object);
    let mut out = BTreeMap::new();
    let mut recheck: Option<i64> = None;
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(when) = recorded.and_then(|r| r.get(&name)) else {
            continue;
        };
        let at = when
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or(0, |t| t.timestamp_millis());
        let expires = at + DELETION_TIMEOUT_MS;
        if expires > now {
            recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
            out.insert(name, when.clone());
        }
    }
    let after = recheck.map(|r| Duration::from_millis(u64::try_from(r - now).unwrap_or(0)));
    (out, after)
}

/// kube's `getExpectedPodCount`: (expected Pods, desired healthy Pods), or why the
/// scale of the Pods' controllers could not be found.
async fn expected_and_desired(
    ctx: &Ctx,
    spec: &k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec,
    pods: &[Pod],
) -> Result<Result<(i32, i32), String>> {
    let count = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    if let Some(max) = &spec.max_unavailable {
        let expected = match expected_scale(ctx, pods).await? {
            Ok(n) => n,
            Err(e) => return Ok(Err(e)),
        };
        let max = scaled(max, expected);
        return Ok(Ok((expected, (expected - max).max(0))));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Ok((count, *n))),
        Some(min @ IntOrString::String(_)) => {
            let expected = match expected_scale(ctx, pods).await? {
                Ok(n) => n,
                Err(e) => return Ok(Err(e)),
            };
            Ok(Ok((expected, scaled(min, expected))))
        }
        None => Ok(Ok((0, 0))),
    }
}

/// kube's `GetScaledValueFromIntOrPercent`, rounding up.
fn scaled(value: &IntOrString, total: i32) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let percent: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let total = i64::from(total);
            i32::try_from((percent * total + 99) / 100).unwrap_or(i32::MAX)
        }
    }
}

/// kube's `getExpectedScale`: the sum of the scales of the controllers of the Pods
/// (each controller once; Pods without a controller are not counted).
async fn expected_scale(ctx: &Ctx, pods: &[Pod]) -> Result<Result<i32, String>> {
    let mut scales: HashMap<String, i32> = HashMap::new();
    for pod in pods {
        let Some(owner) = controller_of(&pod.metadata) else {
            continue;
        };
        if scales.contains_key(&owner.uid) {
            continue;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some((uid, scale)) = scale_of(ctx, namespace, owner).await? else {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            return Ok(Err(format!("found no controllers for pod {name:?}")));
        };
        scales.insert(uid, scale);
    }
    Ok(Ok(scales.values().sum()))
}

fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// The uid and replicas of the controller `owner` refers to (a ReplicaSet's
/// Deployment when it has one), as kube's finders look them up.
async fn scale_of(
    ctx: &Ctx,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<Option<(String, i32)>> {
    let group = owner.api_version.split('/').rev().nth(1).unwrap_or("");
    let found = match (group, owner.kind.as_str()) {
        ("", "ReplicationController") => {
            let rc = get::<ReplicationController>(ctx, namespace, &owner.name).await?;
            rc.filter(|rc| rc.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                .map(|rc| {
                    let replicas = rc.spec.and_then(|s| s.replicas).unwrap_or(1);
                    (owner.uid.clone(), replicas)
                })
        }
        ("apps", "ReplicaSet") => replica_set_scale(ctx, namespace, owner).await?,
        ("apps", "StatefulSet") => get::<StatefulSet>(ctx, namespace, &owner.name)
            .await?
            .filter(|s| s.metadata.uid.as_deref() == Some(owner.uid.as_str()))
            .map(|s| {
                let replicas = s.spec.and_then(|s| s.replicas).unwrap_or(1);
                (owner.uid.clone(), replicas)
            }),
        _ => None,
    };
    Ok(found)
}

/// A ReplicaSet's replicas, or its Deployment's when a Deployment controls it.
async fn replica_set_scale(
    ctx: &Ctx,
    namespace: &str,
    owner: &OwnerReference,
) -> Result<Option<(String, i32)>> {
    let Some(rs) = get::<ReplicaSet>(ctx, namespace, &owner.name)
        .await?
        .filter(|rs| rs.metadata.uid.as_deref() == Some(owner.uid.as_str()))
    else {
        return Ok(None);
    };
    let Some(d) = controller_of(&rs.metadata).filter(|r| r.kind == "Deployment") else {
        let replicas = rs.spec.and_then(|s| s.replicas).unwrap_or(1);
        return Ok(Some((owner.uid.clone(), replicas)));
    };
    Ok(get::<Deployment>(ctx, namespace, &d.name)
        .await?
        .filter(|dep| dep.metadata.uid.as_deref() == Some(d.uid.as_str()))
        .map(|dep| {
            let replicas = dep.spec.and_then(|s| s.replicas).unwrap_or(1);
            (d.uid.clone(), replicas)
        }))
}

async fn get<K>(ctx: &Ctx, namespace: &str, name: &str) -> Result<Option<K>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(Api::<K>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await?)
}
