//! Shadow runs of admission policies: before a new version of a policy
//! serves, it judges the requests the version in service judged last (its
//! [`RecentReviews`](super::recent::RecentReviews)), writing nothing; it is
//! refused if it fails on a request that the running version answered.

use std::sync::Arc;

use futures::StreamExt;
use gantry_sdk::AdmissionRequest;
use serde_json::Value;

use super::review::{self, Decision, Outcome};
use super::{LoadedPolicy, PolicySpec};
use gantry_sandbox::runtime::PolicyPlugin;

/// Reviews judged at once.
const CONCURRENCY: usize = 4;
/// Failing requests named in a refusal.
const EXAMPLES: usize = 3;

/// What a policy's shadow run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ReviewReport {
    /// Requests both versions judged.
    pub tried: u64,
    /// Requests the new version decides as the running one does.
    pub unchanged: u64,
    /// Requests it decides otherwise (allows, denies or patches differently).
    pub changed: u64,
    /// Requests on which it fails where the running one answered.
    pub failed: u64,
    /// Up to three failing requests, with the new version's error.
    pub examples: Vec<String>,
}

impl ReviewReport {
    /// One line for Events: the counts.
    pub(crate) fn summary(&self) -> String {
        format!(
            "shadow run on {} recent reviews: {} unchanged, {} changed, {} failed",
            self.tried, self.unchanged, self.changed, self.failed
        )
    }

    /// Why the new version may not serve, if it may not.
    pub(crate) fn refusal(&self) -> Option<String> {
        (self.failed > 0).then(|| {
            format!(
                "{}; the new version fails where the running one answered, e.g. {}",
                self.summary(),
                self.examples.join("; ")
            )
        })
    }

    fn count(&mut self, request: &Value, running: &Decision, candidate: &Decision) {
        self.tried += 1;
        let failed = |d: &Decision| d.outcome == Outcome::Error;
        if failed(candidate) && !failed(running) {
            self.failed += 1;
            if self.examples.len() < EXAMPLES {
                self.examples
                    .push(format!("{}: {}", describe(request), candidate.detail));
            }
        } else if running.outcome == candidate.outcome && running.response == candidate.response {
            self.unchanged += 1;
        } else {
            self.changed += 1;
        }
    }
}

/// `OPERATION Kind namespace/name` of an admission request.
fn describe(request: &Value) -> String {
    let text = |pointer: &str| {
        request
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let namespace = text("/namespace");
    let name = text("/name");
    let object = if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    };
    format!("{} {} {object}", text("/operation"), text("/kind/kind"))
}

/// How the policy `spec` with `plugin` decides `request`, outside service:
/// nothing is logged or counted.
async fn decide(spec: &PolicySpec, plugin: &Arc<PolicyPlugin>, request: &Value) -> Decision {
    let admission = AdmissionRequest {
        request: request.clone(),
        settings: spec.settings.clone(),
    };
    let result = plugin.validate(admission, spec.call_limits()).await;
    review::decide(spec, request, result)
}

/// Judge the recent requests of `running` with it and with `new` (bound
/// as `new_spec`), and compare.
pub(crate) async fn shadow_reviews(
    running: &LoadedPolicy,
    new: &Arc<PolicyPlugin>,
    new_spec: &PolicySpec,
) -> ReviewReport {
    let requests = running.recent.snapshot();
    let decisions: Vec<(Arc<Value>, Decision, Decision)> = futures::stream::iter(requests)
        .map(|request| async move {
            let old = decide(&running.spec, &running.plugin, &request).await;
            let new = decide(new_spec, new, &request).await;
            (request, old, new)
        })
        .buffered(CONCURRENCY)
        .collect()
        .await;
    let mut report = ReviewReport::default();
    for (request, old, new) in &decisions {
        report.count(request, old, new);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::AdmissionResponse;
    use serde_json::json;

    fn decision(outcome: Outcome, allowed: bool) -> Decision {
        let response = if allowed {
            AdmissionResponse::allow("u")
        } else {
            AdmissionResponse::deny("u", 403, "no")
        };
        Decision {
            response,
            outcome,
            error: None,
            detail: "plugin trapped: boom".into(),
        }
    }

    #[test]
    fn a_version_failing_where_the_running_one_answered_is_refused() {
        let request = json!({"operation": "CREATE", "kind": {"kind": "Pod"}, "namespace": "default", "name": "web"});
        let mut report = ReviewReport::default();
        let allowed = decision(Outcome::Allowed, true);
        let denied = decision(Outcome::Denied, false);
        let error = decision(Outcome::Error, false);
        report.count(&request, &allowed, &allowed);
        report.count(&request, &allowed, &denied);
        report.count(&request, &error, &error);
        assert_eq!(report.refusal(), None, "failing as before is no regression");
        report.count(&request, &denied, &error);
        assert_eq!(
            (
                report.tried,
                report.unchanged,
                report.changed,
                report.failed
            ),
            (4, 2, 1, 1)
        );
        let refusal = report.refusal().unwrap();
        assert!(
            refusal.contains("e.g. CREATE Pod default/web: plugin trapped: boom"),
            "{refusal}"
        );
    }
}
