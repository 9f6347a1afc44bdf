//! kube's job controller: up to `parallelism` Pods at a time until `completions`
//! have succeeded (the simulated kubelet lets every Pod of a Job exit 0), then the
//! `SuccessCriteriaMet` and `Complete` conditions and `completionTime`. Suspended
//! Jobs make no Pods; Indexed Jobs get no completion indexes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use super::conditions::Conditions;
use super::pods::{is_active, is_ready, phase};
use super::template::{self, Name};
use super::{Ctx, Result};

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    super::control::<Job, Pod, _, _>(ctx, reconcile).await;
}

fn finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action> {
    if job.metadata.deletion_timestamp.is_some() || finished(&job) {
        return Ok(Action::await_change());
    }
    let (namespace, name, uid) = super::identity(&job.metadata)?;
    let spec = job.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let pods: Vec<Pod> = super::children(&ctx, namespace, uid).await?;
    let succeeded = pods.iter().filter(|p| phase(p) == "Succeeded").count();
    let failed = pods.iter().filter(|p| phase(p) == "Failed").count();
    let mut active: Vec<Pod> = pods.into_iter().filter(is_active).collect();
    let parallelism = usize::try_from(spec.parallelism.unwrap_or(1)).unwrap_or(0);
    let completions = spec.completions.and_then(|c| usize::try_from(c).ok());
    let complete = match completions {
        Some(n) => succeeded >= n,
        // A work queue: done when one succeeded and none is left running.
        None => succeeded > 0 && active.is_empty(),
    };
    let wanted = match completions {
        _ if complete || spec.suspend == Some(true) => 0,
        Some(n) => parallelism.min(n - succeeded),
        None if succeeded > 0 => 0,
        None => parallelism,
    };
    if active.len() < wanted {
        let labels = BTreeMap::from(
            [
                ("batch.kubernetes.io/controller-uid", uid),
                ("batch.kubernetes.io/job-name", name),
                ("controller-uid", uid),
                ("job-name", name),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let template = template::with_labels(&spec.template, &labels);
        let owner = super::owner_ref(&*job)?;
        for _ in active.len()..wanted {
            let pod = template::pod(
                &template,
                Name::Generated(format!("{name}-")),
                owner.clone(),
            );
            active.push(super::create(&ctx, namespace, &pod).await?);
        }
    }
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let live = Conditions::of(job.status.as_ref().and_then(|s| s.conditions.as_ref()));
    let start = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(super::now()));
    let mut status = json!({
        "startTime": start,
        "active": super::count(count(active.len())),
        "ready": count(active.iter().filter(|p| is_ready(p)).count()),
        "succeeded": super::count(count(succeeded)),
        "failed": super::count(count(failed)),
        "terminating": 0,
        "uncountedTerminatedPods": {},
    });
    if complete {
        let message = "Reached expected number of succeeded pods";
        status["conditions"] = json!([
            live.set("SuccessCriteriaMet", true, "CompletionsReached", message),
            live.set("Complete", true, "CompletionsReached", message),
        ]);
        status["completionTime"] = json!(super::now());
        for c in status["conditions"].as_array_mut().into_iter().flatten() {
            c["lastProbeTime"] = c["lastTransitionTime"].clone();
        }
    } else if spec.suspend == Some(true) {
        status["conditions"] =
            json!([live.set("Suspended", true, "JobSuspended", "Job suspended")]);
    } else {
        status["conditions"] = Value::Null;
    }
    super::write_status(&ctx, &*job, status).await?;
    Ok(Action::await_change())
}
