//! Measuring Gantry, side by side in one run. Numbers, never assertions:
//! benchmarks report, tests decide.
//!
//! - this module: timing calls, percentiles, the text table;
//! - [`dispatch`]: one reconcile call native, in the sandbox, and over an
//!   HTTP webhook, at three parent sizes;
//! - [`converge`]: N parents with K children each on an API server, until
//!   every parent is Synced, then a resync and a spec change;
//! - [`density`]: N operators in one cluster, each its own CRD: Gantry's
//!   bindings in one process, the peer's one process each;
//! - [`load`]: loading a plugin, compiled and precompiled;
//! - [`chart`]: SVG charts of dispatch and convergence.

// Counts, sizes and durations become f64 for rates, ratios and charts; beyond
// 2^52 the lost precision would not show in a benchmark's numbers.
#![allow(clippy::cast_precision_loss)]

pub mod chart;
pub mod churn;
pub mod contender;
pub mod converge;
pub mod density;
pub mod dispatch;
pub mod load;

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::time::{Duration, Instant};

use gantry_sdk::{Reconciler, Request};

use gantry_sandbox::runtime::{Limits, ReconcilerPlugin};

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

/// The plugin through the sandbox and then, when the native Rust memcached
/// logic gives the same answer to `request` (the plugin is memcached, in
/// whatever language), that native logic: a plugin is only compared with
/// a native build of itself.
pub fn plugin_vs_native(
    plugin: &ReconcilerPlugin,
    request: &Request,
    limits: &Limits,
    warmup: usize,
    calls: usize,
) -> anyhow::Result<Vec<Measurement>> {
    let answer = plugin.reconcile_blocking(request, limits)?;
    let wasm = measure(
        &format!("{} (wasm, sandboxed)", plugin.name()),
        warmup,
        calls,
        || {
            plugin.reconcile_blocking(request, limits)?;
            Ok(())
        },
    )?;
    let native_answer = memcached::Memcached::reconcile(request.clone());
    if native_answer.ok().as_ref() != Some(&answer) {
        return Ok(vec![wasm]);
    }
    let native = measure("memcached (native Rust)", warmup, calls, || {
        memcached::Memcached::reconcile(request.clone())?;
        Ok(())
    })?;
    Ok(vec![wasm, native])
}

/// A plain-text table of `rows`, with each row's cost relative to the last
/// (no ratio column for a single row).
pub fn render(rows: &[Measurement]) -> String {
    table(rows, (rows.len() > 1).then(|| rows.len() - 1))
}

/// A plain-text table of `rows`, without ratios.
pub fn render_plain(rows: &[Measurement]) -> String {
    table(rows, None)
}

/// A plain-text table of `rows`, with each row's p50 relative to row `base`.
pub fn render_against(rows: &[Measurement], base: usize) -> String {
    table(rows, Some(base))
}

/// The table of `rows`, with a ratio column against row `base` if any.
fn table(rows: &[Measurement], base: Option<usize>) -> String {
    let base = base.map(|b| rows.get(b).map_or(1.0, |r| r.p50.as_secs_f64()).max(1e-12));
    let mut out = format!(
        "{:<36} {:>8} {:>12} {:>12} {:>12}",
        "implementation", "calls", "calls/s", "p50", "p99"
    );
    if base.is_some() {
        let _ = write!(out, " {:>10}", "p50 ratio");
    }
    out.push('\n');
    for r in rows {
        let _ = write!(
            out,
            "{:<36} {:>8} {:>12.0} {:>12} {:>12}",
            r.name,
            r.calls,
            r.calls_per_sec,
            format!("{:.1?}", r.p50),
            format!("{:.1?}", r.p99)
        );
        if let Some(base) = base {
            let _ = write!(out, " {:>9.1}x", r.p50.as_secs_f64() / base);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, p50_micros: u64) -> Measurement {
        Measurement {
            name: name.into(),
            calls: 10,
            calls_per_sec: 100.0,
            p50: Duration::from_micros(p50_micros),
            p99: Duration::from_micros(p50_micros * 2),
            samples: Vec::new(),
        }
    }

    #[test]
    fn tables_give_ratios_against_the_last_row_and_none_for_one_row() {
        let two = render(&[row("wasm", 40), row("native", 10)]);
        let lines: Vec<&str> = two.lines().collect();
        assert!(lines[0].ends_with("p50 ratio"), "{two}");
        assert!(
            lines[1].ends_with("4.0x") && lines[2].ends_with("1.0x"),
            "{two}"
        );
        let one = render(&[row("wasm", 40)]);
        assert!(!one.contains("ratio") && !one.contains("1.0x"), "{one}");
        assert_eq!(one.lines().count(), 2, "{one}");
        assert!(one.lines().nth(1).unwrap().starts_with("wasm"), "{one}");
    }

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
