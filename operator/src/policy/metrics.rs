//! Metrics per policy, as prometheus-client families. `gantry run` and
//! `gantry dev` register them into the operator's registry (prefixed
//! `gantry`, served on `/metrics`), giving:
//!
//! - `gantry_policy_evaluations_total{policy,mode,outcome}`: evaluations,
//!   by what the policy said (`allowed`, `mutated`, `denied`, `error`);
//!   in monitor mode the request was allowed whatever the outcome.
//! - `gantry_policy_evaluation_duration_seconds{policy}`: latency histogram.
//! - `gantry_policy_denials_total{policy,mode}`: denials (in monitor mode:
//!   requests that would have been denied).
//! - `gantry_policy_errors_total{policy,kind}`: failed evaluations by kind
//!   (`timeout`, `out_of_memory`, `trap`, `contract_violation`,
//!   `mutation_not_allowed`, `invalid_patch`, ...).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EvaluationLabels {
    policy: String,
    mode: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabel {
    policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DenialLabels {
    policy: String,
    mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    policy: String,
    kind: String,
}

type Histograms = Family<PolicyLabel, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 100 µs to ~13 s: sandboxed policies take well under a millisecond
    // when warm; the top buckets catch deadlines.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0001, 2.0, 18,
    ))
}

/// The policy families. Cheap to clone: clones share the counters.
#[derive(Clone, Debug)]
pub struct PolicyMetrics {
    evaluations: Family<EvaluationLabels, Counter>,
    duration: Histograms,
    denials: Family<DenialLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
}

impl Default for PolicyMetrics {
    fn default() -> Self {
        Self {
            evaluations: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
            denials: Family::default(),
            errors: Family::default(),
        }
    }
}

impl PolicyMetrics {
    /// Register the families (names without the `gantry_` prefix, which the
    /// registry adds).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "policy_evaluations",
            "Policy evaluations by outcome",
            self.evaluations.clone(),
        );
        registry.register(
            "policy_evaluation_duration_seconds",
            "Time to evaluate a policy, sandbox included",
            self.duration.clone(),
        );
        registry.register(
            "policy_denials",
            "Requests denied (monitor mode: that would have been denied)",
            self.denials.clone(),
        );
        registry.register(
            "policy_errors",
            "Failed policy evaluations by kind",
            self.errors.clone(),
        );
    }

    /// One evaluation: its outcome, how long it took, and the error kind
    /// when it failed.
    pub fn record(
        &self,
        policy: &str,
        mode: &str,
        outcome: &str,
        took: Duration,
        error: Option<&str>,
    ) {
        self.evaluations
            .get_or_create(&EvaluationLabels {
                policy: policy.into(),
                mode: mode.into(),
                outcome: outcome.into(),
            })
            .inc();
        self.duration
            .get_or_create(&PolicyLabel {
                policy: policy.into(),
            })
            .observe(took.as_secs_f64());
        if outcome == "denied" {
            self.denials
                .get_or_create(&DenialLabels {
                    policy: policy.into(),
                    mode: mode.into(),
                })
                .inc();
        }
        if let Some(kind) = error {
            self.errors
                .get_or_create(&ErrorLabels {
                    policy: policy.into(),
                    kind: kind.into(),
                })
                .inc();
        }
    }

    /// Evaluations of `policy` with `outcome` so far (any mode).
    pub fn evaluations(&self, policy: &str, outcome: &str) -> u64 {
        ["enforce", "monitor"]
            .iter()
            .map(|mode| {
                self.evaluations
                    .get_or_create(&EvaluationLabels {
                        policy: policy.into(),
                        mode: (*mode).into(),
                        outcome: outcome.into(),
                    })
                    .get()
            })
            .sum()
    }

    /// Errors of `policy` of `kind` so far.
    pub fn errors(&self, policy: &str, kind: &str) -> u64 {
        self.errors
            .get_or_create(&ErrorLabels {
                policy: policy.into(),
                kind: kind.into(),
            })
            .get()
    }

    /// The families in the Prometheus text format, prefixed `gantry`.
    pub fn render(&self) -> String {
        let mut registry = Registry::with_prefix("gantry");
        self.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_four_families() {
        let metrics = PolicyMetrics::default();
        let ms = Duration::from_millis(1);
        metrics.record("cap", "enforce", "denied", ms, None);
        metrics.record("cap", "monitor", "denied", ms, None);
        metrics.record("loop", "enforce", "error", ms, Some("timeout"));
        let text = metrics.render();
        for line in [
            "gantry_policy_evaluations_total{policy=\"cap\",mode=\"enforce\",outcome=\"denied\"} 1",
            "gantry_policy_denials_total{policy=\"cap\",mode=\"monitor\"} 1",
            "gantry_policy_errors_total{policy=\"loop\",kind=\"timeout\"} 1",
            "gantry_policy_evaluation_duration_seconds_count{policy=\"cap\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert_eq!(metrics.evaluations("cap", "denied"), 2);
        assert_eq!(metrics.errors("loop", "timeout"), 1);
    }
}
