//! Metrics of the capabilities: what plugins record through the `metrics`
//! import (validated, capped per binding), and the host's own counts of
//! their HTTP requests. Registered into the operator's registry, so they
//! appear on `/metrics` with the `gantry_` prefix.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Distinct series (name and labels) one binding's plugin may have; samples
/// for more are dropped and counted. A version's series are retired when
/// another goes into service.
pub const MAX_SERIES_PER_BINDING: usize = 200;
/// Longest metric or label name a plugin may use.
pub const MAX_NAME_LEN: usize = 64;
/// Most labels on one sample.
pub const MAX_LABELS: usize = 8;
/// Longest label value, bytes.
pub const MAX_LABEL_VALUE: usize = 128;
/// What the host puts before a plugin's metric name (after `gantry_`).
pub const PLUGIN_PREFIX: &str = "plugin_metric_";
/// Label names the host sets or Prometheus reserves.
const RESERVED_LABELS: &[&str] = &["binding", "digest", "le", "quantile"];

/// The three kinds of plugin metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (`counter-add`).
    Counter,
    /// Set to a value (`gauge-set`).
    Gauge,
    /// Observations in buckets (`histogram-observe`).
    Histogram,
}

/// Labels of one plugin series, `binding` and `digest` first.
type Labels = Vec<(String, String)>;

fn plugin_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

enum PluginFamily {
    Counter(Family<Labels, Counter<f64, AtomicU64>>),
    Gauge(Family<Labels, Gauge<f64, AtomicU64>>),
    Histogram(Family<Labels, Histogram, fn() -> Histogram>),
}

impl PluginFamily {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Counter => Self::Counter(Family::default()),
            Kind::Gauge => Self::Gauge(Family::default()),
            Kind::Histogram => Self::Histogram(Family::new_with_constructor(plugin_histogram)),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Self::Counter(_) => Kind::Counter,
            Self::Gauge(_) => Kind::Gauge,
            Self::Histogram(_) => Kind::Histogram,
        }
    }
}

#[derive(Default)]
struct Store {
    families: BTreeMap<String, PluginFamily>,
    series: HashSet<(String, Labels)>,
    per_binding: HashMap<String, usize>,
}

/// Why a sample was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The metric name breaks the naming rules.
    InvalidName,
    /// A label name or value breaks the rules.
    InvalidLabel,
    /// NaN, infinite, or a negative counter increment.
    InvalidValue,
    /// The name is in use with another kind.
    TypeConflict,
    /// The binding has [`MAX_SERIES_PER_BINDING`] series already.
    SeriesLimit,
}

impl Dropped {
    fn label(self) -> &'static str {
        match self {
            Self::InvalidName => "invalid_name",
            Self::InvalidLabel => "invalid_label",
            Self::InvalidValue => "invalid_value",
            Self::TypeConflict => "type_conflict",
            Self::SeriesLimit => "series_limit",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    binding: String,
    method: String,
    origin: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OriginLabels {
    binding: String,
    origin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    binding: String,
    reason: String,
}

fn http_histogram() -> Histogram {
    // 1 ms .. ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The capabilities' metrics. Cheap to share behind an `Arc`.
pub struct CapabilityMetrics {
    plugin: Mutex<Store>,
    dropped: Family<ReasonLabels, Counter>,
    http_requests: Family<HttpLabels, Counter>,
    http_duration: Family<OriginLabels, Histogram, fn() -> Histogram>,
    http_refused: Family<HttpLabels, Counter>,
}

impl Default for CapabilityMetrics {
    fn default() -> Self {
        Self {
            plugin: Mutex::default(),
            dropped: Family::default(),
            http_requests: Family::default(),
            http_duration: Family::new_with_constructor(http_histogram),
            http_refused: Family::default(),
        }
    }
}

impl std::fmt::Debug for CapabilityMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapabilityMetrics").finish_non_exhaustive()
    }
}

/// The plugin metrics as a collector of the registry (names are only
/// known at run time).
#[derive(Debug)]
struct PluginCollector(std::sync::Arc<CapabilityMetrics>);

impl Collector for PluginCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let store = self.0.plugin.lock().unwrap();
        for (name, family) in &store.families {
            let name = format!("{PLUGIN_PREFIX}{name}");
            let help = "Recorded by a plugin (metrics import)";
            match family {
                PluginFamily::Counter(f) => {
                    f.encode(encoder.encode_descriptor(&name, help, None, f.metric_type())?)?;
                }
                PluginFamily::Gauge(f) => {
                    f.encode(encoder.encode_descriptor(&name, help, None, f.metric_type())?)?;
                }
                PluginFamily::Histogram(f) => {
                    f.encode(encoder.encode_descriptor(&name, help, None, f.metric_type())?)?;
                }
            }
        }
        Ok(())
    }
}

/// Whether `name` is a Prometheus name without colons, of up to
/// [`MAX_NAME_LEN`] characters.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_labels(labels: &[(String, String)]) -> bool {
    labels.len() <= MAX_LABELS
        && labels.iter().enumerate().all(|(i, (name, value))| {
            valid_name(name)
                && !name.starts_with("__")
                && !RESERVED_LABELS.contains(&name.as_str())
                && value.len() <= MAX_LABEL_VALUE
                && !labels[..i].iter().any(|(n, _)| n == name)
        })
}

impl CapabilityMetrics {
    /// Register every family into `registry`.
    pub fn register(self: &std::sync::Arc<Self>, r: &mut Registry) {
        r.register(
            "plugin_metrics_dropped",
            "Plugin metric samples dropped, by reason (invalid_name, invalid_label, invalid_value, type_conflict, series_limit)",
            self.dropped.clone(),
        );
        r.register(
            "plugin_http_requests",
            "HTTP requests plugins sent (each redirect hop is one), by outcome: status class or error",
            self.http_requests.clone(),
        );
        r.register(
            "plugin_http_request_duration_seconds",
            "Time of one HTTP request a plugin sent, body read included",
            self.http_duration.clone(),
        );
        r.register(
            "plugin_http_refused",
            "HTTP requests of plugins refused before anything was sent, by reason",
            self.http_refused.clone(),
        );
        r.register_collector(Box::new(PluginCollector(self.clone())));
    }

    /// Record one plugin sample for `binding`'s version `digest`; `Err`
    /// says why it was dropped (and it is counted).
    pub fn record(
        &self,
        binding: &str,
        digest: &str,
        kind: Kind,
        name: &str,
        labels: &[(String, String)],
        value: f64,
    ) -> Result<(), Dropped> {
        let result = self.try_record(binding, digest, kind, name, labels, value);
        if let Err(why) = result {
            self.dropped
                .get_or_create(&ReasonLabels {
                    binding: binding.to_string(),
                    reason: why.label().to_string(),
                })
                .inc();
        }
        result
    }

    fn try_record(
        &self,
        binding: &str,
        digest: &str,
        kind: Kind,
        name: &str,
        labels: &[(String, String)],
        value: f64,
    ) -> Result<(), Dropped> {
        // Counters get `_total` when encoded; a name that has it already
        // means the same counter.
        let name = match kind {
            Kind::Counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        if !valid_name(name) {
            return Err(Dropped::InvalidName);
        }
        if !check_labels(labels) {
            return Err(Dropped::InvalidLabel);
        }
        if !value.is_finite() || (kind == Kind::Counter && value < 0.0) {
            return Err(Dropped::InvalidValue);
        }
        let mut series: Labels = vec![
            ("binding".into(), binding.to_string()),
            ("digest".into(), digest.to_string()),
        ];
        series.extend(labels.iter().cloned());
        let mut store = self.plugin.lock().unwrap();
        if store.families.get(name).is_some_and(|f| f.kind() != kind) {
            return Err(Dropped::TypeConflict);
        }
        let key = (name.to_string(), series);
        if !store.series.contains(&key) {
            let count = store.per_binding.entry(binding.to_string()).or_default();
            if *count >= MAX_SERIES_PER_BINDING {
                return Err(Dropped::SeriesLimit);
            }
            *count += 1;
            store.series.insert(key.clone());
        }
        let family = store
            .families
            .entry(name.to_string())
            .or_insert_with(|| PluginFamily::new(kind));
        match family {
            PluginFamily::Counter(f) => {
                f.get_or_create(&key.1).inc_by(value);
            }
            PluginFamily::Gauge(f) => {
                f.get_or_create(&key.1).set(value);
            }
            PluginFamily::Histogram(f) => f.get_or_create(&key.1).observe(value),
        }
        Ok(())
    }

    /// Forget `binding`'s series of every version but `keep` (`None`: of
    /// all versions), giving their room under the cap back: called when a
    /// version leaves service.
    pub fn retire(&self, binding: &str, keep: Option<&str>) {
        let mut store = self.plugin.lock().unwrap();
        // By construction a series' labels start with binding and digest.
        let gone: Vec<(String, Labels)> = store
            .series
            .iter()
            .filter(|(_, l)| l[0].1 == binding && keep.is_none_or(|k| l[1].1 != k))
            .cloned()
            .collect();
        for key in &gone {
            store.series.remove(key);
            match store.families.get(&key.0) {
                Some(PluginFamily::Counter(f)) => {
                    f.remove(&key.1);
                }
                Some(PluginFamily::Gauge(f)) => {
                    f.remove(&key.1);
                }
                Some(PluginFamily::Histogram(f)) => {
                    f.remove(&key.1);
                }
                None => {}
            }
        }
        if let Some(count) = store.per_binding.get_mut(binding) {
            *count = count.saturating_sub(gone.len());
        }
    }

    /// Samples of `binding` dropped for `why` so far.
    pub fn dropped(&self, binding: &str, why: Dropped) -> u64 {
        self.dropped
            .get(&ReasonLabels {
                binding: binding.to_string(),
                reason: why.label().to_string(),
            })
            .map_or(0, |c| c.get())
    }

    /// Count one request sent (one hop).
    pub fn http_request(
        &self,
        binding: &str,
        method: &str,
        origin: &str,
        outcome: &str,
        took: Duration,
    ) {
        self.http_requests
            .get_or_create(&HttpLabels {
                binding: binding.to_string(),
                method: method.to_string(),
                origin: origin.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        self.http_duration
            .get_or_create(&OriginLabels {
                binding: binding.to_string(),
                origin: origin.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Count one request refused before sending (not allowed, shadow run,
    /// too many, ...). The origin is not a label: it may be anything.
    pub fn http_refused(&self, binding: &str, method: &str, reason: &str) {
        self.http_refused
            .get_or_create(&HttpLabels {
                binding: binding.to_string(),
                method: method.to_string(),
                origin: String::new(),
                outcome: reason.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn render(metrics: &Arc<CapabilityMetrics>) -> String {
        let mut registry = Registry::with_prefix("gantry");
        metrics.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    #[test]
    fn samples_are_exported_with_binding_and_digest() {
        let m = Arc::new(CapabilityMetrics::default());
        let labels = vec![("outcome".to_string(), "ok".to_string())];
        m.record(
            "b",
            "d1",
            Kind::Counter,
            "backups_deleted_total",
            &labels,
            2.0,
        )
        .unwrap();
        m.record("b", "d1", Kind::Counter, "backups_deleted", &labels, 1.0)
            .unwrap();
        m.record("b", "d1", Kind::Gauge, "queue", &[], 7.5).unwrap();
        m.record("b", "d1", Kind::Histogram, "wait_seconds", &[], 0.2)
            .unwrap();
        let text = render(&m);
        assert!(
            text.contains(
                "gantry_plugin_metric_backups_deleted_total{binding=\"b\",digest=\"d1\",outcome=\"ok\"} 3.0"
            ),
            "{text}"
        );
        assert!(text.contains("gantry_plugin_metric_queue{binding=\"b\",digest=\"d1\"} 7.5"));
        assert!(text.contains(
            "gantry_plugin_metric_wait_seconds_bucket{le=\"0.25\",binding=\"b\",digest=\"d1\"} 1"
        ) || text.contains(
            "gantry_plugin_metric_wait_seconds_bucket{binding=\"b\",digest=\"d1\",le=\"0.25\"} 1"
        ), "{text}");
    }

    #[test]
    fn bad_samples_are_dropped_and_counted() {
        let m = CapabilityMetrics::default();
        let l = |n: &str| vec![(n.to_string(), "v".to_string())];
        let cases = [
            (Kind::Gauge, "1abc", vec![], 1.0, Dropped::InvalidName),
            (Kind::Gauge, "a:b", vec![], 1.0, Dropped::InvalidName),
            (
                Kind::Gauge,
                &"x".repeat(65),
                vec![],
                1.0,
                Dropped::InvalidName,
            ),
            (Kind::Gauge, "ok", l("binding"), 1.0, Dropped::InvalidLabel),
            (Kind::Gauge, "ok", l("__x"), 1.0, Dropped::InvalidLabel),
            (Kind::Gauge, "ok", l("a-b"), 1.0, Dropped::InvalidLabel),
            (Kind::Gauge, "ok", vec![], f64::NAN, Dropped::InvalidValue),
            (Kind::Counter, "c", vec![], -1.0, Dropped::InvalidValue),
        ];
        for (kind, name, labels, value, why) in cases {
            assert_eq!(
                m.record("b", "d", kind, name, &labels, value),
                Err(why),
                "{name}"
            );
        }
        m.record("b", "d", Kind::Gauge, "g", &[], 1.0).unwrap();
        assert_eq!(
            m.record("b", "d", Kind::Counter, "g", &[], 1.0),
            Err(Dropped::TypeConflict)
        );
        assert_eq!(m.dropped("b", Dropped::InvalidLabel), 3);
        assert_eq!(m.dropped("b", Dropped::TypeConflict), 1);
    }

    #[test]
    fn series_are_capped_per_binding() {
        let m = CapabilityMetrics::default();
        for i in 0..MAX_SERIES_PER_BINDING {
            let labels = vec![("i".to_string(), i.to_string())];
            m.record("b", "d", Kind::Gauge, "g", &labels, 1.0).unwrap();
        }
        let one_more = vec![("i".to_string(), "new".to_string())];
        assert_eq!(
            m.record("b", "d", Kind::Gauge, "g", &one_more, 1.0),
            Err(Dropped::SeriesLimit)
        );
        let existing = vec![("i".to_string(), "0".to_string())];
        assert_eq!(
            m.record("b", "d", Kind::Gauge, "g", &existing, 2.0),
            Ok(()),
            "a known series is still updated"
        );
        assert_eq!(
            m.record("other", "d", Kind::Gauge, "g", &one_more, 1.0),
            Ok(()),
            "another binding has its own cap"
        );
        assert_eq!(m.dropped("b", Dropped::SeriesLimit), 1);

        // A new version in service: the old one's series go, and so does
        // their room under the cap.
        let m = Arc::new(m);
        m.retire("b", Some("d2"));
        assert_eq!(
            m.record("b", "d2", Kind::Gauge, "g", &one_more, 1.0),
            Ok(())
        );
        let text = render(&m);
        assert!(!text.contains("digest=\"d\",i=\"0\""), "{text}");
        assert!(
            text.contains("binding=\"other\""),
            "other bindings keep theirs"
        );
    }
}
