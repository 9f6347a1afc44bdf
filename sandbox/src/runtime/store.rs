//! The per-call sandbox: a fresh [`Store`] with an empty WASI context,
//! captured stdout/stderr, a memory limiter and the call's deadline.
//!
//! What the guest sees of WASI: no files, environment, arguments, sockets or
//! name lookups; stdin is empty. The wall clock and the monotonic clock are
//! the host's, and random bytes come from the host's generator (at most
//! [`MAX_RANDOM_BYTES`] per request). A sleep or any other wait is a real
//! wait, but it counts against the call's deadline like everything else: a
//! call still waiting at its deadline is abandoned and its instance dropped.

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capture::Capture;
use super::engine::deadline_ticks;
use super::limiter::MemoryLimiter;
use super::limits::Limits;
use crate::capability::{Grants, HttpCall};

/// Bytes of stdout (and of stderr) kept per call; the rest is dropped.
pub const CAPTURE_BYTES: usize = 64 << 10;
/// Log lines (the `log` import) accepted per call; the rest is counted.
pub const MAX_LOG_LINES: usize = 256;
/// Longest log line kept, bytes.
pub const MAX_LOG_LINE: usize = 4096;
/// Most random bytes one `get-random-bytes` may ask for.
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// Everything a call's store holds.
pub struct CallState {
    plugin: String,
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    stdout: Capture,
    stderr: Capture,
    log_lines: usize,
    /// What the call may use besides computing.
    pub(crate) grants: Grants,
    /// What it has used of its HTTP grant.
    pub(crate) http: HttpCall,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl CallState {
    /// Whether the memory limiter refused a growth during this call.
    pub fn memory_exceeded(&self) -> bool {
        self.limiter.exceeded()
    }

    /// What the plugin wrote to stderr, lossily decoded.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim()
            .to_string()
    }

    /// Forward captured stdout/stderr to the logs, line by line, and say
    /// how much was dropped past [`CAPTURE_BYTES`].
    pub fn flush_output(&self) {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = pipe.contents();
            for line in String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| !l.is_empty())
            {
                tracing::info!(plugin = %self.plugin, stream, "{line}");
            }
            let dropped = pipe.dropped();
            if dropped > 0 {
                tracing::warn!(plugin = %self.plugin, stream, dropped, "plugin output past {CAPTURE_BYTES} bytes dropped");
            }
        }
    }

    /// The `log` import: one line into the host's logs.
    pub fn log(&mut self, level: gantry_sdk::LogLevel, message: &str) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                tracing::warn!(plugin = %self.plugin, "plugin log limit reached; further lines dropped");
            }
            return;
        }
        let message = truncate(message, MAX_LOG_LINE);
        let plugin = self.plugin.as_str();
        match level {
            gantry_sdk::LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            gantry_sdk::LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            gantry_sdk::LogLevel::Info => tracing::info!(plugin, "{message}"),
            gantry_sdk::LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            gantry_sdk::LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A fresh store for one call of `plugin` under `limits`: no files, no
/// environment, no arguments, no network but what `grants` allow; stdout
/// and stderr captured; the epoch deadline set (it stops wasm code; the
/// caller's timer stops waits in host calls, HTTP requests included).
pub(super) fn new_store(
    engine: &Engine,
    plugin: &str,
    limits: &Limits,
    grants: Grants,
) -> Store<CallState> {
    let stdout = Capture::new(CAPTURE_BYTES);
    let stderr = Capture::new(CAPTURE_BYTES);
    let mut wasi = WasiCtx::builder();
    wasi.stdout(stdout.clone())
        .stderr(stderr.clone())
        .max_random_size(MAX_RANDOM_BYTES)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let state = CallState {
        plugin: plugin.to_string(),
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: MemoryLimiter::new(limits.memory_bytes),
        stdout,
        stderr,
        log_lines: 0,
        http: HttpCall {
            sent: 0,
            deadline: std::time::Instant::now() + limits.deadline,
            shadow: grants.shadow,
            shadow_refused: false,
        },
        grants,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(deadline_ticks(limits.deadline));
    store.epoch_deadline_trap();
    store
}

#[cfg(test)]
mod tests {
    use wasmtime::component::Component;

    use super::*;
    use crate::runtime::{EngineSettings, Runtime, RuntimeSettings};

    /// Instantiate the component `wat` under a memory cap of `limit`:
    /// (instantiated, the limiter refused a growth).
    fn instantiate(pooling: bool, wat: &str, limit: usize) -> (bool, bool) {
        let rt = Runtime::new(RuntimeSettings {
            engine: EngineSettings {
                pooling,
                max_concurrent_calls: 2,
                ..EngineSettings::default()
            },
            cache_dir: None,
        })
        .unwrap();
        let component = Component::new(rt.engine(), wat).unwrap();
        let limits = Limits {
            memory_bytes: limit,
            ..Limits::default()
        };
        let mut store = new_store(rt.engine(), "wat", &limits, Grants::default());
        let instantiated =
            wasmtime_wasi::runtime::in_tokio(rt.linker().instantiate_async(&mut store, &component))
                .is_ok();
        (instantiated, store.data().memory_exceeded())
    }

    #[test]
    fn the_memory_cap_holds_for_all_memories_of_an_instance() {
        // Two core instances of 3 MiB each: each fits a 4 MiB cap alone.
        let two_memories = r"(component
            (core module $m (memory 48))
            (core instance (instantiate $m))
            (core instance (instantiate $m)))";
        for pooling in [true, false] {
            assert_eq!(instantiate(pooling, two_memories, 8 << 20), (true, false));
            assert_eq!(
                instantiate(pooling, two_memories, 4 << 20),
                (false, true),
                "pooling: {pooling}"
            );
        }
    }

    #[test]
    fn tables_count_against_the_memory_cap() {
        // 300,000 elements of 8 bytes: 2.4 MB (on-demand allocation; the
        // pool bounds table sizes itself).
        let table = r"(component
            (core module $t (table 300000 funcref))
            (core instance (instantiate $t)))";
        assert_eq!(instantiate(false, table, 4 << 20), (true, false));
        assert_eq!(instantiate(false, table, 2 << 20), (false, true));
    }
}
