//! kube's deployment controller: one ReplicaSet per pod template, named
//! `NAME-HASH` with the `pod-template-hash` label, and numbered revisions. A
//! rollout scales the new ReplicaSet to `spec.replicas` at once and the old ones to
//! zero once it is available (`RollingUpdate`), or the old ones first (Recreate).
//! Status counts the ReplicaSets' Pods and carries kube's `Available` and
//! `Progressing` conditions. Old ReplicaSets beyond `revisionHistoryLimit` go.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::controller::Action;
use serde_json::json;

use super::conditions::Conditions;
use super::template::{self, POD_TEMPLATE_HASH};
use super::{Ctx, Result};

/// The annotation with a Deployment's (and its ReplicaSets') revision.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    super::control::<Deployment, ReplicaSet, _, _>(ctx, reconcile).await;
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn counts(rs: &ReplicaSet) -> (i32, i32, i32) {
    rs.status.as_ref().map_or((0, 0, 0), |s| {
        (
            s.replicas,
            s.ready_replicas.unwrap_or(0),
            s.available_replicas.unwrap_or(0),
        )
    })
}

/// `value` of `total` (a count or a percentage), rounded up or down.
fn scaled(value: Option<&IntOrString>, total: i32, default: &str, up: bool) -> i32 {
    let percent = |p: &str| p.trim_end_matches('%').parse::<i64>().unwrap_or(25);
    let n = match value {
        Some(IntOrString::Int(n)) => return *n,
        Some(IntOrString::String(p)) => percent(p),
        None => percent(default),
    } * i64::from(total);
    let n = if up { (n + 99) / 100 } else { n / 100 };
    i32::try_from(n).unwrap_or(total)
}

/// kube's `MaxUnavailable` and `MaxSurge` of a Deployment.
fn unavailable_and_surge(spec: &DeploymentSpec, replicas: i32) -> (i32, i32) {
    let strategy = spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") || replicas == 0 {
        return (0, 0);
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let surge = scaled(
        rolling.and_then(|r| r.max_surge.as_ref()),
        replicas,
        "25%",
        true,
    );
    let unavailable = scaled(
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        replicas,
        "25%",
        false,
    );
    if surge == 0 && unavailable == 0 {
        (1, 0)
    } else {
        (unavailable.min(replicas), surge)
    }
}

/// A new ReplicaSet for `d`'s template, at `revision`.
fn new_replica_set(d: &Deployment, spec: &DeploymentSpec, revision: i64) -> Result<ReplicaSet> {
    let (_, name, _) = super::identity(&d.metadata)?;
    let hash = template::hash(&spec.template);
    let hash_label = BTreeMap::from([(POD_TEMPLATE_HASH.to_string(), hash.clone())]);
    let template = template::with_labels(&spec.template, &hash_label);
    let mut selector: LabelSelector = spec.selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .extend(hash_label.clone());
    Ok(ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{hash}")),
            labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
            annotations: Some(BTreeMap::from([(
                REVISION.to_string(),
                revision.to_string(),
            )])),
            owner_references: Some(vec![super::owner_ref(d)?]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    })
}

async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action> {
    if d.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name, uid) = super::identity(&d.metadata)?;
    let spec = d.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let replicas = spec.replicas.unwrap_or(1);
    let (_, max_surge) = unavailable_and_surge(spec, replicas);
    let owned: Vec<ReplicaSet> = super::children(&ctx, namespace, uid).await?;
    let max_revision = owned.iter().map(revision).max().unwrap_or(0);
    let existing = owned.iter().find(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| template::same_ignoring_hash(t, &spec.template))
    });
    let mut created = false;
    let mut new = match existing {
        Some(rs) => rs.clone(),
        None if spec.paused == Some(true) => return write(&ctx, &d, &owned, None, false).await,
        None => {
            created = true;
            let rs = new_replica_set(&d, spec, max_revision + 1)?;
            match super::create(&ctx, namespace, &rs).await {
                Ok(rs) => rs,
                // Made by an earlier reconcile this one did not see yet.
                Err(super::Error::Kube(kube::Error::Api(e))) if e.code == 409 => {
                    return Ok(Action::requeue(std::time::Duration::from_millis(200)));
                }
                Err(e) => return Err(e),
            }
        }
    };
    let new_name = new.metadata.name.clone().unwrap_or_default();
    let olds: Vec<&ReplicaSet> = owned
        .iter()
        .filter(|rs| rs.metadata.uid != new.metadata.uid)
        .collect();
    // A rollback to an older template makes its ReplicaSet the newest revision.
    let mut new_revision = revision(&new);
    if !created && new_revision < max_revision {
        new_revision = max_revision + 1;
    }
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let olds_gone = olds.iter().all(|rs| counts(rs).0 == 0);
    let new_target = if recreate && !olds_gone { 0 } else { replicas };
    let annotations = json!({
        REVISION: new_revision.to_string(),
        "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
        "deployment.kubernetes.io/max-replicas": (replicas + max_surge).to_string(),
    });
    let stale_annotations = annotations.as_object().into_iter().flatten().any(|(k, v)| {
        new.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(k))
            .map(String::as_str)
            != v.as_str()
    });
    if spec_replicas(&new) != new_target || stale_annotations {
        super::patch::<ReplicaSet>(
            &ctx,
            namespace,
            &new_name,
            json!({"metadata": {"annotations": annotations}, "spec": {"replicas": new_target}}),
        )
        .await?;
        if let Some(s) = new.spec.as_mut() {
            s.replicas = Some(new_target);
        }
    }
    // Old ReplicaSets go to zero once the new one is available (`RollingUpdate`), or
    // at once (Recreate).
    let (_, _, new_available) = counts(&new);
    if recreate || (spec_replicas(&new) == replicas && new_available >= replicas) {
        for rs in olds.iter().filter(|rs| spec_replicas(rs) != 0) {
            let old = rs.metadata.name.as_deref().unwrap_or_default();
            super::patch::<ReplicaSet>(&ctx, namespace, old, json!({"spec": {"replicas": 0}}))
                .await?;
        }
    }
    // History: the oldest empty ReplicaSets beyond the limit.
    let limit = usize::try_from(spec.revision_history_limit.unwrap_or(10)).unwrap_or(0);
    let mut empty: Vec<&&ReplicaSet> = olds
        .iter()
        .filter(|rs| spec_replicas(rs) == 0 && counts(rs).0 == 0)
        .collect();
    if olds.len() > limit {
        empty.sort_by_key(|rs| revision(rs));
        for rs in empty.iter().take(olds.len() - limit) {
            let old = rs.metadata.name.as_deref().unwrap_or_default();
            super::delete::<ReplicaSet>(&ctx, namespace, old).await?;
        }
    }
    let live_revision = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION));
    if live_revision != Some(&new_revision.to_string()) {
        super::patch::<Deployment>(
            &ctx,
            namespace,
            name,
            json!({"metadata": {"annotations": {REVISION: new_revision.to_string()}}}),
        )
        .await?;
    }
    write(&ctx, &d, &owned, Some(&new), created).await
}

/// Writes the status of `d` from its ReplicaSets `owned` (`new` among them, or
/// just created).
async fn write(
    ctx: &Ctx,
    d: &Deployment,
    owned: &[ReplicaSet],
    new: Option<&ReplicaSet>,
    created: bool,
) -> Result<Action> {
    let spec = d.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let replicas = spec.replicas.unwrap_or(1);
    let (max_unavailable, _) = unavailable_and_surge(spec, replicas);
    let (mut total, mut ready, mut available) = (0, 0, 0);
    for rs in owned {
        let (t, r, a) = counts(rs);
        total += t;
        ready += r;
        available += a;
    }
    let (updated, new_available) = new.map_or((0, 0), |rs| {
        let (t, _, a) = counts(rs);
        (t, a)
    });
    let new_name = new
        .and_then(|rs| rs.metadata.name.clone())
        .unwrap_or_default();
    let live = Conditions::of(d.status.as_ref().and_then(|s| s.conditions.as_ref()));
    let is_available = available >= replicas - max_unavailable;
    let complete = updated == replicas && total == replicas && new_available == replicas;
    let progressing = if spec.paused == Some(true) {
        live.updated(
            "Progressing",
            false,
            "DeploymentPaused",
            "Deployment is paused",
        )
    } else if created {
        let message = format!("Created new replica set \"{new_name}\"");
        live.updated("Progressing", true, "NewReplicaSetCreated", &message)
    } else if complete {
        let message = format!("ReplicaSet \"{new_name}\" has successfully progressed.");
        live.updated("Progressing", true, "NewReplicaSetAvailable", &message)
    } else {
        let message = format!("ReplicaSet \"{new_name}\" is progressing.");
        live.updated("Progressing", true, "ReplicaSetUpdated", &message)
    };
    let available_condition = if is_available {
        live.updated(
            "Available",
            true,
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.",
        )
    } else {
        live.updated(
            "Available",
            false,
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    };
    let mut conditions = vec![available_condition, progressing];
    // A ReplicaSet that cannot make its Pods says why, on the Deployment too.
    if let Some(failure) = owned
        .iter()
        .filter_map(|rs| rs.status.as_ref()?.conditions.as_ref())
        .flatten()
        .find(|c| c.type_ == "ReplicaFailure" && c.status == "True")
    {
        conditions.push(live.updated(
            "ReplicaFailure",
            true,
            failure.reason.as_deref().unwrap_or("FailedCreate"),
            failure.message.as_deref().unwrap_or_default(),
        ));
    }
    let status = json!({
        "observedGeneration": d.metadata.generation,
        "replicas": super::count(total),
        "updatedReplicas": super::count(updated),
        "readyReplicas": super::count(ready),
        "availableReplicas": super::count(available),
        "unavailableReplicas": super::count((replicas - available).max(0)),
        "conditions": conditions,
    });
    super::write_status(ctx, d, status).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(strategy: &serde_json::Value) -> DeploymentSpec {
        serde_json::from_value(json!({
            "selector": {}, "template": {}, "strategy": strategy
        }))
        .unwrap()
    }

    #[test]
    fn max_unavailable_rounds_down_and_max_surge_up() {
        let d = spec(&json!({"type": "RollingUpdate",
                            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}));
        assert_eq!(unavailable_and_surge(&d, 3), (0, 1));
        assert_eq!(unavailable_and_surge(&d, 4), (1, 1));
        let d = spec(&json!({"type": "RollingUpdate",
                            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}));
        assert_eq!(unavailable_and_surge(&d, 3), (1, 0));
        assert_eq!(
            unavailable_and_surge(&spec(&json!({"type": "Recreate"})), 3),
            (0, 0)
        );
    }
}
