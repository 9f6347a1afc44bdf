//! Metrics per converter, registered into the operator's registry (prefix
//! `gantry`, served on `/metrics`):
//!
//! - `gantry_conversion_reviews_total{crd,outcome}`: `ConversionReviews`
//!   answered, `success` or `failure`;
//! - `gantry_conversion_objects_total{crd}`: objects converted;
//! - `gantry_conversion_duration_seconds{crd}`: time per review, sandbox
//!   included.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReviewLabels {
    crd: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CrdLabel {
    crd: String,
}

fn latency_histogram() -> Histogram {
    // 100 µs to ~13 s, as for policies.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The converter families. Cheap to clone: clones share the counters.
#[derive(Clone, Debug)]
pub struct ConversionMetrics {
    reviews: Family<ReviewLabels, Counter>,
    objects: Family<CrdLabel, Counter>,
    duration: Family<CrdLabel, Histogram, fn() -> Histogram>,
}

impl Default for ConversionMetrics {
    fn default() -> Self {
        Self {
            reviews: Family::default(),
            objects: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl ConversionMetrics {
    /// Register the families (names without the `gantry_` prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "conversion_reviews",
            "ConversionReviews answered by outcome",
            self.reviews.clone(),
        );
        registry.register(
            "conversion_objects",
            "Objects converted",
            self.objects.clone(),
        );
        registry.register(
            "conversion_duration_seconds",
            "Time to answer a ConversionReview, sandbox included",
            self.duration.clone(),
        );
    }

    /// One review of `objects` objects for `crd`.
    pub fn record(&self, crd: &str, succeeded: bool, objects: usize, took: Duration) {
        let outcome = if succeeded { "success" } else { "failure" };
        self.reviews
            .get_or_create(&ReviewLabels {
                crd: crd.into(),
                outcome: outcome.into(),
            })
            .inc();
        if succeeded {
            self.objects
                .get_or_create(&CrdLabel { crd: crd.into() })
                .inc_by(objects as u64);
        }
        self.duration
            .get_or_create(&CrdLabel { crd: crd.into() })
            .observe(took.as_secs_f64());
    }

    /// Reviews of `crd` with `outcome` so far.
    pub fn reviews(&self, crd: &str, outcome: &str) -> u64 {
        self.reviews
            .get_or_create(&ReviewLabels {
                crd: crd.into(),
                outcome: outcome.into(),
            })
            .get()
    }
}
