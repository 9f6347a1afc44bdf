//! The plugin runtime: one wasmtime engine for the process, plugins loaded
//! once per digest, and a fresh sandboxed store for every call.
//!
//! Cost model, visible in the files: [`engine`] and [`cache`] are paid once
//! per process and once per plugin digest; [`store`] is paid on every call.
//! Calls run on tokio's blocking pool, never on the async executor.

mod cache;
mod engine;
mod error;
mod limits;
mod plugin;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

pub use cache::digest;
pub use engine::{Allocator, EPOCH_TICK, EngineSettings};
pub use error::{CallError, LoadError};
pub use limits::Limits;
pub use plugin::{PolicyPlugin, ReconcilerPlugin};
pub use store::CallState;

use crate::contract::bindings::reconciler::gantry::plugin::{host, types};

/// Runtime settings.
#[derive(Debug, Clone, Default)]
pub struct RuntimeSettings {
    /// Engine and pool settings.
    pub engine: EngineSettings,
    /// Where compiled plugins are cached on disk (none: memory only).
    pub cache_dir: Option<PathBuf>,
}

/// The user's cache directory for Gantry: `$XDG_CACHE_HOME/gantry`, else
/// `~/.cache/gantry`; `None` when neither is known.
pub fn user_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(base.join("gantry"))
}

/// Where compiled plugins are cached by default: `<user cache dir>/compiled`.
pub fn default_compile_cache_dir() -> Option<PathBuf> {
    user_cache_dir().map(|d| d.join("compiled"))
}

/// Shared by all plugins of the process. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    allocator: Allocator,
    linker: Linker<CallState>,
    cache: cache::ComponentCache,
    calls: Arc<Semaphore>,
    ticker: engine::EpochTicker,
}

impl Runtime {
    /// Build the engine, the linker (WASI with an empty context, and the
    /// `log` import) and start the epoch ticker.
    pub fn new(settings: RuntimeSettings) -> anyhow::Result<Self> {
        let (engine, allocator) = engine::build_engine(&settings.engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        host::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        types::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        let cache = cache::ComponentCache::new(&engine, settings.cache_dir);
        let ticker = engine::EpochTicker::start(engine.clone());
        tracing::debug!(?allocator, "plugin runtime ready");
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                allocator,
                linker,
                cache,
                calls: Arc::new(Semaphore::new(settings.engine.max_concurrent_calls.max(1))),
                ticker,
            }),
        })
    }

    /// A runtime with default settings and no disk cache.
    pub fn with_defaults() -> anyhow::Result<Self> {
        Self::new(RuntimeSettings::default())
    }

    /// The instance allocator in use.
    pub fn allocator(&self) -> Allocator {
        self.inner.allocator
    }

    /// Components compiled so far (a reload of a known digest adds none).
    pub fn compiles(&self) -> u64 {
        self.inner.cache.compiles()
    }

    /// Components loaded from the on-disk cache so far.
    pub fn disk_cache_hits(&self) -> u64 {
        self.inner.cache.disk_hits()
    }

    /// Whether the runtime's background thread is alive.
    pub fn is_alive(&self) -> bool {
        self.inner.ticker.is_alive()
    }

    /// Load a reconcile plugin from component bytes. Compiles unless the
    /// digest is already cached.
    pub fn load_reconciler(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<Arc<ReconcilerPlugin>, LoadError> {
        let digest = digest(bytes);
        let component =
            self.inner
                .cache
                .get_or_compile(&self.inner.engine, name, &digest, bytes)?;
        ReconcilerPlugin::new(self.clone(), name, digest, &component).map(Arc::new)
    }

    /// Load an admission policy plugin from component bytes.
    pub fn load_policy(&self, name: &str, bytes: &[u8]) -> Result<Arc<PolicyPlugin>, LoadError> {
        let digest = digest(bytes);
        let component =
            self.inner
                .cache
                .get_or_compile(&self.inner.engine, name, &digest, bytes)?;
        PolicyPlugin::new(self.clone(), name, digest, &component).map(Arc::new)
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self) -> &Linker<CallState> {
        &self.inner.linker
    }

    /// Run `call` on the blocking pool, at most `max_concurrent_calls` at once.
    pub(crate) async fn run_blocking<R: Send + 'static>(
        &self,
        call: impl FnOnce() -> Result<R, CallError> + Send + 'static,
    ) -> Result<R, CallError> {
        let _permit = self
            .inner
            .calls
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| CallError::Host(e.to_string()))?;
        tokio::task::spawn_blocking(call)
            .await
            .map_err(|e| CallError::Host(format!("plugin call task failed: {e}")))?
    }
}

impl host::Host for CallState {
    fn log(&mut self, level: types::LogLevel, message: String) {
        let level = match level {
            types::LogLevel::Trace => gantry_sdk::LogLevel::Trace,
            types::LogLevel::Debug => gantry_sdk::LogLevel::Debug,
            types::LogLevel::Info => gantry_sdk::LogLevel::Info,
            types::LogLevel::Warn => gantry_sdk::LogLevel::Warn,
            types::LogLevel::Error => gantry_sdk::LogLevel::Error,
        };
        CallState::log(self, level, &message);
    }
}

impl types::Host for CallState {}
