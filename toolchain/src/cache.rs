//! What the JavaScript and Python toolchains share: toolchains installed
//! once under `$XDG_CACHE_HOME/gantry/toolchains` (default
//! `~/.cache/gantry/toolchains`), the host's own WIT contract, and builds
//! into `<plugin>/dist/` that are skipped when the sources did not change.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

/// The contract this host speaks; plugins are built against exactly it.
const CONTRACT_WIT: &str = include_str!("../../wit/gantry.wit");

/// Directories never hashed as plugin sources.
const SKIPPED: &[&str] = &["dist", "node_modules", "__pycache__", "target"];

/// `$XDG_CACHE_HOME/gantry/toolchains` (or `~/.cache/gantry/toolchains`).
pub(crate) fn toolchains_dir() -> anyhow::Result<PathBuf> {
    dirs::cache_dir()
        .map(|dir| dir.join("gantry").join("toolchains"))
        .context("no cache directory for toolchains: set XDG_CACHE_HOME or HOME")
}

/// An exclusive lock on a file, released on drop.
pub(crate) struct Lock(File);

impl Lock {
    /// Wait for the lock on `path` (created if missing).
    pub(crate) fn acquire(path: &Path) -> anyhow::Result<Self> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening lock file {}", path.display()))?;
        file.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(Self(file))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..8])
}

/// Identifies the host's WIT contract (part of every build's hash).
pub(crate) fn contract_digest() -> String {
    short_hash(CONTRACT_WIT.as_bytes())
}

/// A directory holding the host's WIT contract (`gantry.wit`), written to
/// the cache on first use.
pub(crate) fn contract_wit_dir() -> anyhow::Result<PathBuf> {
    let dir = toolchains_dir()?.join("wit").join(contract_digest());
    let file = dir.join("gantry.wit");
    if fs::read_to_string(&file).ok().as_deref() != Some(CONTRACT_WIT) {
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join(format!("gantry.wit.{}.tmp", std::process::id()));
        fs::write(&tmp, CONTRACT_WIT).with_context(|| format!("writing {}", tmp.display()))?;
        fs::rename(&tmp, &file).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(dir)
}

/// The WIT directory to build `plugin_dir` against: its own `wit/` if it
/// has one, else the host's contract.
pub(crate) fn wit_dir_for(plugin_dir: &Path) -> anyhow::Result<PathBuf> {
    let own = plugin_dir.join("wit");
    if own.is_dir() {
        Ok(own)
    } else {
        contract_wit_dir()
    }
}

/// Install a toolchain into `dir` with `install` unless a previous install
/// completed; concurrent callers (processes or threads) wait for each other.
pub(crate) fn ensure_installed(
    dir: &Path,
    what: &str,
    install: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let done = dir.join(".gantry-installed");
    if done.exists() {
        return Ok(());
    }
    let mut lock_name = dir.file_name().unwrap_or_default().to_os_string();
    lock_name.push(".lock");
    let _lock = Lock::acquire(&dir.with_file_name(lock_name))?;
    if done.exists() {
        return Ok(());
    }
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    tracing::info!(toolchain = what, dir = %dir.display(), "installing toolchain (first use)");
    install(dir).with_context(|| format!("installing {what}"))?;
    fs::write(&done, what).with_context(|| format!("writing {}", done.display()))?;
    Ok(())
}

/// Fail with `hint` unless `program --version` runs; returns its output.
pub(crate) fn require_program(program: &str, hint: &str) -> anyhow::Result<String> {
    match Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
        }
        Ok(out) => bail!(
            "`{program} --version` failed ({}): {hint}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => bail!("`{program}` was not found ({e}): {hint}"),
    }
}

/// Run `command`; on failure the error carries its output.
pub(crate) fn run(command: &mut Command, what: &str) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("{what}: starting {}", command.get_program().display()))?;
    if !output.status.success() {
        let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stdout));
        let text = text.trim();
        // The end of a long log is where the error is.
        let start = text.len().saturating_sub(4000);
        let start = (start..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        bail!("{what} failed ({}):\n{}", output.status, &text[start..]);
    }
    Ok(())
}

/// Hash of the plugin's source files (everything but build outputs and
/// hidden files) and of `extra` (toolchain versions, WIT, options).
pub(crate) fn source_hash(dir: &Path, extra: &[&str]) -> anyhow::Result<String> {
    let mut files = Vec::new();
    collect_files(dir, dir, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    for part in extra {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    for relative in files {
        let bytes = fs::read(dir.join(&relative))
            .with_context(|| format!("reading {}", dir.join(&relative).display()))?;
        let name = relative.to_string_lossy();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name.as_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// One hash of several (a plugin's and the local modules it uses).
pub(crate) fn source_hash_of_parts(parts: &[String]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

fn collect_files(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || SKIPPED.contains(&name.as_ref()) {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect_files(root, &path, files)?;
        } else {
            files.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}

/// Build `<dir>/dist/<name>.wasm` with `build` (given the path to write)
/// unless the last build was of the same `hash`; returns the component path.
/// `dist/` ignores itself in git.
pub(crate) fn build_if_changed(
    dir: &Path,
    name: &str,
    hash: &str,
    build: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let dist = dir.join("dist");
    let out = dist.join(format!("{name}.wasm"));
    let stamp = dist.join(format!("{name}.wasm.source-hash"));
    let fresh = || out.exists() && fs::read_to_string(&stamp).ok().as_deref() == Some(hash);
    if fresh() {
        return Ok(out);
    }
    fs::create_dir_all(&dist).with_context(|| format!("creating {}", dist.display()))?;
    let ignore = dist.join(".gitignore");
    if !ignore.exists() {
        fs::write(&ignore, "# Build output of `gantry plugin build`.\n*\n")
            .with_context(|| format!("writing {}", ignore.display()))?;
    }
    let _lock = Lock::acquire(&dist.join(".build.lock"))?;
    if fresh() {
        return Ok(out);
    }
    let tmp = dist.join(format!("{name}.wasm.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    build(&tmp)?;
    if !tmp.exists() {
        bail!("the build of {} wrote no component", dir.display());
    }
    fs::rename(&tmp, &out).with_context(|| format!("writing {}", out.display()))?;
    let mut file = File::create(&stamp).with_context(|| format!("writing {}", stamp.display()))?;
    file.write_all(hash.as_bytes())?;
    Ok(out)
}

/// `dir` made absolute (and checked to exist).
pub(crate) fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    dir.canonicalize()
        .with_context(|| format!("no plugin directory at {}", dir.display()))
}

/// The plugin's name: the name of its (absolute) directory.
pub(crate) fn plugin_name(dir: &Path) -> String {
    dir.file_name()
        .map_or_else(|| "plugin".into(), |n| n.to_string_lossy().into_owned())
}

/// Versions pinned exactly (`1.2.3`): digits, dots, letters and dashes.
pub(crate) fn is_exact_version(version: &str) -> bool {
    !version.is_empty()
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
}
