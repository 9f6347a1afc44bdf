//! The per-call sandbox: a fresh [`Store`] with an empty WASI context,
//! captured stdout/stderr, a memory limiter and the call's deadline.

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::engine::deadline_ticks;
use super::limits::Limits;

/// Bytes of stdout (and of stderr) kept per call; the rest is dropped.
const CAPTURE_BYTES: usize = 64 << 10;
/// Log lines (the `log` import) accepted per call; the rest is counted.
const MAX_LOG_LINES: usize = 256;
/// Longest log line kept, bytes.
const MAX_LOG_LINE: usize = 4096;

/// Refuses memory growth past the limit and remembers that it did, so a
/// trap that follows is reported as out-of-memory rather than as a trap.
pub struct MemoryLimiter {
    limit: usize,
    exceeded: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.exceeded = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Everything a call's store holds.
pub struct CallState {
    plugin: String,
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: MemoryLimiter,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    log_lines: usize,
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
        self.limiter.exceeded
    }

    /// What the plugin wrote to stderr, lossily decoded.
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim()
            .to_string()
    }

    /// Forward captured stdout/stderr to the logs, line by line.
    pub fn flush_output(&self) {
        for (stream, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let bytes = pipe.contents();
            for line in String::from_utf8_lossy(&bytes)
                .lines()
                .filter(|l| !l.is_empty())
            {
                tracing::info!(plugin = %self.plugin, stream, "{line}");
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
/// environment, no arguments, no network; stdout and stderr captured.
pub fn new_store(engine: &Engine, plugin: &str, limits: &Limits) -> Store<CallState> {
    let stdout = MemoryOutputPipe::new(CAPTURE_BYTES);
    let stderr = MemoryOutputPipe::new(CAPTURE_BYTES);
    let mut wasi = WasiCtx::builder();
    wasi.stdout(stdout.clone())
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let state = CallState {
        plugin: plugin.to_string(),
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: MemoryLimiter {
            limit: limits.memory_bytes,
            exceeded: false,
        },
        stdout,
        stderr,
        log_lines: 0,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(deadline_ticks(limits.deadline));
    store.epoch_deadline_trap();
    store
}
