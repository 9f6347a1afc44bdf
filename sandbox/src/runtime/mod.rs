//! The plugin runtime: one wasmtime engine for the process, plugins loaded
//! once per digest, and a fresh sandboxed store for every call.
//!
//! Cost model, visible in the files: [`engine`] and [`cache`] are paid once
//! per process and once per plugin digest; [`call`] and [`store`] are paid
//! on every call. Calls run on tokio's blocking pool, never on the async
//! executor, and end by their deadline whatever the guest calls.

mod cache;
mod call;
mod capture;
mod engine;
mod imports;
mod limiter;
mod plugin;
mod store;

// `super::error` and `super::limits` in this module's files name these.
use crate::{error, limits};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

pub use crate::error::{CallError, LoadError};
pub use crate::limits::Limits;
pub use cache::{ComponentBytes, digest};
pub use engine::{
    Allocator, EPOCH_TICK, EngineSettings, MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES,
};
pub use plugin::{ConverterPlugin, PolicyPlugin, ReconcilerPlugin};
pub use store::{CAPTURE_BYTES, CallState, MAX_LOG_LINE, MAX_LOG_LINES, MAX_RANDOM_BYTES};

use crate::contract::generated::reconciler::gantry::plugin::{host, http, metrics, types};

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
    dirs::cache_dir().map(|dir| dir.join("gantry"))
}

/// Where compiled plugins are cached by default: `<user cache dir>/compiled`.
pub fn default_compile_cache_dir() -> Option<PathBuf> {
    user_cache_dir().map(|d| d.join("compiled"))
}

/// Shared by all plugins of the process. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
    /// The call slots of the plugins loaded through this runtime.
    slots: Arc<Slots>,
}

struct Inner {
    engine: Engine,
    allocator: Allocator,
    linker: Linker<CallState>,
    cache: cache::ComponentCache,
    ticker: engine::EpochTicker,
}

/// At most `max` calls at once; each holds a permit until its instance is
/// gone.
struct Slots {
    calls: Arc<Semaphore>,
    max: usize,
}

impl Slots {
    fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            calls: Arc::new(Semaphore::new(max)),
            max,
        })
    }
}

impl Runtime {
    /// Build the engine, the linker (WASI with an empty context, linked
    /// async so that waits in host calls can be abandoned, the `log`
    /// import, and the `http` and `metrics` imports, which do what a call's
    /// grants allow) and start the epoch ticker.
    pub fn new(settings: RuntimeSettings) -> anyhow::Result<Self> {
        let (engine, allocator) = engine::build_engine(&settings.engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        host::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        types::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        // Linked for every plugin; what a call may do is its `Grants`.
        http::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        metrics::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
        let cache = cache::ComponentCache::new(&engine, settings.cache_dir);
        let ticker = engine::EpochTicker::start(engine.clone());
        tracing::debug!(?allocator, "plugin runtime ready");
        Ok(Self {
            inner: Arc::new(Inner {
                engine,
                allocator,
                linker,
                cache,
                ticker,
            }),
            slots: Slots::new(settings.engine.max_concurrent_calls.max(1)),
        })
    }

    /// The same engine and compile cache with call slots of its own, as
    /// many as this runtime has: plugins loaded through it never wait for
    /// this runtime's calls, nor these for theirs. The operator gives
    /// admission policies their own, so reconciles that take every slot
    /// (up to their deadline) never hold up a webhook. The instance pool
    /// has room for two sets of slots.
    #[must_use]
    pub fn with_own_slots(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            slots: Slots::new(self.slots.max),
        }
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

    /// Calls holding a concurrency slot now: each holds it until its
    /// instance is gone, not merely until its caller stops waiting.
    pub fn calls_in_flight(&self) -> usize {
        self.slots.max - self.slots.calls.available_permits()
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
        self.load_reconciler_digested(name, &digest(bytes), bytes)
    }

    /// Load a reconcile plugin from bytes whose digest is already known,
    /// without hashing them again (a large component's sha256 is most of a
    /// precompiled load).
    pub fn load_reconciler_from(
        &self,
        name: &str,
        component: &ComponentBytes,
    ) -> Result<Arc<ReconcilerPlugin>, LoadError> {
        self.load_reconciler_digested(name, component.digest(), component.bytes())
    }

    fn load_reconciler_digested(
        &self,
        name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Arc<ReconcilerPlugin>, LoadError> {
        let component = self.compile(name, digest, bytes)?;
        ReconcilerPlugin::new(self.clone(), name, digest.to_string(), &component).map(Arc::new)
    }

    /// Load an admission policy plugin from component bytes.
    pub fn load_policy(&self, name: &str, bytes: &[u8]) -> Result<Arc<PolicyPlugin>, LoadError> {
        let digest = digest(bytes);
        let compiled = self.compile(name, &digest, bytes)?;
        PolicyPlugin::new(self.clone(), name, digest, &compiled).map(Arc::new)
    }

    /// Load an admission policy plugin from bytes whose digest is known.
    pub fn load_policy_from(
        &self,
        name: &str,
        component: &ComponentBytes,
    ) -> Result<Arc<PolicyPlugin>, LoadError> {
        let digest = component.digest();
        let compiled = self.compile(name, digest, component.bytes())?;
        PolicyPlugin::new(self.clone(), name, digest.to_string(), &compiled).map(Arc::new)
    }

    /// Load a CRD converter plugin from component bytes.
    pub fn load_converter(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<Arc<ConverterPlugin>, LoadError> {
        let digest = digest(bytes);
        let compiled = self.compile(name, &digest, bytes)?;
        ConverterPlugin::new(self.clone(), name, digest, &compiled).map(Arc::new)
    }

    /// Load a CRD converter plugin from bytes whose digest is known.
    pub fn load_converter_from(
        &self,
        name: &str,
        component: &ComponentBytes,
    ) -> Result<Arc<ConverterPlugin>, LoadError> {
        let digest = component.digest();
        let compiled = self.compile(name, digest, component.bytes())?;
        ConverterPlugin::new(self.clone(), name, digest.to_string(), &compiled).map(Arc::new)
    }

    /// Forget the compiled component of `digest` held in memory (the disk
    /// cache, if any, keeps it): its next load reads the disk cache, or
    /// compiles without one.
    pub fn forget_compiled(&self, digest: &str) {
        self.inner.cache.forget(digest);
    }

    /// The compiled component of `bytes`, whose sha256 is `digest`:
    /// compiled, unless the digest is cached.
    fn compile(
        &self,
        name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<wasmtime::component::Component, LoadError> {
        self.inner
            .cache
            .get_or_compile(&self.inner.engine, name, digest, bytes)
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self) -> &Linker<CallState> {
        &self.inner.linker
    }

    /// Wait for a free slot (at most `max_concurrent_calls` are taken).
    async fn slot(&self) -> Result<call::Slot, CallError> {
        self.slots
            .calls
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| CallError::Host(e.to_string()))
    }

    /// Wait for a free slot from synchronous code (without entering an
    /// async runtime when one is free).
    pub(crate) fn slot_blocking(&self) -> Result<call::Slot, CallError> {
        match self.slots.calls.clone().try_acquire_owned() {
            Ok(slot) => Ok(slot),
            Err(_) => call::block_on(|| self.slot()),
        }
    }

    /// Take a slot, then run `call` with it on the blocking pool. The call
    /// owns the slot: a caller that stops waiting does not free it.
    pub(crate) async fn run_blocking<R: Send + 'static>(
        &self,
        call: impl FnOnce(call::Slot) -> Result<R, CallError> + Send + 'static,
    ) -> Result<R, CallError> {
        let slot = self.slot().await?;
        tokio::task::spawn_blocking(move || call(slot))
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
