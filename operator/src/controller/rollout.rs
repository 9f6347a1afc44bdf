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
use serde_json::{Value, json};

use super::ReconcileError;
use super::cached::CachedObject;
use super::context::{BindingContext, object_key};
use super::request::request;
use super::settle::checked_intents;
use super::spec::{BindingSpec, RolloutSpec, Threshold};
use super::watches::same_parent;
use gantry_sandbox::contract::EncodedRequest;
use gantry_sandbox::runtime::ReconcilerPlugin;

/// Plugin calls of a shadow run at once (each pair: running and new).
const CONCURRENCY: usize = 8;
/// Failing parents named in a refusal.
const EXAMPLES: usize = 3;

/// What a shadow run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShadowReport {
    /// Parents a running version answers (or fails on), where the new
    /// version was compared with it.
    pub compared: u64,
    /// Parents the new version answers as the running one does.
    pub unchanged: u64,
    /// Parents the new version answers otherwise.
    pub changed: u64,
    /// Parents on which the new version fails and the running one does not.
    pub failed: u64,
    /// Parents no running version serves (a first version, or one for
    /// another parent kind): nothing to compare with.
    pub unserved: u64,
    /// Of those, parents on which the new version fails.
    pub unserved_failed: u64,
    /// Parents the cluster could not judge an answer for (a guardrail
    /// policy not in service yet, an API error): left out of the counts.
    pub unjudged: u64,
    /// Up to three failing parents, with the new version's error.
    pub examples: Vec<(String, String)>,
}

/// One parent: its key, the running version's answer (if one serves it)
/// and the new version's.
type Compared = (String, Option<Answer>, Answer);

impl ShadowReport {
    /// One line for Events: the counts.
    pub fn summary(&self) -> String {
        let served = format!(
            "shadow run on {} parents: {} unchanged, {} changed, {} failed",
            self.compared, self.unchanged, self.changed, self.failed
        );
        let unserved = format!(
            "{} parents no version served yet: {} answered, {} failed",
            self.unserved,
            self.unserved - self.unserved_failed,
            self.unserved_failed
        );
        let counts = match (self.compared, self.unserved) {
            (0, 0) if self.unjudged == 0 => return "shadow run: no parents yet".into(),
            (0, 0) => "shadow run".to_string(),
            (_, 0) => served,
            (0, _) => format!("shadow run on {unserved}"),
            _ => format!("{served}; {unserved}"),
        };
        if self.unjudged > 0 {
            format!(
                "{counts}; {} parents not judged (a guardrail policy not in service, or an API error)",
                self.unjudged
            )
        } else {
            counts
        }
    }

    /// Up to three failing parents with their errors, in words.
    fn examples(&self) -> String {
        let examples: Vec<String> = self
            .examples
            .iter()
            .map(|(parent, error)| format!("{parent}: {error}"))
            .collect();
        examples.join("; ")
    }

    /// Why the new version may not serve under `rollout`, if it may not.
    pub fn refusal(&self, rollout: &RolloutSpec) -> Option<String> {
        if self.failed > rollout.max_failures {
            return Some(format!(
                "{}; the new version fails where the running one succeeds (at most {} allowed), e.g. {}",
                self.summary(),
                rollout.max_failures,
                self.examples()
            ));
        }
        if self.unserved > 0 && self.unserved_failed == self.unserved {
            return Some(format!(
                "{}; the new version fails on every parent, e.g. {}",
                self.summary(),
                self.examples()
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

    /// Whether a refusal may turn out otherwise once every parent can be
    /// judged: some could not, and the version failed nowhere the running
    /// one succeeds (a first version failing on every parent judged may
    /// answer the rest).
    pub fn retry_when_judged(&self, rollout: &RolloutSpec) -> bool {
        self.unjudged > 0 && self.failed <= rollout.max_failures
    }

    /// Count one parent: the running version's answer, if one serves it,
    /// and the new version's.
    fn count(&mut self, parent: String, running: Option<Answer>, candidate: Answer) {
        match (running, candidate) {
            // Both fail: no worse, but a changed error changes the
            // parent's Synced condition.
            (Some(Err(before)), Err(after)) => {
                self.compared += 1;
                if before == after {
                    self.unchanged += 1;
                } else {
                    self.changed += 1;
                }
            }
            (Some(Ok(_)), Err(error)) => {
                self.compared += 1;
                self.failed += 1;
                self.example(parent, error);
            }
            (Some(Err(_)), Ok(_)) => {
                self.compared += 1;
                self.changed += 1;
            }
            (Some(Ok(running)), Ok(candidate)) => {
                self.compared += 1;
                if running == candidate {
                    self.unchanged += 1;
                } else {
                    self.changed += 1;
                }
            }
            (None, Ok(_)) => self.unserved += 1,
            (None, Err(error)) => {
                self.unserved += 1;
                self.unserved_failed += 1;
                self.example(parent, error);
            }
        }
    }

    fn example(&mut self, parent: String, error: String) {
        if self.examples.len() < EXAMPLES {
            self.examples.push((parent, error));
        }
    }
}

/// One version's answer for one parent, or why it failed.
pub type Answer = Result<Value, String>;

/// The answer of one version for one parent, comparable across versions:
/// the children as they would be applied, the status and the conditions.
pub async fn answer(
    ctx: &BindingContext,
    parent: &DynamicObject,
    plugin: &Arc<ReconcilerPlugin>,
    spec: &BindingSpec,
) -> Answer {
    judged_answer(ctx, parent, plugin, spec)
        .await
        .map_err(|e| e.to_string())
}

/// Whether a failure says nothing of the version: the cluster could not
/// judge its answer (a guardrail policy not in service yet, the API), or
/// the answer needed an HTTP request a shadow run does not send.
fn unjudged(error: &ReconcileError) -> bool {
    matches!(
        error,
        ReconcileError::Plugin(gantry_sandbox::error::CallError::ShadowRefused)
            | ReconcileError::PolicyUnavailable(_)
            | ReconcileError::Kube(_)
            | ReconcileError::CachesNotReady
            | ReconcileError::ShuttingDown
    )
}

async fn judged_answer(
    ctx: &BindingContext,
    parent: &DynamicObject,
    plugin: &Arc<ReconcilerPlugin>,
    spec: &BindingSpec,
) -> Result<Value, ReconcileError> {
    let request = EncodedRequest::new(&request(ctx, parent, spec, Trigger::Resync));
    answer_to(ctx, parent, plugin, spec, request).await
}

/// The answer of `plugin` to `request`, judged as a reconcile would judge it.
async fn answer_to(
    ctx: &BindingContext,
    parent: &DynamicObject,
    plugin: &Arc<ReconcilerPlugin>,
    spec: &BindingSpec,
    request: EncodedRequest,
) -> Result<Value, ReconcileError> {
    // A shadow run: the plugin may read over HTTP, never write.
    let grants = super::grants::grants(ctx, spec, plugin, true);
    let response = plugin
        .reconcile_encoded(request, spec.call_limits(), grants)
        .await
        .map_err(ReconcileError::Plugin)?;
    let intents = checked_intents(ctx, parent, spec, &response).await?;
    let mut children: Vec<&Value> = intents.iter().map(|i| &i.object).collect();
    children.sort_by_cached_key(ToString::to_string);
    Ok(json!({
        "children": children,
        "status": response.status,
        "conditions": response.conditions,
        "finalized": response.finalized,
        "requeue": response.requeue_after.map(|d| d.as_millis()),
    }))
}

/// Run `new` (with `new_spec`) on every parent of `candidate`'s caches
/// that this replica reconciles, beside the version `running` serves (if
/// any: the same context when the watches did not change); the running
/// version answers from its own caches.
pub async fn shadow_run(
    candidate: &BindingContext,
    new: &Arc<ReconcilerPlugin>,
    new_spec: &BindingSpec,
    running: Option<&BindingContext>,
) -> ShadowReport {
    let parents: Vec<Arc<CachedObject>> = candidate
        .parents
        .state()
        .into_iter()
        .filter(|p| candidate.shared.options.shard.owns(&object_key(p.as_ref())))
        .collect();
    // Counted as they come: no answer is kept past its comparison.
    let mut outcomes = futures::stream::iter(parents)
        .map(|cached| async move {
            let parent = cached.to_object(&candidate.parent.resource);
            let served = running
                .filter(|ctx| ctx.spec.parent.same_kind(&new_spec.parent))
                .and_then(|ctx| Some((ctx, same_parent(ctx, &parent)?)));
            let (baseline, candidate) = match served {
                // The same caches: one request, with each version's config.
                Some((ctx, served)) if std::ptr::eq(ctx, candidate) => {
                    // Most often the very entry `parent` was parsed from.
                    let newer;
                    let served = if Arc::ptr_eq(&served, &cached) {
                        &parent
                    } else {
                        newer = served.to_object(&ctx.parent.resource);
                        &newer
                    };
                    let current = ctx.current();
                    let request =
                        EncodedRequest::new(&request(ctx, served, &current.spec, Trigger::Resync));
                    let new_request = request.with_config(&new_spec.config);
                    let baseline =
                        answer_to(ctx, served, &current.plugin, &current.spec, request).await;
                    let answer = answer_to(candidate, &parent, new, new_spec, new_request).await;
                    (Some(baseline), answer)
                }
                Some((ctx, served)) => {
                    let served = served.to_object(&ctx.parent.resource);
                    let current = ctx.current();
                    let baseline =
                        judged_answer(ctx, &served, &current.plugin, &current.spec).await;
                    let answer = judged_answer(candidate, &parent, new, new_spec).await;
                    (Some(baseline), answer)
                }
                None => (None, judged_answer(candidate, &parent, new, new_spec).await),
            };
            let judged =
                |a: &Result<Value, ReconcileError>| a.as_ref().err().is_none_or(|e| !unjudged(e));
            if !judged(&candidate) || baseline.as_ref().is_some_and(|b| !judged(b)) {
                return None;
            }
            let text = |a: Result<Value, ReconcileError>| a.map_err(|e| e.to_string());
            Some((object_key(&parent), baseline.map(text), text(candidate)))
        })
        .buffer_unordered(CONCURRENCY);
    let mut report = ShadowReport::default();
    while let Some(outcome) = outcomes.next().await {
        let outcome: Option<Compared> = outcome;
        match outcome {
            Some((parent, running, candidate)) => report.count(parent, running, candidate),
            None => report.unjudged += 1,
        }
    }
    report.examples.sort();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_refused_in_a_shadow_run_leaves_the_parent_unjudged() {
        use gantry_sandbox::error::CallError;
        assert!(unjudged(&ReconcileError::Plugin(CallError::ShadowRefused)));
        assert!(!unjudged(&ReconcileError::Plugin(CallError::Host(
            "x".into()
        ))));
    }

    #[test]
    fn a_version_failing_where_the_running_one_succeeds_is_refused() {
        let report = ShadowReport {
            compared: 50,
            unchanged: 49,
            changed: 0,
            failed: 1,
            examples: vec![("default/w-17".into(), "plugin trapped: boom".into())],
            ..ShadowReport::default()
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

    #[test]
    fn parents_are_counted_against_the_running_answer() {
        let mut report = ShadowReport::default();
        let same = || Ok(json!({"children": []}));
        report.count("a".into(), Some(same()), same());
        report.count("b".into(), Some(same()), Ok(json!({"children": [1]})));
        report.count("c".into(), Some(same()), Err("trapped".into()));
        report.count("d".into(), Some(Err("old".into())), Err("new".into()));
        report.count("e".into(), Some(Err("old".into())), same());
        report.count("f".into(), Some(Err("old".into())), Err("old".into()));
        assert_eq!(
            (
                report.compared,
                report.unchanged,
                report.changed,
                report.failed
            ),
            (6, 2, 3, 1),
            "both failing is no regression (another error is a change); a fix is a change"
        );
        assert_eq!(report.examples, vec![("c".into(), "trapped".into())]);
        assert_eq!(report.unserved, 0);
    }

    #[test]
    fn a_first_version_is_refused_only_when_it_fails_on_every_parent() {
        let mut first = ShadowReport::default();
        first.count("default/a".into(), None, Err("plugin trapped: boom".into()));
        first.count("default/b".into(), None, Err("plugin trapped: boom".into()));
        let refusal = first.refusal(&RolloutSpec::default()).unwrap();
        assert!(
            refusal.starts_with("shadow run on 2 parents no version served yet: 0 answered, 2 failed; the new version fails on every parent, e.g. default/a: plugin trapped: boom"),
            "{refusal}"
        );
        first.count("default/c".into(), None, Ok(json!({})));
        assert_eq!(first.refusal(&RolloutSpec::default()), None);
        assert_eq!(
            first.summary(),
            "shadow run on 3 parents no version served yet: 1 answered, 2 failed"
        );
        // No parents at all: nothing to refuse on.
        assert_eq!(
            ShadowReport::default().refusal(&RolloutSpec::default()),
            None
        );
        assert_eq!(
            ShadowReport::default().summary(),
            "shadow run: no parents yet"
        );
        let unjudged = ShadowReport {
            unjudged: 2,
            ..ShadowReport::default()
        };
        assert_eq!(
            unjudged.summary(),
            "shadow run; 2 parents not judged (a guardrail policy not in service, or an API error)"
        );
        assert_eq!(unjudged.refusal(&RolloutSpec::default()), None);

        // One parent judged and failed, one not judged yet (a guardrail
        // policy coming into service meanwhile): refused for now, tried again.
        let mut partly = ShadowReport {
            unjudged: 1,
            ..ShadowReport::default()
        };
        partly.count("default/root".into(), None, Err("denied".into()));
        assert!(partly.refusal(&RolloutSpec::default()).is_some());
        assert!(partly.retry_when_judged(&RolloutSpec::default()));
        partly.unjudged = 0;
        assert!(!partly.retry_when_judged(&RolloutSpec::default()));
        // Failing where the running version succeeds is final.
        let regressed = ShadowReport {
            compared: 2,
            failed: 1,
            unjudged: 1,
            ..ShadowReport::default()
        };
        assert!(!regressed.retry_when_judged(&RolloutSpec::default()));
    }
}
