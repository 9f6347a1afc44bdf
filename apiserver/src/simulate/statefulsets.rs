//! kube's statefulset controller: Pods `NAME-0` … `NAME-(n-1)`, made in order,
//! each once the one before is Running and Ready (`OrderedReady`), or all at once
//! (`Parallel`); removed from the highest ordinal down. A new template rolls out
//! from the highest ordinal down to the partition, one Pod at a time. Revisions
//! are `NAME-HASH` (kube keeps them in `ControllerRevisions`, not made here; nor are
//! the `PersistentVolumeClaims` of `volumeClaimTemplates`).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use serde_json::json;

use super::pods::{availability, is_active, is_ready};
use super::template::{self, Name, REVISION_HASH};
use super::{Ctx, Result};

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    super::control::<StatefulSet, Pod, _, _>(ctx, reconcile).await;
}

/// The ordinal of `pod` of the StatefulSet `set`, from its name.
fn ordinal(set: &str, pod: &Pod) -> Option<i32> {
    pod.metadata
        .name
        .as_deref()?
        .strip_prefix(set)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Ctx>) -> Result<Action> {
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name, uid) = super::identity(&set.metadata)?;
    let spec = set.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let replicas = spec.replicas.unwrap_or(1);
    let update_revision = format!("{name}-{}", template::hash(&spec.template));
    let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
    let mut pods: BTreeMap<i32, Pod> = super::children::<Pod>(&ctx, namespace, uid)
        .await?
        .into_iter()
        .filter(is_active)
        .filter_map(|p| Some((ordinal(name, &p)?, p)))
        .collect();
    let all_ready = |pods: &BTreeMap<i32, Pod>| pods.values().all(is_ready);
    let owner = super::owner_ref(&*set)?;
    // Scale up, in order.
    for i in 0..replicas {
        if let Some(pod) = pods.get(&i) {
            if !parallel && !is_ready(pod) {
                break;
            }
            continue;
        }
        let pod_name = format!("{name}-{i}");
        let labels = BTreeMap::from([
            (REVISION_HASH.to_string(), update_revision.clone()),
            (
                "statefulset.kubernetes.io/pod-name".to_string(),
                pod_name.clone(),
            ),
            ("apps.kubernetes.io/pod-index".to_string(), i.to_string()),
        ]);
        let mut pod = template::pod(
            &template::with_labels(&spec.template, &labels),
            Name::Fixed(pod_name.clone()),
            owner.clone(),
        );
        if let Some(pod_spec) = pod.spec.as_mut() {
            pod_spec.hostname = Some(pod_name);
            pod_spec.subdomain = spec.service_name.clone().filter(|s| !s.is_empty());
        }
        match super::create(&ctx, namespace, &pod).await {
            Ok(pod) => {
                pods.insert(i, pod);
            }
            // A Pod of the same name is still there (being deleted): wait for it.
            Err(super::Error::Kube(kube::Error::Api(e))) if e.code == 409 => break,
            Err(e) => return Err(e),
        }
        if !parallel {
            break;
        }
    }
    // Scale down from the highest ordinal; one at a time unless Parallel.
    let surplus: Vec<i32> = pods.range(replicas..).map(|(i, _)| *i).rev().collect();
    if !surplus.is_empty() && (parallel || all_ready(&pods)) {
        for i in surplus
            .iter()
            .take(if parallel { surplus.len() } else { 1 })
        {
            if let Some(pod) = pods.remove(i) {
                let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
                super::delete::<Pod>(&ctx, namespace, pod_name).await?;
            }
        }
    }
    // Roll out a new template: the highest outdated Pod at or above the partition.
    let strategy = spec.update_strategy.as_ref();
    let rolling = strategy.and_then(|s| s.type_.as_deref()) != Some("OnDelete");
    let partition = strategy
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let complete = pods.len() == usize::try_from(replicas).unwrap_or(0) && all_ready(&pods);
    if rolling && complete {
        let outdated = pods
            .range(partition..)
            .rev()
            .find(|(_, p)| template::revision_of(p) != Some(update_revision.as_str()))
            .map(|(i, _)| *i);
        if let Some(pod) = outdated.and_then(|i| pods.remove(&i)) {
            let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
            super::delete::<Pod>(&ctx, namespace, pod_name).await?;
        }
    }
    write(&ctx, &set, &pods, &update_revision).await
}

async fn write(
    ctx: &Ctx,
    set: &StatefulSet,
    pods: &BTreeMap<i32, Pod>,
    update_revision: &str,
) -> Result<Action> {
    let spec = set.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let replicas = spec.replicas.unwrap_or(1);
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let ready = pods.values().filter(|p| is_ready(p)).count();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let available = pods
        .values()
        .filter(|p| availability(p, min_ready).is_ok())
        .count();
    let updated = pods
        .values()
        .filter(|p| template::revision_of(p) == Some(update_revision))
        .count();
    let live = set.status.as_ref();
    let mut current_revision = live
        .and_then(|s| s.current_revision.clone())
        .unwrap_or_else(|| update_revision.to_string());
    if count(updated) == replicas && count(ready) == replicas {
        current_revision = update_revision.to_string();
    }
    let current = pods
        .values()
        .filter(|p| template::revision_of(p) == Some(current_revision.as_str()))
        .count();
    let status = json!({
        "observedGeneration": set.metadata.generation,
        "replicas": count(pods.len()),
        "readyReplicas": super::count(count(ready)),
        "availableReplicas": count(available),
        "currentReplicas": super::count(count(current)),
        "updatedReplicas": super::count(count(updated)),
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": 0,
    });
    super::write_status(ctx, set, status).await?;
    let waiting = pods
        .values()
        .any(|p| availability(p, min_ready).is_err() && is_ready(p));
    Ok(if waiting {
        Action::requeue(std::time::Duration::from_secs(1))
    } else {
        Action::await_change()
    })
}
