//! Components cached on disk by their sha256: `<root>/sha256/<hex>`.
//!
//! Writes go to a temporary file in the same directory and are renamed into
//! place, so a reader never sees half a file. Every read is verified against
//! the name; a file that does not match is removed and treated as missing.
//! The functions here do blocking I/O: call them from the blocking pool.

use std::io::Write;
use std::path::{Path, PathBuf};

use gantry_sandbox::runtime::ComponentBytes;

/// The cache rooted at a directory.
#[derive(Debug, Clone)]
pub struct DigestCache {
    root: PathBuf,
}

/// Whether `hex` is 64 lowercase hex digits.
pub(crate) fn is_sha256_hex(hex: &str) -> bool {
    hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl DigestCache {
    /// A cache under `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the component with sha256 `hex` is kept.
    pub fn path(&self, hex: &str) -> PathBuf {
        self.root.join("sha256").join(hex)
    }

    /// The component with sha256 `hex`, if cached and intact.
    pub fn get(&self, hex: &str) -> Option<ComponentBytes> {
        if !is_sha256_hex(hex) {
            return None;
        }
        let path = self.path(hex);
        let component = ComponentBytes::new(std::fs::read(&path).ok()?);
        if component.digest() == hex {
            Some(component)
        } else {
            tracing::warn!(path = %path.display(), "cached plugin does not match its digest; removing it");
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Store `bytes`, whose sha256 is `hex` (checked by the caller).
    pub fn put(&self, hex: &str, bytes: &[u8]) -> std::io::Result<()> {
        debug_assert!(is_sha256_hex(hex));
        let dir = self.root.join("sha256");
        std::fs::create_dir_all(&dir)?;
        let mut tmp = tempfile_in(&dir)?;
        tmp.1.write_all(bytes)?;
        tmp.1.sync_all()?;
        drop(tmp.1);
        std::fs::rename(&tmp.0, self.path(hex)).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp.0);
        })
    }
}

/// A new file `.tmp-<pid>-<random>` in `dir`.
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    loop {
        let path = dir.join(format!(
            ".tmp-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(file) => return Ok((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_reads_and_drops_corrupt_entries() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DigestCache::new(dir.path());
        let bytes = b"component".to_vec();
        let hex = gantry_sandbox::runtime::digest(&bytes);
        assert_eq!(cache.get(&hex), None);
        cache.put(&hex, &bytes).unwrap();
        assert_eq!(cache.get(&hex).map(ComponentBytes::into_bytes), Some(bytes));
        assert!(cache.path(&hex).starts_with(dir.path().join("sha256")));
        std::fs::write(cache.path(&hex), b"tampered").unwrap();
        assert_eq!(cache.get(&hex), None);
        assert!(!cache.path(&hex).exists(), "a corrupt entry is removed");
        assert_eq!(cache.get("../etc/passwd"), None);
        let leftovers = std::fs::read_dir(dir.path().join("sha256"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".tmp")
            })
            .count();
        assert_eq!(leftovers, 0);
    }
}
