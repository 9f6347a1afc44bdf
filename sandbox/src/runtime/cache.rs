//! Compiled-component cache, keyed by the plugin's sha256 digest and the
//! engine's compatibility hash, in memory and (optionally) on disk, so a
//! reload of a known digest costs no compilation.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::error::LoadError;

/// Components kept in memory; the oldest is dropped past this.
const MEMORY_ENTRIES: usize = 128;

/// The sha256 of `bytes` as lowercase hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Cache of compiled components.
pub(super) struct ComponentCache {
    dir: Option<PathBuf>,
    engine_hash: String,
    memory: Mutex<(HashMap<String, Component>, Vec<String>)>,
    compiles: AtomicU64,
    disk_hits: AtomicU64,
}

impl ComponentCache {
    /// A cache for `engine`, persisting compiled code under `dir` if given.
    pub(super) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir,
            engine_hash: format!("{:016x}", hasher.finish()),
            memory: Mutex::new((HashMap::new(), Vec::new())),
            compiles: AtomicU64::new(0),
            disk_hits: AtomicU64::new(0),
        }
    }

    /// How many components this cache compiled (rather than reused).
    pub(super) fn compiles(&self) -> u64 {
        self.compiles.load(Ordering::Relaxed)
    }

    /// How many components were loaded from the on-disk cache.
    pub(super) fn disk_hits(&self) -> u64 {
        self.disk_hits.load(Ordering::Relaxed)
    }

    fn disk_path(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest}-{}.cwasm", self.engine_hash)))
    }

    /// The compiled component for `bytes` (whose sha256 is `digest`).
    pub(super) fn get_or_compile(
        &self,
        engine: &Engine,
        name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        if let Some(component) = self.memory.lock().unwrap().0.get(digest) {
            return Ok(component.clone());
        }
        let component = match self
            .disk_path(digest)
            .and_then(|p| load_from_disk(engine, &p))
        {
            Some(component) => {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                component
            }
            None => self.compile(engine, name, digest, bytes)?,
        };
        let mut memory = self.memory.lock().unwrap();
        let (map, order) = &mut *memory;
        if map.insert(digest.to_string(), component.clone()).is_none() {
            order.push(digest.to_string());
            if order.len() > MEMORY_ENTRIES {
                let oldest = order.remove(0);
                map.remove(&oldest);
            }
        }
        Ok(component)
    }

    /// Drop `digest` from the memory cache; the disk cache keeps it, so the
    /// next load of it is a precompiled load.
    pub(super) fn forget(&self, digest: &str) {
        let mut memory = self.memory.lock().unwrap();
        let (map, order) = &mut *memory;
        if map.remove(digest).is_some() {
            order.retain(|d| d != digest);
        }
    }

    fn compile(
        &self,
        engine: &Engine,
        name: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        check_header(name, bytes)?;
        self.compiles.fetch_add(1, Ordering::Relaxed);
        let invalid = |e: wasmtime::Error| LoadError::Invalid {
            name: name.to_string(),
            detail: format!("{e:#}"),
        };
        let Some(path) = self.disk_path(digest) else {
            return Component::new(engine, bytes).map_err(invalid);
        };
        let compiled = engine.precompile_component(bytes).map_err(invalid)?;
        if let Err(e) = store_on_disk(&path, &compiled) {
            // The cache is an optimisation: serve the plugin anyway.
            tracing::warn!(plugin = name, path = %path.display(), error = %e, "could not write compiled plugin cache");
        }
        // SAFETY: `compiled` was produced just now by `precompile_component`
        // of this very engine.
        unsafe { Component::deserialize(engine, &compiled) }.map_err(invalid)
    }
}

/// Tell "not wasm" and "a core module" apart from a real component, so the
/// error says what the user gave us.
fn check_header(name: &str, bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        let detail = if bytes.is_empty() {
            "the file is empty".to_string()
        } else {
            format!(
                "it starts with {:02x?} instead of \\0asm",
                &bytes[..bytes.len().min(4)]
            )
        };
        return Err(LoadError::NotWasm {
            name: name.to_string(),
            detail,
        });
    }
    // Bytes 6..8 are the layer: 0 for a core module, 1 for a component.
    if bytes[6..8] == [0, 0] {
        return Err(LoadError::CoreModule {
            name: name.to_string(),
        });
    }
    Ok(())
}

fn load_from_disk(engine: &Engine, path: &Path) -> Option<Component> {
    // Read rather than map the file: a mapped file truncated by someone else
    // would kill the process with SIGBUS.
    let bytes = std::fs::read(path).ok()?;
    // SAFETY: the file is ours, written by `precompile_component` of an
    // engine with the same compatibility hash (it is in the file name);
    // wasmtime checks the header again and refuses a mismatch.
    match unsafe { Component::deserialize(engine, &bytes) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled plugin cache entry");
            let _ = std::fs::remove_file(path);
            None
        }
    }
}

fn store_on_disk(path: &Path, compiled: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    // Write then rename, so a crash never leaves a torn entry behind.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, compiled)?;
    std::fs::rename(&tmp, path)
}
