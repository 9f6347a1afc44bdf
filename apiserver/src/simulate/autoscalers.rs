//! kube's horizontal pod autoscaler, with the metric given by hand. Each
//! autoscaling/v2 `HorizontalPodAutoscaler` scales its target through the
//! target's `scale` subresource, within `minReplicas` and `maxReplicas`,
//! from the load its annotation [`LOAD`] puts on the target's Pods (no
//! metrics server runs here): what they use together, in percent of one
//! Pod's request. `kubectl annotate hpa web simulate.gantry.dev/load=300`
//! is three Pods' worth: 100% utilization at 3 replicas, 50% at 6. The
//! load stays as set while the replicas change, as a steady demand would.
//!
//! As kube's controller: a target below `minReplicas` or above
//! `maxReplicas` is brought within them whatever the metric; otherwise each
//! `Resource` metric with a `Utilization` target wants
//! `ceil(current × utilization / target)` replicas, the utilization being
//! the load over the current replicas (no change when the ratio is within
//! 10% of 1); the largest wins, and the result is kept within the
//! bounds. A target at zero replicas is not scaled. Status carries
//! `currentReplicas`, `desiredReplicas`, `currentMetrics`, `lastScaleTime`
//! and the conditions `AbleToScale`, `ScalingActive` and `ScalingLimited`
//! with kube's reasons. Unlike kube there are no stabilization windows or
//! rate limits (`behavior`): the target goes to the desired count at once.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscaler, MetricSpec};
use kube::api::{Api, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::conditions::Conditions;
use super::{Ctx, Result};

/// The annotation on an HPA with the load on its target's Pods: what they
/// use together, a whole number of percent of one Pod's request.
pub const LOAD: &str = "simulate.gantry.dev/load";

/// kube's tolerance: a usage ratio this close to 1 changes nothing.
const TOLERANCE: f64 = 0.1;

/// Runs the controller until dropped.
pub async fn run(ctx: Arc<Ctx>) {
    Controller::new(
        Api::<HorizontalPodAutoscaler>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile, super::retry, ctx)
    .for_each(|_| async {})
    .await;
}

/// A `Resource` metric with a `Utilization` target: its resource name and
/// target percentage.
fn utilization_target(metric: &MetricSpec) -> Option<(&str, i32)> {
    let resource = metric
        .resource
        .as_ref()
        .filter(|_| metric.type_ == "Resource")?;
    let target = &resource.target;
    (target.type_ == "Utilization")
        .then_some(())
        .and(target.average_utilization)
        .map(|t| (resource.name.as_str(), t))
}

/// What the metrics say for `current` replicas under `load`: the replicas
/// wanted, the resource that wants the most and the utilization, or why
/// nothing can be said (reason, message).
fn from_metrics(
    metrics: &[(&str, i32)],
    load: Option<&str>,
    current: i32,
) -> std::result::Result<(i32, String, u32), (&'static str, String)> {
    let Some(text) = load else {
        return Err((
            "FailedGetResourceMetric",
            format!(
                "the HPA was unable to compute the replica count: no load is simulated: annotate the HPA with {LOAD}=PERCENT"
            ),
        ));
    };
    let Ok(load) = text.trim().parse::<u32>() else {
        return Err((
            "FailedGetResourceMetric",
            format!(
                "the HPA was unable to compute the replica count: {LOAD} is not a whole number of percent: {text:?}"
            ),
        ));
    };
    let utilization = f64::from(load) / f64::from(current.max(1));
    let mut best: Option<(i32, &str)> = None;
    for (name, target) in metrics {
        let ratio = utilization / f64::from((*target).max(1));
        let wanted = if (ratio - 1.0).abs() <= TOLERANCE {
            current
        } else {
            // Saturates far above any maxReplicas.
            #[allow(clippy::cast_possible_truncation)]
            let wanted = (ratio * f64::from(current)).ceil().min(f64::from(i32::MAX)) as i32;
            wanted
        };
        if best.is_none_or(|(most, _)| wanted > most) {
            best = Some((wanted, name));
        }
    }
    // A whole percentage, as kube reports it.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let percent = utilization.round() as u32;
    best.map(|(wanted, name)| (wanted, name.to_string(), percent)).ok_or((
        "InvalidMetricSourceType",
        "the HPA was unable to compute the replica count: the simulation reads only Resource metrics with a Utilization target".to_string(),
    ))
}

/// `desired` within `[min, max]`, and the `ScalingLimited` condition's
/// status, reason and message.
fn bounded(desired: i32, min: i32, max: i32) -> (i32, bool, &'static str, &'static str) {
    if desired > max {
        (
            max,
            true,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    } else if desired < min {
        (
            min,
            true,
            "TooFewReplicas",
            "the desired replica count is less than the minimum replica count",
        )
    } else {
        (
            desired,
            false,
            "DesiredWithinRange",
            "the desired count is within the acceptable range",
        )
    }
}

/// The target's API, found by discovery (any kind with a scale subresource).
async fn target_api(
    ctx: &Ctx,
    namespace: &str,
    api_version: &str,
    kind: &str,
) -> std::result::Result<Api<DynamicObject>, String> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(&ctx.client, &gvk)
        .await
        .map_err(|e| format!("no {kind} in {api_version}: {e}"))?;
    Ok(Api::namespaced_with(
        ctx.client.clone(),
        namespace,
        &resource,
    ))
}

async fn reconcile(hpa: Arc<HorizontalPodAutoscaler>, ctx: Arc<Ctx>) -> Result<Action> {
    let every = ctx.settings.autoscaler_sync;
    if hpa.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (namespace, _, _) = super::identity(&hpa.metadata)?;
    let spec = hpa.spec.as_ref().ok_or(super::Error::Missing("spec"))?;
    let live = Conditions::of(hpa.status.as_ref().and_then(|s| s.conditions.as_ref()));
    let target = &spec.scale_target_ref;
    let api_version = target.api_version.as_deref().unwrap_or("v1");
    let scale = match target_api(&ctx, namespace, api_version, &target.kind).await {
        Ok(api) => api
            .get_scale(&target.name)
            .await
            .map(|s| (api, s))
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    let (api, mut scale) = match scale {
        Ok(found) => found,
        Err(error) => {
            let message =
                format!("the HPA controller was unable to get the target's current scale: {error}");
            let status = json!({
                "observedGeneration": hpa.metadata.generation,
                "desiredReplicas": 0,
                "conditions": [live.set("AbleToScale", false, "FailedGetScale", &message)],
            });
            super::write_status(&ctx, hpa.as_ref(), status).await?;
            return Ok(Action::requeue(every));
        }
    };
    let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    let (min, max) = (spec.min_replicas.unwrap_or(1), spec.max_replicas);
    let metrics: Vec<(&str, i32)> = match spec.metrics.as_deref() {
        None | Some([]) => vec![("cpu", 80)],
        Some(metrics) => metrics.iter().filter_map(utilization_target).collect(),
    };
    let load = hpa
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LOAD))
        .map(String::as_str);
    let mut conditions = Vec::new();
    let mut current_metrics = Value::Null;
    // Whether the count was computed (from the bounds or the metrics).
    let mut computed = true;
    let desired = if current == 0 && min != 0 {
        computed = false;
        conditions.push(live.set(
            "ScalingActive",
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero",
        ));
        current
    } else if current > max || current < min {
        let (desired, limited, reason, message) = bounded(current, min, max);
        conditions.push(live.set("ScalingLimited", limited, reason, message));
        desired
    } else {
        match from_metrics(&metrics, load, current) {
            Ok((wanted, resource, percent)) => {
                conditions.push(live.set(
                    "ScalingActive",
                    true,
                    "ValidMetricFound",
                    &format!("the HPA was able to successfully calculate a replica count from {resource} resource utilization (percentage of request)"),
                ));
                let (desired, limited, reason, message) = bounded(wanted, min, max);
                conditions.push(live.set("ScalingLimited", limited, reason, message));
                current_metrics = metrics
                    .iter()
                    .map(|(name, _)| {
                        json!({"type": "Resource", "resource": {"name": name,
                        "current": {"averageUtilization": percent}}})
                    })
                    .collect();
                desired
            }
            Err((reason, message)) => {
                computed = false;
                conditions.push(live.set("ScalingActive", false, reason, &message));
                current
            }
        }
    };
    let rescaled = desired != current;
    let able = if rescaled {
        scale.spec.get_or_insert_default().replicas = Some(desired);
        let params = PostParams {
            field_manager: Some(super::FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        api.replace_scale(&target.name, &params, &scale).await?;
        live.set(
            "AbleToScale",
            true,
            "SucceededRescale",
            &format!("the HPA controller was able to update the target scale to {desired}"),
        )
    } else if computed {
        live.set(
            "AbleToScale",
            true,
            "ReadyForNewScale",
            "recommended size matches current size",
        )
    } else {
        live.set(
            "AbleToScale",
            true,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        )
    };
    conditions.insert(0, able);
    let mut status = json!({
        "observedGeneration": hpa.metadata.generation,
        "currentReplicas": super::count(current),
        "desiredReplicas": desired,
        "currentMetrics": current_metrics,
        "conditions": conditions,
    });
    if rescaled {
        status["lastScaleTime"] = json!(super::now());
    }
    super::write_status(&ctx, hpa.as_ref(), status).await?;
    Ok(Action::requeue(every))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_over_the_replicas_is_the_utilization_that_scales_them() {
        let cpu = [("cpu", 50)];
        // Three Pods' worth at 3 replicas: 100%, twice the target.
        assert_eq!(
            from_metrics(&cpu, Some("300"), 3),
            Ok((6, "cpu".into(), 100))
        );
        // At 6 the same load is 50%: the count holds.
        assert_eq!(
            from_metrics(&cpu, Some("300"), 6),
            Ok((6, "cpu".into(), 50))
        );
        // Within 10% of the target: no change.
        assert_eq!(
            from_metrics(&cpu, Some("162"), 3),
            Ok((3, "cpu".into(), 54))
        );
        assert_eq!(from_metrics(&cpu, Some("40"), 4), Ok((1, "cpu".into(), 10)));
        // The metric wanting the most replicas wins.
        let both = [("cpu", 50), ("memory", 25)];
        assert_eq!(
            from_metrics(&both, Some("200"), 2),
            Ok((8, "memory".into(), 100))
        );
    }

    #[test]
    fn without_a_usable_metric_nothing_is_computed() {
        let (reason, message) = from_metrics(&[("cpu", 50)], None, 3).unwrap_err();
        assert_eq!(reason, "FailedGetResourceMetric");
        assert!(message.contains(LOAD), "{message}");
        let (_, message) = from_metrics(&[("cpu", 50)], Some("lots"), 3).unwrap_err();
        assert!(message.contains("\"lots\""), "{message}");
        let (reason, _) = from_metrics(&[], Some("100"), 3).unwrap_err();
        assert_eq!(reason, "InvalidMetricSourceType");
    }

    #[test]
    fn the_count_stays_within_min_and_max() {
        assert_eq!(bounded(12, 2, 8).0, 8);
        assert_eq!(bounded(12, 2, 8).2, "TooManyReplicas");
        assert_eq!(bounded(1, 2, 8).0, 2);
        assert_eq!(
            bounded(5, 2, 8),
            (
                5,
                false,
                "DesiredWithinRange",
                "the desired count is within the acceptable range"
            )
        );
    }
}
