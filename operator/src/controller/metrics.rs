//! The operator's Prometheus metrics (prometheus-client), served on
//! `/metrics` and read by tests.
//!
//! Every family is registered once, in [`Metrics::default`]; other parts of
//! the host (the admission webhook, say) add theirs with
//! [`Metrics::register`]. Names follow Prometheus conventions: a `gantry_`
//! prefix, `_total` on counters, base units (`_seconds`).

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set of per-binding metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BindingLabel {
    binding: String,
}

/// Label set of per-binding metrics with a kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    binding: String,
    kind: String,
}

/// Label set of per-binding metrics with an outcome (`ok`, `failed`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    binding: String,
    outcome: String,
}

fn fetch_histogram() -> Histogram {
    // 1 ms .. ~65 s (retries with backoff included).
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Label set of plugin-call latency: one series per plugin version.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: String,
    digest: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

fn plugin_call_histogram() -> Histogram {
    // 50 µs .. ~3.3 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
}

/// A copy of one binding's counters (what tests read).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BindingCounters {
    /// Reconciles finished.
    pub reconciles: u64,
    /// Reconciles that failed.
    pub reconcile_errors: u64,
    /// Children written with server-side apply.
    pub applies: u64,
    /// Applies skipped because nothing would change.
    pub skipped_applies: u64,
    /// Children pruned.
    pub prunes: u64,
    /// Failed plugin calls by kind (limit breaches and errors).
    pub plugin_failures: std::collections::BTreeMap<String, u64>,
    /// Plugin versions put into service.
    pub plugin_loads: u64,
    /// Plugin versions that replaced one in service.
    pub plugin_swaps: u64,
    /// New versions refused (the old one kept serving).
    pub plugin_load_failures: u64,
    /// Seconds the last shadow run took (0 before the first).
    pub last_shadow_seconds: f64,
    /// Reconciles running now.
    pub in_flight: i64,
}

/// All metrics of the operator, and whether it is ready.
pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Family<BindingLabel, Counter>,
    reconcile_errors: Family<BindingLabel, Counter>,
    reconcile_duration: Histograms<BindingLabel>,
    plugin_call_duration: Histograms<PluginLabels>,
    limit_breaches: Family<KindLabels, Counter>,
    plugin_errors: Family<KindLabels, Counter>,
    applies: Family<BindingLabel, Counter>,
    skipped_applies: Family<BindingLabel, Counter>,
    prunes: Family<BindingLabel, Counter>,
    plugin_loads: Family<BindingLabel, Counter>,
    plugin_swaps: Family<BindingLabel, Counter>,
    plugin_load_failures: Family<BindingLabel, Counter>,
    fetches: Family<OutcomeLabels, Counter>,
    shadow_parents: Family<OutcomeLabels, Counter>,
    shadow_seconds: Family<BindingLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    fetch_duration: Histograms<BindingLabel>,
    queue_depth: Family<BindingLabel, Gauge>,
    in_flight: Family<BindingLabel, Gauge>,
    ready: Gauge,
    bindings_active: Gauge,
    api_writes: Counter,
    api_event_writes: Counter,
    /// Kinds seen per binding, so a snapshot can list them.
    failure_kinds: Mutex<std::collections::BTreeSet<(String, String)>>,
    /// Plugin metrics and the plugins' HTTP requests.
    capabilities: std::sync::Arc<gantry_sandbox::capability::CapabilityMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("gantry");
        let m = Self {
            registry: Mutex::new(Registry::default()),
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(reconcile_histogram),
            plugin_call_duration: Family::new_with_constructor(plugin_call_histogram),
            limit_breaches: Family::default(),
            plugin_errors: Family::default(),
            applies: Family::default(),
            skipped_applies: Family::default(),
            prunes: Family::default(),
            plugin_loads: Family::default(),
            plugin_swaps: Family::default(),
            plugin_load_failures: Family::default(),
            fetches: Family::default(),
            shadow_parents: Family::default(),
            shadow_seconds: Family::default(),
            fetch_duration: Family::new_with_constructor(fetch_histogram),
            queue_depth: Family::default(),
            in_flight: Family::default(),
            ready: Gauge::default(),
            bindings_active: Gauge::default(),
            api_writes: Counter::default(),
            api_event_writes: Counter::default(),
            failure_kinds: Mutex::default(),
            capabilities: std::sync::Arc::default(),
        };
        m.capabilities.register(&mut registry);
        let r = &mut registry;
        r.register("reconciles", "Reconciles finished", m.reconciles.clone());
        r.register(
            "reconcile_errors",
            "Reconciles that failed",
            m.reconcile_errors.clone(),
        );
        r.register(
            "reconcile_duration_seconds",
            "Time of one reconcile, from taking a concurrency slot to its end",
            m.reconcile_duration.clone(),
        );
        r.register(
            "plugin_call_duration_seconds",
            "Time of one reconcile plugin call in the sandbox, by plugin version",
            m.plugin_call_duration.clone(),
        );
        r.register(
            "plugin_limit_breaches",
            "Plugin calls stopped by the sandbox: timeout, out_of_memory, output_too_large, too_many_children, trap",
            m.limit_breaches.clone(),
        );
        r.register(
            "plugin_errors",
            "Plugin calls that failed otherwise: plugin_error, contract_violation, host",
            m.plugin_errors.clone(),
        );
        r.register(
            "applies",
            "Children written with server-side apply",
            m.applies.clone(),
        );
        r.register(
            "skipped_applies",
            "Applies skipped because nothing would change",
            m.skipped_applies.clone(),
        );
        r.register(
            "prunes",
            "Children deleted because no longer desired",
            m.prunes.clone(),
        );
        r.register(
            "plugin_loads",
            "Plugin versions put into service",
            m.plugin_loads.clone(),
        );
        r.register(
            "plugin_swaps",
            "Plugin versions that replaced the one in service",
            m.plugin_swaps.clone(),
        );
        r.register(
            "plugin_load_failures",
            "Plugin versions refused (the one in service kept serving)",
            m.plugin_load_failures.clone(),
        );
        r.register(
            "shadow_parents",
            "Parents a new plugin version was shadow-run on, by outcome (unchanged, changed, failed; unserved_answered, unserved_failed where no version served yet)",
            m.shadow_parents.clone(),
        );
        r.register(
            "api_writes",
            "API requests other than reads (create, update, patch, delete) the operator sent",
            m.api_writes.clone(),
        );
        r.register(
            "api_event_writes",
            "Of the API writes, those that wrote Events",
            m.api_event_writes.clone(),
        );
        r.register(
            "shadow_run_seconds",
            "Time of the last shadow run of a new plugin version on every parent",
            m.shadow_seconds.clone(),
        );
        r.register(
            "plugin_fetches",
            "Downloads of remote plugins (URL or OCI), by outcome",
            m.fetches.clone(),
        );
        r.register(
            "plugin_fetch_duration_seconds",
            "Time of one remote plugin download, retries included",
            m.fetch_duration.clone(),
        );
        r.register(
            "reconcile_queue_depth",
            "Reconciles due but waiting for a concurrency slot",
            m.queue_depth.clone(),
        );
        r.register(
            "reconciles_in_flight",
            "Reconciles running now",
            m.in_flight.clone(),
        );
        r.register(
            "ready",
            "1 when the initial bindings are processed",
            m.ready.clone(),
        );
        r.register(
            "bindings_active",
            "Bindings in service",
            m.bindings_active.clone(),
        );
        *m.registry.lock().unwrap() = registry;
        m
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// Holds a gauge up by one while alive.
pub struct GaugeGuard(Gauge);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn label(binding: &str) -> BindingLabel {
    BindingLabel {
        binding: binding.to_string(),
    }
}

impl Metrics {
    /// Plugin metrics and the plugins' HTTP requests.
    pub fn capabilities(&self) -> &std::sync::Arc<gantry_sandbox::capability::CapabilityMetrics> {
        &self.capabilities
    }

    /// Add metrics of another part of the host to the same registry
    /// (they get the `gantry_` prefix).
    pub fn register(&self, f: impl FnOnce(&mut Registry)) {
        f(&mut self.registry.lock().unwrap());
    }

    /// Everything in the Prometheus/OpenMetrics text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry.lock().unwrap())
            .expect("writing to a String cannot fail");
        out
    }

    /// Mark the operator ready (initial bindings processed) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// Record how many bindings are in service.
    pub fn set_active_bindings(&self, count: usize) {
        self.bindings_active
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// How many bindings are in service.
    pub fn active_bindings(&self) -> usize {
        usize::try_from(self.bindings_active.get()).unwrap_or(0)
    }

    /// A reconcile is due and waits for a concurrency slot until the guard drops.
    pub fn queued(&self, binding: &str) -> GaugeGuard {
        let gauge = self.queue_depth.get_or_create(&label(binding)).clone();
        gauge.inc();
        GaugeGuard(gauge)
    }

    /// A reconcile runs until the guard drops.
    pub fn running(&self, binding: &str) -> GaugeGuard {
        let gauge = self.in_flight.get_or_create(&label(binding)).clone();
        gauge.inc();
        GaugeGuard(gauge)
    }

    /// A reconcile finished.
    pub fn record_reconcile(&self, binding: &str, took: Duration, ok: bool) {
        let label = label(binding);
        self.reconciles.get_or_create(&label).inc();
        self.reconcile_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
        if !ok {
            self.reconcile_errors.get_or_create(&label).inc();
        }
    }

    /// A reconcile plugin call returned (well or not) after `took`.
    pub fn record_plugin_call(&self, plugin: &str, digest: &str, took: Duration) {
        self.plugin_call_duration
            .get_or_create(&PluginLabels {
                plugin: plugin.to_string(),
                digest: digest.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// A plugin call failed with `kind`; `breach` when the sandbox stopped it.
    pub fn record_plugin_failure(&self, binding: &str, kind: &str, breach: bool) {
        let labels = KindLabels {
            binding: binding.to_string(),
            kind: kind.to_string(),
        };
        let family = if breach {
            &self.limit_breaches
        } else {
            &self.plugin_errors
        };
        family.get_or_create(&labels).inc();
        self.failure_kinds
            .lock()
            .unwrap()
            .insert((binding.to_string(), kind.to_string()));
    }

    /// Children written, skipped and pruned by one reconcile.
    pub fn record_writes(&self, binding: &str, applied: usize, skipped: usize, pruned: usize) {
        let label = label(binding);
        self.applies.get_or_create(&label).inc_by(applied as u64);
        self.skipped_applies
            .get_or_create(&label)
            .inc_by(skipped as u64);
        self.prunes.get_or_create(&label).inc_by(pruned as u64);
    }

    /// A plugin version was put into service (`ok`) or refused; `swapped`
    /// when it replaced a version in service.
    pub fn record_plugin_load(&self, binding: &str, ok: bool, swapped: bool) {
        let label = label(binding);
        self.show_binding(&label);
        if !ok {
            self.plugin_load_failures.get_or_create(&label).inc();
            return;
        }
        self.plugin_loads.get_or_create(&label).inc();
        if swapped {
            self.plugin_swaps.get_or_create(&label).inc();
        }
    }

    /// Create every per-binding series, so that a binding's counters read
    /// 0 rather than being absent until their first event.
    fn show_binding(&self, label: &BindingLabel) {
        for family in [
            &self.reconciles,
            &self.reconcile_errors,
            &self.applies,
            &self.skipped_applies,
            &self.prunes,
            &self.plugin_loads,
            &self.plugin_swaps,
            &self.plugin_load_failures,
        ] {
            let _ = family.get_or_create(label);
        }
        let _ = self.queue_depth.get_or_create(label);
        let _ = self.in_flight.get_or_create(label);
    }

    /// The counter of the operator's API writes, for its client
    /// ([`gantry_kube::api_client::counting_writes`]).
    pub fn api_writes(&self) -> Counter {
        self.api_writes.clone()
    }

    /// The counter of those writes that wrote Events.
    pub fn api_event_writes(&self) -> Counter {
        self.api_event_writes.clone()
    }

    /// A shadow run of a new version of `binding` ended after `took`: its
    /// parents by outcome.
    pub fn record_shadow(
        &self,
        binding: &str,
        report: &super::rollout::ShadowReport,
        took: Duration,
    ) {
        self.shadow_seconds
            .get_or_create(&label(binding))
            .set(took.as_secs_f64());
        for (outcome, count) in [
            ("unchanged", report.unchanged),
            ("changed", report.changed),
            ("failed", report.failed),
            (
                "unserved_answered",
                report.unserved - report.unserved_failed,
            ),
            ("unserved_failed", report.unserved_failed),
        ] {
            self.shadow_parents
                .get_or_create(&OutcomeLabels {
                    binding: binding.to_string(),
                    outcome: outcome.to_string(),
                })
                .inc_by(count);
        }
    }

    /// A remote plugin download ended (`ok` or not) after `took`.
    pub fn record_fetch(&self, binding: &str, ok: bool, took: Duration) {
        self.fetches
            .get_or_create(&OutcomeLabels {
                binding: binding.to_string(),
                outcome: if ok { "ok" } else { "failed" }.to_string(),
            })
            .inc();
        self.fetch_duration
            .get_or_create(&label(binding))
            .observe(took.as_secs_f64());
    }

    /// A copy of one binding's counters.
    pub fn binding(&self, binding: &str) -> BindingCounters {
        let label = label(binding);
        let count = |family: &Family<BindingLabel, Counter>| family.get_or_create(&label).get();
        let plugin_failures = self
            .failure_kinds
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _)| b == binding)
            .map(|(_, kind)| {
                let labels = KindLabels {
                    binding: binding.to_string(),
                    kind: kind.clone(),
                };
                let n = self.limit_breaches.get_or_create(&labels).get()
                    + self.plugin_errors.get_or_create(&labels).get();
                (kind.clone(), n)
            })
            .collect();
        BindingCounters {
            reconciles: count(&self.reconciles),
            reconcile_errors: count(&self.reconcile_errors),
            applies: count(&self.applies),
            skipped_applies: count(&self.skipped_applies),
            prunes: count(&self.prunes),
            plugin_failures,
            plugin_loads: count(&self.plugin_loads),
            plugin_swaps: count(&self.plugin_swaps),
            plugin_load_failures: count(&self.plugin_load_failures),
            last_shadow_seconds: self.shadow_seconds.get_or_create(&label).get(),
            in_flight: self.in_flight.get_or_create(&label).get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_with_prometheus_names() {
        let metrics = Metrics::default();
        metrics.record_reconcile("memcached", Duration::from_millis(3), true);
        metrics.record_reconcile("memcached", Duration::from_millis(3), false);
        metrics.record_plugin_call("memcached", "abc123", Duration::from_micros(120));
        metrics.record_writes("memcached", 2, 5, 1);
        metrics.record_plugin_failure("memcached", "timeout", true);
        metrics.record_plugin_failure("memcached", "plugin_error", false);
        metrics.record_plugin_load("memcached", true, false);
        metrics.record_plugin_load("memcached", true, true);
        metrics.record_plugin_load("memcached", false, false);
        let queued = metrics.queued("memcached");
        metrics.set_ready(true);
        metrics.record_plugin_load("fresh", true, false);
        metrics.record_fetch("memcached", false, Duration::from_millis(40));
        let text = metrics.render();
        for line in [
            "gantry_reconciles_total{binding=\"memcached\"} 2",
            "gantry_reconcile_errors_total{binding=\"memcached\"} 1",
            "gantry_reconcile_duration_seconds_count{binding=\"memcached\"} 2",
            "gantry_plugin_call_duration_seconds_count{plugin=\"memcached\",digest=\"abc123\"} 1",
            "gantry_applies_total{binding=\"memcached\"} 2",
            "gantry_skipped_applies_total{binding=\"memcached\"} 5",
            "gantry_prunes_total{binding=\"memcached\"} 1",
            "gantry_plugin_limit_breaches_total{binding=\"memcached\",kind=\"timeout\"} 1",
            "gantry_plugin_errors_total{binding=\"memcached\",kind=\"plugin_error\"} 1",
            "gantry_plugin_loads_total{binding=\"memcached\"} 2",
            "gantry_plugin_swaps_total{binding=\"memcached\"} 1",
            "gantry_plugin_load_failures_total{binding=\"memcached\"} 1",
            "gantry_reconcile_queue_depth{binding=\"memcached\"} 1",
            "gantry_ready 1",
            "gantry_plugin_fetches_total{binding=\"memcached\",outcome=\"failed\"} 1",
            "gantry_plugin_fetch_duration_seconds_count{binding=\"memcached\"} 1",
            // A binding's series exist from its load on.
            "gantry_reconciles_total{binding=\"fresh\"} 0",
            "gantry_prunes_total{binding=\"fresh\"} 0",
            "gantry_reconciles_in_flight{binding=\"fresh\"} 0",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        drop(queued);
        assert!(
            metrics
                .render()
                .contains("gantry_reconcile_queue_depth{binding=\"memcached\"} 0")
        );
        let counters = metrics.binding("memcached");
        assert_eq!(counters.plugin_failures["timeout"], 1);
        assert_eq!(counters.plugin_failures["plugin_error"], 1);
        assert_eq!((counters.plugin_loads, counters.plugin_swaps), (2, 1));
    }

    #[test]
    fn other_parts_register_into_the_same_exposition() {
        let metrics = Metrics::default();
        let evaluations = Counter::<u64>::default();
        metrics.register(|r| {
            r.register(
                "policy_evaluations",
                "Admission evaluations",
                evaluations.clone(),
            );
        });
        evaluations.inc_by(3);
        assert!(
            metrics
                .render()
                .contains("gantry_policy_evaluations_total 3")
        );
    }
}
