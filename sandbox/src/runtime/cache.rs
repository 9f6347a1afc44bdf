//! Compiled-component cache, keyed by the plugin's sha256 digest and the
//! engine's compatibility hash, in memory and (optionally) on disk, so a
//! reload of a known digest costs no compilation.
//!
//! # What the disk cache trusts, and why
//!
//! A compiled file is machine code that the process maps and runs: whoever
//! can change it can run code in the operator. So the cache only ever runs
//! a file it wrote itself, unchanged since:
//!
//! - **Private.** The cache directory is made `0700` and each entry's
//!   directory too; a compiled file is written `0400`. Another user cannot
//!   read, replace or change an entry. A directory the runtime cannot make
//!   private (someone else's) turns the disk cache off.
//! - **Written once, then renamed into place.** An entry's file is never
//!   changed in place by Gantry: a torn write never carries the final name,
//!   and a file another process replaces stays intact for whoever mapped it.
//! - **Stamped.** After the rename, the runtime records the file's device,
//!   inode, size and change time (`ctime`) in the entry's `stamp`. A load
//!   opens the file, compares its `fstat` with the stamp, and maps that very
//!   open file (`/proc/self/fd/N`). Any write, truncation, `chmod`, rename
//!   or link gives the file a new `ctime`, which user space cannot set back,
//!   so a file changed after it was stamped (bytes flipped, truncated,
//!   replaced, copied in from elsewhere) is discarded and the plugin
//!   compiled again. This costs one `fstat`, where hashing a 30 MB file
//!   would cost tens of milliseconds.
//!
//! Outside this model: a process running as the operator's user (or root),
//! which could as well write into the operator's memory, and storage that
//! corrupts data silently under an unchanged inode. One case matters in
//! practice: a compiled file changed in place *while it is mapped* (an
//! operator running from it) would change code that has not been paged in
//! yet, and a truncation would kill the process with `SIGBUS` on the next
//! page read. Gantry itself never does that (see above), and the modes
//! keep other users out; changing a private, read-only file under a running
//! operator takes its own user going out of its way. On kernels without
//! fine-grained timestamps, a change within the same clock tick (a few ms)
//! as the stamp keeps the `ctime`; Linux 6.13 and later give a file whose
//! `ctime` was read a finer one on its next change.
//!
//! The component bytes themselves are identified by their sha256
//! ([`ComponentBytes`]): computed once where the bytes arrive, not again on
//! every load.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::error::LoadError;

/// Components kept in memory; the oldest is dropped past this.
const MEMORY_ENTRIES: usize = 128;

/// The compiled code's file name in an entry's directory.
const CODE: &str = "component.cwasm";
/// The stamp's file name in an entry's directory.
const STAMP: &str = "stamp";
/// Longest stamp file read; a longer one is not a stamp.
const MAX_STAMP_BYTES: u64 = 512;

/// The sha256 of `bytes` as lowercase hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Component bytes and their sha256, computed once, when they are wrapped:
/// the digest is the plugin's identity and its cache key, so a load of
/// bytes already digested (by the envelope that checked their pin, say)
/// does not hash tens of megabytes again. The digest cannot be given from
/// outside: a wrong one would name someone else's compiled code.
#[derive(Clone, PartialEq, Eq)]
pub struct ComponentBytes {
    bytes: Vec<u8>,
    digest: String,
}

impl ComponentBytes {
    /// Wrap `bytes`, computing their digest.
    pub fn new(bytes: Vec<u8>) -> Self {
        let digest = digest(&bytes);
        Self { bytes, digest }
    }

    /// The component bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, unwrapped.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// sha256 of the bytes, lowercase hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }
}

impl std::fmt::Debug for ComponentBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentBytes")
            .field("len", &self.bytes.len())
            .field("digest", &self.digest)
            .finish()
    }
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
    /// A cache for `engine`, persisting compiled code under `dir` if given
    /// (and if it can be made private: see the module's doc).
    pub(super) fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = dir.filter(|dir| match make_private_dir(dir) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "compiled plugin cache disabled: its directory cannot be made private");
                false
            }
        });
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

    /// The directory of `digest`'s entry.
    fn entry_dir(&self, digest: &str) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{digest}-{}", self.engine_hash)))
    }

    /// The compiled component for `bytes`, whose sha256 is `digest`.
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
        let loaded = match self
            .entry_dir(digest)
            .and_then(|entry| load_from_disk(engine, &entry))
        {
            Some(loaded) => {
                self.disk_hits.fetch_add(1, Ordering::Relaxed);
                loaded
            }
            None => self.compile(engine, name, digest, bytes)?,
        };
        let mut memory = self.memory.lock().unwrap();
        let (map, order) = &mut *memory;
        if map.insert(digest.to_string(), loaded.clone()).is_none() {
            order.push(digest.to_string());
            if order.len() > MEMORY_ENTRIES {
                let oldest = order.remove(0);
                map.remove(&oldest);
            }
        }
        Ok(loaded)
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
        let Some(entry) = self.entry_dir(digest) else {
            return Component::new(engine, bytes).map_err(invalid);
        };
        let compiled = engine.precompile_component(bytes).map_err(invalid)?;
        // The flat file an earlier version of the cache kept for this digest.
        let _ = std::fs::remove_file(entry.with_extension("cwasm"));
        if let Err(e) = store_on_disk(&entry, &compiled) {
            // The cache is an optimisation: serve the plugin anyway.
            tracing::warn!(plugin = name, path = %entry.display(), error = %e, "could not write compiled plugin cache");
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

/// Create `dir` (and its parents) if need be, and make it `0700`. Fails
/// where the runtime may not: a directory of another user, say.
#[cfg(unix)]
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other("not a directory"));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Without Unix file metadata the stamp cannot be checked: no disk cache.
#[cfg(not(unix))]
fn make_private_dir(_dir: &Path) -> std::io::Result<()> {
    Err(std::io::Error::other(
        "the disk cache needs Unix file metadata",
    ))
}

/// A compiled file as `fstat` saw it after the runtime wrote it: any later
/// change to the file changes at least its `ctime`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    ctime: i64,
    ctime_nsec: i64,
}

impl Stamp {
    #[cfg(unix)]
    fn of(meta: &Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            ctime: meta.ctime(),
            ctime_nsec: meta.ctime_nsec(),
        }
    }

    #[cfg(not(unix))]
    fn of(_meta: &Metadata) -> Self {
        unreachable!("no disk cache without Unix file metadata")
    }

    fn encode(&self) -> String {
        format!(
            "gantry-compiled-stamp v1 dev={} ino={} size={} ctime={}.{:09}\n",
            self.dev, self.ino, self.size, self.ctime, self.ctime_nsec
        )
    }

    fn decode(text: &str) -> Option<Self> {
        let mut words = text.strip_suffix('\n')?.split(' ');
        if (words.next()?, words.next()?) != ("gantry-compiled-stamp", "v1") {
            return None;
        }
        let mut field = |key: &str| words.next()?.strip_prefix(key)?.strip_prefix('=');
        let dev = field("dev")?.parse().ok()?;
        let ino = field("ino")?.parse().ok()?;
        let size = field("size")?.parse().ok()?;
        let (ctime, ctime_nsec) = field("ctime")?.split_once('.')?;
        let stamp = Self {
            dev,
            ino,
            size,
            ctime: ctime.parse().ok()?,
            ctime_nsec: ctime_nsec.parse().ok()?,
        };
        words.next().is_none().then_some(stamp)
    }
}

/// Whether a compiled file's metadata is what its stamp says, and nobody
/// but its owner may write it.
#[cfg(unix)]
fn matches_stamp(meta: &Metadata, stamp: &Stamp) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.is_file() && meta.permissions().mode() & 0o022 == 0 && Stamp::of(meta) == *stamp
}

#[cfg(not(unix))]
fn matches_stamp(_meta: &Metadata, _stamp: &Stamp) -> bool {
    false
}

fn read_stamp(path: &Path) -> Option<Stamp> {
    use std::io::Read as _;
    let mut text = String::new();
    File::open(path)
        .ok()?
        .take(MAX_STAMP_BYTES)
        .read_to_string(&mut text)
        .ok()?;
    Stamp::decode(&text)
}

/// Map the entry's compiled file if it is the one its stamp describes; a
/// missing entry is `None`, an entry that is not what was written is
/// discarded (and `None`), so that the caller compiles again.
fn load_from_disk(engine: &Engine, entry: &Path) -> Option<Component> {
    let code = entry.join(CODE);
    let stamp = read_stamp(&entry.join(STAMP))?;
    let discard = |why: &str| {
        tracing::warn!(path = %code.display(), "discarding compiled plugin cache entry: {why}");
        let _ = std::fs::remove_file(entry.join(STAMP));
        let _ = std::fs::remove_file(&code);
    };
    let Ok(file) = File::open(&code) else {
        discard("its file cannot be opened");
        return None;
    };
    match file.metadata() {
        Ok(meta) if matches_stamp(&meta, &stamp) => {}
        _ => {
            discard("the file changed after it was written");
            return None;
        }
    }
    // SAFETY: the file is the one this runtime wrote with
    // `precompile_component` of an engine with the same compatibility hash
    // (it is in the entry's name; wasmtime checks the header again and
    // refuses a mismatch), unchanged since (its stamp, see the module's doc),
    // and private. What is mapped is the file just checked, through its open
    // descriptor, not whatever the path names by now.
    match unsafe { map(engine, &file) } {
        Ok(component) => Some(component),
        Err(e) => {
            discard(&format!("{e:#}"));
            None
        }
    }
}

/// Map the open compiled `file`: its pages are read as the code runs, not
/// copied at load.
///
/// # Safety
///
/// As [`Component::deserialize_file`]: `file` holds what
/// `precompile_component` wrote, and stays unchanged while mapped.
#[cfg(target_os = "linux")]
unsafe fn map(engine: &Engine, file: &File) -> wasmtime::Result<Component> {
    use std::os::fd::AsRawFd;
    // Opening the descriptor's `/proc` link opens the same file, whatever
    // the entry's path names by now.
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    // SAFETY: the caller's.
    unsafe { Component::deserialize_file(engine, path) }
}

/// Elsewhere, read the open file: the bytes checked are the bytes used.
#[cfg(not(target_os = "linux"))]
unsafe fn map(engine: &Engine, mut file: &File) -> wasmtime::Result<Component> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    // SAFETY: the caller's.
    unsafe { Component::deserialize(engine, &bytes) }
}

/// Write `compiled` as the entry `entry`: the file (`0400`) under a
/// temporary name, renamed into place, then its stamp the same way.
fn store_on_disk(entry: &Path, compiled: &[u8]) -> std::io::Result<()> {
    make_private_dir(entry)?;
    let code = entry.join(CODE);
    let suffix = format!("tmp{}", std::process::id());
    let tmp = code.with_extension(&suffix);
    write_new(&tmp, compiled, 0o400)?;
    std::fs::rename(&tmp, &code)?;
    let stamp = Stamp::of(&std::fs::metadata(&code)?);
    let stamp_path = entry.join(STAMP);
    let tmp = stamp_path.with_extension(&suffix);
    write_new(&tmp, stamp.encode().as_bytes(), 0o600)?;
    std::fs::rename(&tmp, &stamp_path)
}

/// Write `bytes` to a file created at `path` with `mode`, and to disk.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    // A temporary file left by a process of the same id that died.
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_back_what_was_written_and_nothing_else() {
        let stamp = Stamp {
            dev: 2049,
            ino: 977,
            size: 33_000_000,
            ctime: 1_765_000_000,
            ctime_nsec: 5,
        };
        assert_eq!(Stamp::decode(&stamp.encode()), Some(stamp.clone()));
        let text = stamp.encode();
        for bad in [
            String::new(),
            text.trim_end().to_string(),
            text.replace("v1", "v2"),
            text.replace("size=", "len="),
            format!("{} extra\n", text.trim_end()),
        ] {
            assert_eq!(Stamp::decode(&bad), None, "{bad:?}");
        }
    }
}
