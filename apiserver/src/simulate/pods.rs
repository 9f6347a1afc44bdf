//! Scheduler and kubelet: a Pod without a node is bound to the simulated Node
//! (a patch of `spec.nodeName`: the embedded server has no `pods/binding`); a Pod
//! on it is Pending (`ContainerCreating`) with an IP, then Running and Ready after
//! [`super::Settings::pod_ready_after`]. A Pod that does not restart
//! (`restartPolicy` Never or `OnFailure`) exits 0 as long after that: Succeeded.
//! Pods bound to other nodes are left alone.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::conditions::Conditions;
use super::{Ctx, Result};

/// Runs the scheduler and kubelet until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    Controller::new(
        Api::<Pod>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile, super::retry, ctx)
    .for_each(|_| async {})
    .await;
}

/// The phase of `pod` (`Pending` when it has none yet).
pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether `pod` is neither finished nor being deleted (kube's `IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// When `pod` became Ready (ms since the epoch), if it is.
fn ready_since(pod: &Pod) -> Option<i64> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(0, |t| t.0.as_millisecond())
        })
}

/// Whether `pod` is Ready.
pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Whether `pod` has been Ready for `min_ready_seconds` (kube's `IsPodAvailable`);
/// otherwise how long until it will have been, if it is Ready.
pub fn availability(pod: &Pod, min_ready_seconds: i32) -> Result<(), Option<Duration>> {
    let since = ready_since(pod).ok_or(None)?;
    let due = since + i64::from(min_ready_seconds) * 1000;
    let now = super::now_ms();
    if min_ready_seconds <= 0 || due <= now {
        Ok(())
    } else {
        Err(Some(Duration::from_millis(
            u64::try_from(due - now).unwrap_or_default(),
        )))
    }
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, name, uid) = super::identity(&pod.metadata)?;
    let spec = pod.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let node = ctx.settings.node.as_str();
    match spec.node_name.as_deref() {
        None | Some("") => {
            super::patch::<Pod>(&ctx, namespace, name, json!({"spec": {"nodeName": node}})).await?;
            return Ok(Action::await_change());
        }
        Some(other) if other != node => return Ok(Action::await_change()),
        Some(_) => {}
    }
    let delay = ctx.settings.pod_ready_after;
    let completes = spec
        .restart_policy
        .as_deref()
        .is_some_and(|p| p != "Always");
    let started = pod
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .is_some();
    // Pending is written at once; each later phase after `delay` in the one before.
    let (waiting_in, status) = match phase(&pod) {
        "Pending" if !started => (None, pending(&pod, uid)),
        "Pending" => (Some("Pending"), running(&pod, uid)),
        "Running" if completes => (Some("Running"), succeeded(&pod, uid)),
        _ => {
            ctx.forget(uid);
            return Ok(Action::await_change());
        }
    };
    if let Some(stage) = waiting_in {
        let waited = ctx.in_stage(uid, stage);
        if waited < delay {
            return Ok(Action::requeue(delay.saturating_sub(waited)));
        }
    }
    super::write_status(&ctx, &*pod, status).await?;
    Ok(Action::await_change())
}

/// The Pod IP of the Pod `uid`: from the node's range, unique by chance.
fn pod_ip(uid: &str) -> String {
    let digest = Sha256::digest(uid.as_bytes());
    format!("10.244.{}.{}", digest[0], 2 + digest[1] % 253)
}

/// A hex digest of `parts`, for container and image IDs.
fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    format!("{:x}", hasher.finalize())
}

/// `image` without its tag or digest.
fn repository(image: &str) -> &str {
    let image = image.split('@').next().unwrap_or(image);
    match image.rfind(':') {
        Some(colon) if !image[colon..].contains('/') => &image[..colon],
        _ => image,
    }
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| s.containers.as_slice())
}

/// kube's `QoS` class of `pod`.
fn qos_class(pod: &Pod) -> &'static str {
    let mut any = false;
    let mut guaranteed = true;
    for c in containers(pod) {
        let resources = c.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        let limits = resources.and_then(|r| r.limits.as_ref());
        any |= requests.is_some_and(|r| !r.is_empty()) || limits.is_some_and(|l| !l.is_empty());
        let full = ["cpu", "memory"].iter().all(|k| {
            limits.and_then(|l| l.get(*k)).is_some_and(|limit| {
                requests
                    .and_then(|r| r.get(*k))
                    .is_none_or(|request| request == limit)
            })
        });
        guaranteed &= full;
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// A container status in `state` (`{"waiting": ...}`, ...).
fn container_status(pod: &Pod, uid: &str, c: &Container, state: &Value, ready: bool) -> Value {
    let image = c.image.clone().unwrap_or_default();
    let mut status = json!({
        "name": c.name,
        "image": image,
        "imageID": "",
        "ready": ready,
        "restartCount": 0,
        "started": state.get("running").is_some(),
        "state": state,
    });
    if state.get("waiting").is_none() {
        let id = digest(&["image", &image]);
        status["imageID"] = json!(format!("{}@sha256:{id}", repository(&image)));
        status["containerID"] = json!(format!("containerd://{}", digest(&[uid, &c.name])));
    }
    if pod.status.is_some() {
        // The same start time through Running and Succeeded.
        if let Some(started) = started_at(pod, &c.name) {
            if let Some(s) = status["state"].get_mut("running") {
                s["startedAt"] = json!(started);
            }
            if let Some(s) = status["state"].get_mut("terminated") {
                s["startedAt"] = json!(started);
            }
        }
    }
    status
}

/// When the container `name` of `pod` started running, if it did.
fn started_at(pod: &Pod, name: &str) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    let status = statuses.iter().find(|s| s.name == name)?;
    let running = status.state.as_ref()?.running.as_ref()?;
    let started = running.started_at.as_ref()?;
    serde_json::to_value(started)
        .ok()?
        .as_str()
        .map(str::to_string)
}

fn names(pod: &Pod) -> String {
    containers(pod)
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pod conditions in kube's order, each `(type, status, reason)`.
fn conditions(pod: &Pod, wanted: &[(&str, bool, &str, String)]) -> Value {
    let live = Conditions::of(pod.status.as_ref().and_then(|s| s.conditions.as_ref()));
    wanted
        .iter()
        .map(|(kind, status, reason, message)| {
            let mut c = live.set(kind, *status, reason, message);
            c["lastProbeTime"] = Value::Null;
            c
        })
        .collect()
}

/// Scheduled, containers being created.
fn pending(pod: &Pod, uid: &str) -> Value {
    let unready = format!("containers with unready status: [{}]", names(pod));
    let waiting = json!({"waiting": {"reason": "ContainerCreating"}});
    let ip = pod_ip(uid);
    json!({
        "phase": "Pending",
        "hostIP": super::node::NODE_IP,
        "hostIPs": [{"ip": super::node::NODE_IP}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": super::now(),
        "qosClass": qos_class(pod),
        "conditions": conditions(pod, &[
            ("PodReadyToStartContainers", false, "", String::new()),
            ("Initialized", true, "", String::new()),
            ("Ready", false, "ContainersNotReady", unready.clone()),
            ("ContainersReady", false, "ContainersNotReady", unready),
            ("PodScheduled", true, "", String::new()),
        ]),
        "containerStatuses": containers(pod).iter()
            .map(|c| container_status(pod, uid, c, &waiting, false))
            .collect::<Vec<_>>(),
    })
}

/// Every container running and ready.
fn running(pod: &Pod, uid: &str) -> Value {
    let state = json!({"running": {"startedAt": super::now()}});
    json!({
        "phase": "Running",
        "conditions": conditions(pod, &[
            ("PodReadyToStartContainers", true, "", String::new()),
            ("Initialized", true, "", String::new()),
            ("Ready", true, "", String::new()),
            ("ContainersReady", true, "", String::new()),
            ("PodScheduled", true, "", String::new()),
        ]),
        "initContainerStatuses": init_containers(pod, uid),
        "containerStatuses": containers(pod).iter()
            .map(|c| container_status(pod, uid, c, &state, true))
            .collect::<Vec<_>>(),
    })
}

/// Init containers, all done.
fn init_containers(pod: &Pod, uid: &str) -> Value {
    let now = super::now();
    let done = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                                     "startedAt": now, "finishedAt": now}});
    let statuses: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .map(|c| container_status(pod, uid, c, &done, true))
        .collect();
    if statuses.is_empty() {
        Value::Null
    } else {
        json!(statuses)
    }
}

/// Every container exited 0.
fn succeeded(pod: &Pod, uid: &str) -> Value {
    let done = json!({"terminated": {"exitCode": 0, "reason": "Completed",
                                     "finishedAt": super::now()}});
    let completed = "PodCompleted";
    json!({
        "phase": "Succeeded",
        "conditions": conditions(pod, &[
            ("PodReadyToStartContainers", false, "", String::new()),
            ("Initialized", true, completed, String::new()),
            ("Ready", false, completed, String::new()),
            ("ContainersReady", false, completed, String::new()),
            ("PodScheduled", true, "", String::new()),
        ]),
        "containerStatuses": containers(pod).iter()
            .map(|c| container_status(pod, uid, c, &done, false))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_drop_tags_but_not_registry_ports() {
        assert_eq!(repository("nginx:1.27"), "nginx");
        assert_eq!(repository("registry:5000/app"), "registry:5000/app");
        assert_eq!(repository("registry:5000/app:v1"), "registry:5000/app");
        assert_eq!(repository("app@sha256:abc"), "app");
    }

    #[test]
    fn pod_ips_are_in_the_node_range() {
        let ip = pod_ip("some-uid");
        assert!(ip.starts_with("10.244."), "{ip}");
        assert_eq!(ip, pod_ip("some-uid"));
    }
}
