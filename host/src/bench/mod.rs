//! Measuring Gantry, side by side in one run. Numbers, never assertions:
//! benchmarks report, tests decide.
//!
//! - this module: timing calls, percentiles, the text table;
//! - [`dispatch`]: one reconcile call native, in the sandbox, and over an
//!   HTTP webhook, at three parent sizes;
//! - [`converge`]: N parents with K children each on an API server, until
//!   every parent is Synced, then a resync and a spec change;
//! - [`chart`]: SVG charts of both.

// Counts, sizes and durations become f64 for rates, ratios and charts; beyond
// 2^52 the lost precision would not show in a benchmark's numbers.
#![allow(clippy::cast_precision_loss)]

pub mod chart;
pub mod contender;
pub mod converge;
pub mod dispatch;

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::time::{Duration, Instant};

use gantry_sdk::{Reconciler, Request};

use crate::runtime::{Limits, ReconcilerPlugin};

/// One measured way of computing the same thing.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Measurement {
    /// What was measured.
    pub name: String,
    /// Calls made (after warm-up).
    pub calls: usize,
    /// Calls per second over the measured calls.
    pub calls_per_sec: f64,
    /// Median latency.
    pub p50: Duration,
    /// 99th percentile latency.
    pub p99: Duration,
    /// Every measured latency, sorted (for charts).
    #[serde(skip)]
    pub samples: Vec<Duration>,
}

/// Time `calls` calls of `f` after `warmup` unmeasured ones.
pub fn measure(
    name: &str,
    warmup: usize,
    calls: usize,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Measurement> {
    for _ in 0..warmup {
        f()?;
    }
    let calls = calls.max(1);
    let mut latencies = Vec::with_capacity(calls);
    let start = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        f()?;
        latencies.push(t.elapsed());
    }
    let total = start.elapsed();
    latencies.sort_unstable();
    Ok(Measurement {
        name: name.to_string(),
        calls,
        calls_per_sec: calls as f64 / total.as_secs_f64(),
        p50: percentile(&latencies, 50.0),
        p99: percentile(&latencies, 99.0),
        samples: latencies,
    })
}

/// The `q`th percentile of sorted `latencies` (nearest rank).
// `q` is in 0..=100, so the rank is in 0..=len.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The plugin through the sandbox, and the native Rust memcached logic, on
/// the same request, in that order.
pub fn plugin_vs_native(
    plugin: &ReconcilerPlugin,
    request: &Request,
    limits: &Limits,
    warmup: usize,
    calls: usize,
) -> anyhow::Result<Vec<Measurement>> {
    let wasm = measure(
        &format!("{} (wasm, sandboxed)", plugin.name()),
        warmup,
        calls,
        || {
            plugin.reconcile_blocking(request, limits)?;
            Ok(())
        },
    )?;
    let native = measure("memcached (native Rust)", warmup, calls, || {
        memcached::Memcached::reconcile(request.clone())?;
        Ok(())
    })?;
    Ok(vec![wasm, native])
}

/// A plain-text table of `rows`, with each row's cost relative to the last.
pub fn render(rows: &[Measurement]) -> String {
    render_against(rows, rows.len().saturating_sub(1))
}

/// A plain-text table of `rows`, with each row's p50 relative to row `base`.
pub fn render_against(rows: &[Measurement], base: usize) -> String {
    let base = rows
        .get(base)
        .map_or(1.0, |r| r.p50.as_secs_f64())
        .max(1e-12);
    let mut out = format!(
        "{:<36} {:>8} {:>12} {:>12} {:>12} {:>10}\n",
        "implementation", "calls", "calls/s", "p50", "p99", "p50 ratio"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{:<36} {:>8} {:>12.0} {:>12} {:>12} {:>9.1}x",
            r.name,
            r.calls,
            r.calls_per_sec,
            format!("{:.1?}", r.p50),
            format!("{:.1?}", r.p99),
            r.p50.as_secs_f64() / base
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_uses_nearest_rank() {
        let sorted: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&sorted, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&sorted, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&sorted[..1], 99.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn measure_counts_calls_and_propagates_errors() {
        let mut n = 0;
        let m = measure("x", 2, 5, || {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((m.calls, n), (5, 7));
        assert!(measure("x", 0, 1, || anyhow::bail!("boom")).is_err());
    }
}
