//! The process's one wasmtime [`Engine`] and its epoch ticker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
    ProfilingStrategy,
};

/// How often the epoch advances; deadlines are rounded up to this.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Engine-wide settings.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Plugin calls that may run at once per set of call slots (also sizes
    /// the instance pool, which holds two sets).
    pub max_concurrent_calls: usize,
    /// Largest memory limit any plugin may be given (sizes pool slots).
    pub max_memory_bytes: usize,
    /// Try the pooling allocator first.
    pub pooling: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            max_concurrent_calls: std::thread::available_parallelism().map_or(8, |n| n.get() * 4),
            max_memory_bytes: 512 << 20,
            pooling: true,
        }
    }
}

/// Which instance allocator the engine ended up with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// Pre-reserved slots: fast instantiation.
    Pooling,
    /// mmap per instance: the fallback where pooling is not possible.
    OnDemand,
}

/// Memories, tables and core instances one plugin instance may have: the
/// pooling allocator's per-component bounds, and the limiter's otherwise.
pub const MAX_MEMORIES: usize = 4;
/// Tables per plugin instance.
pub const MAX_TABLES: usize = 16;
/// Core instances per plugin instance.
pub const MAX_CORE_INSTANCES: usize = 32;

/// One of the bounds above, as the pooling allocator takes it.
fn small(bound: usize) -> u32 {
    u32::try_from(bound).expect("a small constant")
}

fn base_config() -> Config {
    // Calls are async (wasmtime 48 always supports it): a guest blocked in
    // a WASI host call (a clock subscription) is a pending future that the
    // host's deadline timer can drop, not a blocked thread.
    let mut config = Config::new();
    config.wasm_component_model(true);
    // Plugins export plain (non-async) WIT functions. Without this, every
    // store sets up the component-model-async machinery: each call goes
    // through its task queue, and dropping the store disposes of a worker
    // fiber by building an error, which captures a backtrace whenever
    // RUST_BACKTRACE is set (a third of a call's time in `perf`, see
    // docs/benchmarks.md).
    config.concurrency_support(false);
    config.epoch_interruption(true);
    config.cranelift_opt_level(OptLevel::Speed);
    // For `perf`: with GANTRY_WASM_PERFMAP set, compiled plugin code is
    // listed in /tmp/perf-PID.map, so that samples in it are named by
    // function (docs/benchmarks.md).
    if std::env::var_os("GANTRY_WASM_PERFMAP").is_some() {
        config.profiler(ProfilingStrategy::PerfMap);
    }
    config
}

/// Build the engine, with the pooling allocator where the platform allows it
/// and the on-demand allocator otherwise.
pub(super) fn build_engine(settings: &EngineSettings) -> anyhow::Result<(Engine, Allocator)> {
    if settings.pooling {
        // Two sets of call slots: a runtime's and one more from
        // `Runtime::with_own_slots` (the operator's admission policies).
        let slots = u32::try_from(settings.max_concurrent_calls.max(1) * 2).unwrap_or(u32::MAX);
        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(slots)
            .total_core_instances(slots * 8)
            .total_memories(slots * 2)
            .total_tables(slots * 4)
            .max_memory_size(settings.max_memory_bytes)
            .max_core_instances_per_component(small(MAX_CORE_INSTANCES))
            .max_memories_per_component(small(MAX_MEMORIES))
            .max_tables_per_component(small(MAX_TABLES))
            // Calls run on fibres (async wasmtime), one stack per instance.
            .total_stacks(slots)
            // A slot's memory is reset between calls. Zeroing the first MiB
            // in place costs less than handing it back to the kernel and
            // taking a page fault per page on the next call (the largest cost
            // of a call in `perf`; see docs/benchmarks.md). At most
            // `total_memories` MiB stay resident.
            .linear_memory_keep_resident(4 << 20)
            // Where the kernel has PAGEMAP_SCAN (Linux 6.7+), only the pages
            // a call wrote are reset: the memset of the whole resident part
            // was 12% of a shadow run's CPU (docs/benchmarks.md).
            .pagemap_scan(Enabled::Auto)
            .table_keep_resident(64 << 10);
        let mut config = base_config();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        match Engine::new(&config) {
            Ok(engine) => return Ok((engine, Allocator::Pooling)),
            Err(e) => {
                tracing::warn!(error = %e, "pooling allocator unavailable, using on-demand allocation");
            }
        }
    }
    Ok((Engine::new(&base_config())?, Allocator::OnDemand))
}

/// A background thread advancing the engine's epoch every [`EPOCH_TICK`];
/// stops when dropped.
pub(super) struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Start ticking `engine`.
    pub(super) fn start(engine: Engine) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("gantry-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn epoch ticker thread");
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Whether the ticker thread is still running (for liveness checks).
    pub(super) fn is_alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Epoch ticks a call with `deadline` may run for.
pub(super) fn deadline_ticks(deadline: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    u64::try_from(deadline.as_nanos().div_ceil(tick))
        .unwrap_or(u64::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_leave_component_model_async_off() {
        for pooling in [true, false] {
            let settings = EngineSettings {
                max_concurrent_calls: 2,
                max_memory_bytes: 16 << 20,
                pooling,
            };
            let (engine, _) = build_engine(&settings).expect("engine");
            assert!(!engine.get_concurrency_support(), "pooling: {pooling}");
        }
    }

    #[test]
    fn deadlines_round_up_to_whole_ticks() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(EPOCH_TICK), 1);
        assert_eq!(deadline_ticks(EPOCH_TICK + Duration::from_nanos(1)), 2);
    }
}
