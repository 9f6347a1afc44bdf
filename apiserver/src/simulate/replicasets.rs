//! kube's replicaset controller: as many active Pods as `spec.replicas` (surplus
//! Pods go unready and newest first), and the counts in status. A Pod the server
//! refuses (an admission webhook, say) shows as a `ReplicaFailure` condition.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use serde_json::json;

use super::conditions::Conditions;
use super::pods::{availability, is_active, is_ready};
use super::template::{self, Name};
use super::{Ctx, Result};

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    super::control::<ReplicaSet, Pod, _, _>(ctx, reconcile).await;
}

async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action> {
    if rs.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name, uid) = super::identity(&rs.metadata)?;
    let spec = rs.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let desired = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
    let mut pods: Vec<Pod> = super::children::<Pod>(&ctx, namespace, uid)
        .await?
        .into_iter()
        .filter(is_active)
        .collect();
    let mut failure = None;
    if pods.len() < desired {
        let template = spec.template.clone().unwrap_or_default();
        let owner = super::owner_ref(&*rs)?;
        for _ in pods.len()..desired {
            let pod = template::pod(
                &template,
                Name::Generated(format!("{name}-")),
                owner.clone(),
            );
            match super::create(&ctx, namespace, &pod).await {
                Ok(pod) => pods.push(pod),
                Err(super::Error::Kube(kube::Error::Api(e))) if e.code < 500 => {
                    failure = Some(e.message);
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    } else if pods.len() > desired {
        // Unscheduled, then not ready, then the newest go first.
        pods.sort_by_key(|p| {
            let scheduled = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
            let created = p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            (scheduled, is_ready(p), std::cmp::Reverse(created))
        });
        for pod in pods.drain(..pods.len() - desired) {
            let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
            super::delete::<Pod>(&ctx, namespace, pod_name).await?;
        }
    }
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let ready = pods.iter().filter(|p| is_ready(p)).count();
    let mut available = 0;
    let mut next = None::<Duration>;
    for pod in &pods {
        match availability(pod, min_ready) {
            Ok(()) => available += 1,
            Err(Some(wait)) => next = Some(next.map_or(wait, |n| n.min(wait))),
            Err(None) => {}
        }
    }
    let conditions = Conditions::of(rs.status.as_ref().and_then(|s| s.conditions.as_ref()));
    let count = |n: usize| super::count(i32::try_from(n).unwrap_or(i32::MAX));
    let status = json!({
        "replicas": i32::try_from(pods.len()).unwrap_or(i32::MAX),
        "fullyLabeledReplicas": count(pods.len()),
        "readyReplicas": count(ready),
        "availableReplicas": count(available),
        "observedGeneration": rs.metadata.generation,
        "conditions": failure.as_ref().map(|message| {
            json!([conditions.set("ReplicaFailure", true, "FailedCreate", message)])
        }),
    });
    super::write_status(&ctx, &*rs, status).await?;
    Ok(match (failure, next) {
        // kube backs off creating Pods the server refused; so does this.
        (Some(_), _) => Action::requeue(Duration::from_secs(5)),
        (None, Some(wait)) => Action::requeue(wait),
        (None, None) => Action::await_change(),
    })
}
