//! Operator counters, kept in memory and read by tests and the metrics
//! endpoint.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// Counters per binding.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BindingCounters {
    /// Reconciles finished.
    pub reconciles: u64,
    /// Reconciles that failed.
    pub reconcile_errors: u64,
    /// Total reconcile time.
    pub reconcile_time: Duration,
    /// Children written with server-side apply.
    pub applies: u64,
    /// Applies skipped because nothing would change.
    pub skipped_applies: u64,
    /// Children pruned.
    pub prunes: u64,
    /// Plugin failures by kind (timeout, trap, ...).
    pub plugin_failures: BTreeMap<String, u64>,
    /// Plugin versions loaded into service.
    pub plugin_loads: u64,
    /// New versions refused (the old one kept serving).
    pub plugin_load_failures: u64,
}

/// All counters of the operator, and whether it is ready.
#[derive(Debug, Default)]
pub struct Metrics {
    bindings: Mutex<BTreeMap<String, BindingCounters>>,
    ready: std::sync::atomic::AtomicBool,
    active_bindings: std::sync::atomic::AtomicUsize,
}

impl Metrics {
    /// Mark the operator ready (initial bindings processed) or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready
            .store(ready, std::sync::atomic::Ordering::Relaxed);
    }

    /// Record how many bindings are in service.
    pub fn set_active_bindings(&self, count: usize) {
        self.active_bindings
            .store(count, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many bindings are in service.
    pub fn active_bindings(&self) -> usize {
        self.active_bindings
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the operator has processed its initial bindings.
    pub fn is_ready(&self) -> bool {
        self.ready.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn update(&self, binding: &str, f: impl FnOnce(&mut BindingCounters)) {
        f(self
            .bindings
            .lock()
            .unwrap()
            .entry(binding.to_string())
            .or_default());
    }

    /// A reconcile finished.
    pub fn record_reconcile(&self, binding: &str, took: Duration, ok: bool) {
        self.update(binding, |c| {
            c.reconciles += 1;
            c.reconcile_time += took;
            if !ok {
                c.reconcile_errors += 1;
            }
        });
    }

    /// Children written, skipped and pruned by one reconcile.
    pub fn record_writes(&self, binding: &str, applied: usize, skipped: usize, pruned: usize) {
        self.update(binding, |c| {
            c.applies += applied as u64;
            c.skipped_applies += skipped as u64;
            c.prunes += pruned as u64;
        });
    }

    /// A plugin call failed with `kind`.
    pub fn record_plugin_failure(&self, binding: &str, kind: &str) {
        self.update(binding, |c| {
            *c.plugin_failures.entry(kind.to_string()).or_default() += 1
        });
    }

    /// A plugin version was put into service (`ok`) or refused.
    pub fn record_plugin_load(&self, binding: &str, ok: bool) {
        self.update(binding, |c| {
            if ok {
                c.plugin_loads += 1
            } else {
                c.plugin_load_failures += 1
            }
        });
    }

    /// A copy of one binding's counters.
    pub fn binding(&self, binding: &str) -> BindingCounters {
        self.bindings
            .lock()
            .unwrap()
            .get(binding)
            .cloned()
            .unwrap_or_default()
    }

    /// A copy of every binding's counters.
    pub fn snapshot(&self) -> BTreeMap<String, BindingCounters> {
        self.bindings.lock().unwrap().clone()
    }
}
