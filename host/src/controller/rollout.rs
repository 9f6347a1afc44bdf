//! Shadow runs: before a new version of a binding replaces the running
//! one, it answers every parent in the cache with the request the running
//! version would get, in the sandbox, writing nothing; its answers are
//! compared with the running version's. A version that fails where the
//! running one succeeds (an error, a trap, a limit, a guardrail or a
//! guardrail policy), or that would change more parents than the binding
//! allows, is refused and the running one keeps serving.

use std::sync::Arc;

use futures::StreamExt;
use gantry_sdk::Trigger;
use kube::api::DynamicObject;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use super::binding::BindingSpec;
use super::context::{BindingContext, object_key};
use super::reconcile::{checked_intents, request};
use crate::runtime::ReconcilerPlugin;

/// Plugin calls of a shadow run at once (each pair: running and new).
const CONCURRENCY: usize = 8;
/// Failing parents named in a refusal.
const EXAMPLES: usize = 3;

/// How many parents a new version may change: a count, or a percentage of
/// the parents compared (`"10%"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Threshold {
    /// At most this many parents.
    Count(u64),
    /// At most this percentage of the parents compared.
    Percent(f64),
}

impl Threshold {
    /// Whether `changed` of `compared` parents is over the threshold.
    pub fn exceeded(self, changed: u64, compared: u64) -> bool {
        match self {
            Threshold::Count(n) => changed > n,
            #[allow(clippy::cast_precision_loss)] // parent counts are far below 2^52
            Threshold::Percent(p) => (changed as f64) > p / 100.0 * compared as f64,
        }
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(u64),
            Text(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Count(n) => Ok(Threshold::Count(n)),
            Raw::Text(text) => {
                let percent = text
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p));
                percent.map(Threshold::Percent).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{text:?} is neither a count nor a percentage like \"10%\""
                    ))
                })
            }
        }
    }
}

/// The `rollout` of a binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    /// Shadow-run each new version before it serves (default true).
    #[serde(default = "yes")]
    pub shadow: bool,
    /// Parents on which the new version may fail where the running one
    /// succeeds (default 0).
    #[serde(default)]
    pub max_failures: u64,
    /// Parents the new version may change; none: any number.
    #[serde(default)]
    pub max_changed_parents: Option<Threshold>,
}

fn yes() -> bool {
    true
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self {
            shadow: true,
            max_failures: 0,
            max_changed_parents: None,
        }
    }
}

/// What a shadow run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShadowReport {
    /// Parents both versions answered.
    pub compared: u64,
    /// Parents the new version answers as the running one does.
    pub unchanged: u64,
    /// Parents the new version answers otherwise.
    pub changed: u64,
    /// Parents on which the new version fails and the running one does not.
    pub failed: u64,
    /// Up to three failing parents, with the new version's error.
    pub examples: Vec<(String, String)>,
}

impl ShadowReport {
    /// One line for Events: the counts.
    pub fn summary(&self) -> String {
        format!(
            "shadow run on {} parents: {} unchanged, {} changed, {} failed",
            self.compared, self.unchanged, self.changed, self.failed
        )
    }

    /// Why the new version may not serve under `rollout`, if it may not.
    pub fn refusal(&self, rollout: &RolloutSpec) -> Option<String> {
        if self.failed > rollout.max_failures {
            let examples: Vec<String> = self
                .examples
                .iter()
                .map(|(parent, error)| format!("{parent}: {error}"))
                .collect();
            return Some(format!(
                "{}; the new version fails where the running one succeeds (at most {} allowed), e.g. {}",
                self.summary(),
                rollout.max_failures,
                examples.join("; ")
            ));
        }
        if let Some(threshold) = rollout.max_changed_parents
            && threshold.exceeded(self.changed, self.compared)
        {
            let limit = match threshold {
                Threshold::Count(n) => n.to_string(),
                Threshold::Percent(p) => format!("{p}%"),
            };
            return Some(format!(
                "{}; more parents would change than maxChangedParents ({limit}) allows",
                self.summary()
            ));
        }
        None
    }
}

/// The answer of one version for one parent, comparable across versions:
/// the children as they would be applied, the status and the conditions.
async fn answer(
    ctx: &BindingContext,
    parent: &DynamicObject,
    plugin: &Arc<ReconcilerPlugin>,
    spec: &BindingSpec,
) -> Result<Value, String> {
    let request = request(ctx, parent, spec, Trigger::Resync);
    let response = plugin
        .reconcile(request, spec.call_limits())
        .await
        .map_err(|e| e.to_string())?;
    let intents = checked_intents(ctx, parent, spec, &response)
        .await
        .map_err(|e| e.to_string())?;
    let mut children: Vec<&Value> = intents.iter().map(|i| &i.object).collect();
    children.sort_by_key(ToString::to_string);
    Ok(json!({
        "children": children,
        "status": response.status,
        "conditions": response.conditions,
        "finalized": response.finalized,
        "requeue": response.requeue_after.map(|d| d.as_millis()),
    }))
}

/// One parent: its key, and the running and the new version's answers.
type Compared = (String, Result<Value, String>, Result<Value, String>);

/// Run `new` (with `new_spec`) beside the running version on every parent
/// of `ctx`'s cache that this replica reconciles.
pub async fn shadow_run(
    ctx: &BindingContext,
    new: &Arc<ReconcilerPlugin>,
    new_spec: &BindingSpec,
) -> ShadowReport {
    let current = ctx.current();
    let parents: Vec<Arc<DynamicObject>> = ctx
        .parents
        .state()
        .into_iter()
        .filter(|p| ctx.shared.options.shard.owns(&object_key(p)))
        .collect();
    let outcomes: Vec<Compared> = futures::stream::iter(parents)
        .map(|parent| {
            let current = current.clone();
            async move {
                let running = answer(ctx, &parent, &current.plugin, &current.spec).await;
                let candidate = answer(ctx, &parent, new, new_spec).await;
                (object_key(&parent), running, candidate)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut report = ShadowReport::default();
    for (parent, running, candidate) in outcomes {
        match (running, candidate) {
            // Both fail: nothing to compare; the new version is no worse.
            (Err(_), Err(_)) => {}
            (Ok(_), Err(error)) => {
                report.compared += 1;
                report.failed += 1;
                if report.examples.len() < EXAMPLES {
                    report.examples.push((parent, error));
                }
            }
            (Err(_), Ok(_)) => {
                report.compared += 1;
                report.changed += 1;
            }
            (Ok(running), Ok(candidate)) => {
                report.compared += 1;
                if running == candidate {
                    report.unchanged += 1;
                } else {
                    report.changed += 1;
                }
            }
        }
    }
    report.examples.sort();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_counts_or_percentages() {
        let spec: RolloutSpec =
            serde_yaml::from_str("maxChangedParents: 2\nmaxFailures: 1\n").unwrap();
        assert_eq!(spec.max_changed_parents, Some(Threshold::Count(2)));
        assert!(spec.shadow, "shadow runs are on by default");
        let spec: RolloutSpec = serde_yaml::from_str("maxChangedParents: \"10%\"\n").unwrap();
        assert_eq!(spec.max_changed_parents, Some(Threshold::Percent(10.0)));
        assert!(Threshold::Percent(10.0).exceeded(6, 50));
        assert!(!Threshold::Percent(10.0).exceeded(5, 50));
        assert!(Threshold::Count(2).exceeded(3, 50));
        let err = serde_yaml::from_str::<RolloutSpec>("maxChangedParents: lots\n").unwrap_err();
        assert!(
            err.to_string().contains("neither a count nor a percentage"),
            "{err}"
        );
        assert!(serde_yaml::from_str::<RolloutSpec>("maxChangedParents: \"120%\"\n").is_err());
    }

    #[test]
    fn a_version_failing_where_the_running_one_succeeds_is_refused() {
        let report = ShadowReport {
            compared: 50,
            unchanged: 49,
            changed: 0,
            failed: 1,
            examples: vec![("default/w-17".into(), "plugin trapped: boom".into())],
        };
        let refusal = report.refusal(&RolloutSpec::default()).unwrap();
        assert!(refusal.contains("shadow run on 50 parents: 49 unchanged, 0 changed, 1 failed"));
        assert!(
            refusal.contains("default/w-17: plugin trapped: boom"),
            "{refusal}"
        );
        let tolerant = RolloutSpec {
            max_failures: 1,
            ..RolloutSpec::default()
        };
        assert_eq!(report.refusal(&tolerant), None);
        let changes = ShadowReport {
            compared: 10,
            unchanged: 7,
            changed: 3,
            ..ShadowReport::default()
        };
        let capped = RolloutSpec {
            max_changed_parents: Some(Threshold::Count(2)),
            ..RolloutSpec::default()
        };
        assert!(
            changes
                .refusal(&capped)
                .unwrap()
                .contains("maxChangedParents (2)")
        );
        assert_eq!(changes.refusal(&RolloutSpec::default()), None);
    }
}
