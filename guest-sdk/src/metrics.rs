//! Plugin metrics through the host's `metrics` import, exported on the
//! operator's `/metrics` as `gantry_plugin_metric_<name>` with `binding` and
//! `digest` labels.
//!
//! Names and label names are Prometheus names (`[a-zA-Z_][a-zA-Z0-9_]*`,
//! at most 64 characters; a counter's `_total` is added by the host); at
//! most 8 labels, values of at most 128 bytes. The host caps the distinct
//! series of a binding (200); a sample that breaks a rule or passes the
//! cap is dropped and counted (`gantry_plugin_metrics_dropped_total`), and
//! the plugin is not told. Shadow runs record nothing. Natively (unit
//! tests) samples are discarded.
//!
//! ```
//! gantry_sdk::metrics::counter_add("backups_deleted", &[("outcome", "done")], 1.0);
//! ```

/// Add `value` (>= 0) to counter `name`.
pub fn counter_add(name: &str, labels: &[(&str, &str)], value: f64) {
    record(Kind::Counter, name, labels, value);
}

/// Set gauge `name` to `value`.
pub fn gauge_set(name: &str, labels: &[(&str, &str)], value: f64) {
    record(Kind::Gauge, name, labels, value);
}

/// Observe `value` in histogram `name` (buckets 5 ms .. 10 s).
pub fn histogram_observe(name: &str, labels: &[(&str, &str)], value: f64) {
    record(Kind::Histogram, name, labels, value);
}

/// Which import to call.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

fn record(kind: Kind, name: &str, labels: &[(&str, &str)], value: f64) {
    #[cfg(target_arch = "wasm32")]
    crate::guest::metric(kind, name, labels, value);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (kind, name, labels, value);
}
