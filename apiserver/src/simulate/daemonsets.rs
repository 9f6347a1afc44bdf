//! kube's daemonset controller, for the one simulated Node: one Pod bound to it
//! (node selectors and tolerations aside), replaced when the template changes
//! (`RollingUpdate`), and the counts in status.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use serde_json::json;

use super::pods::{availability, is_active, is_ready};
use super::template::{self, Name, REVISION_HASH};
use super::{Ctx, Result};

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    super::control::<DaemonSet, Pod, _, _>(ctx, reconcile).await;
}

async fn reconcile(set: Arc<DaemonSet>, ctx: Arc<Ctx>) -> Result<Action> {
    if set.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name, uid) = super::identity(&set.metadata)?;
    let spec = set.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let revision = format!("{name}-{}", template::hash(&spec.template));
    let mut pods: Vec<Pod> = super::children::<Pod>(&ctx, namespace, uid)
        .await?
        .into_iter()
        .filter(is_active)
        .collect();
    // One Pod per node: the newest of the current revision stays.
    pods.sort_by_key(|p| {
        (
            template::revision_of(p) != Some(revision.as_str()),
            std::cmp::Reverse(p.metadata.creation_timestamp.as_ref().map(|t| t.0)),
        )
    });
    let rolling = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        != Some("OnDelete");
    let outdated = pods
        .first()
        .is_some_and(|p| template::revision_of(p) != Some(revision.as_str()));
    let keep = usize::from(!(rolling && outdated));
    for pod in pods.drain(keep.min(pods.len())..) {
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        super::delete::<Pod>(&ctx, namespace, pod_name).await?;
    }
    if pods.is_empty() {
        let labels = BTreeMap::from([(REVISION_HASH.to_string(), revision.clone())]);
        let mut pod = template::pod(
            &template::with_labels(&spec.template, &labels),
            Name::Generated(format!("{name}-")),
            super::owner_ref(&*set)?,
        );
        if let Some(pod_spec) = pod.spec.as_mut() {
            pod_spec.node_name = Some(ctx.settings.node.clone());
        }
        pods.push(super::create(&ctx, namespace, &pod).await?);
    }
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let count = |f: &dyn Fn(&Pod) -> bool| i32::from(pods.iter().any(f));
    let available = count(&|p| availability(p, min_ready).is_ok());
    let status = json!({
        "observedGeneration": set.metadata.generation,
        "desiredNumberScheduled": 1,
        "currentNumberScheduled": 1,
        "numberMisscheduled": 0,
        "numberReady": count(&|p| is_ready(p)),
        "numberAvailable": super::count(available),
        "numberUnavailable": super::count(1 - available),
        "updatedNumberScheduled": super::count(count(&|p| template::revision_of(p) == Some(revision.as_str()))),
    });
    super::write_status(&ctx, &*set, status).await?;
    // A Pod Ready for less than `minReadySeconds` becomes available later.
    let waiting = pods
        .iter()
        .find_map(|p| availability(p, min_ready).err().flatten());
    Ok(waiting.map_or_else(Action::await_change, Action::requeue))
}
