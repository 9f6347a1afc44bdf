//! The CRD of a Go plugin's parent kind, derived from its types and their
//! kubebuilder markers by controller-gen (`sigs.k8s.io/controller-tools`,
//! what Go operator authors use), installed once into the toolchains cache.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::GO_TOOLCHAIN;
use crate::cache;

/// The controller-tools release whose controller-gen derives CRDs.
pub(crate) const CONTROLLER_TOOLS: &str = "v0.23.0";

/// The marker of a kind's root type.
const ROOT_MARKER: &str = "+kubebuilder:object:root=true";

/// What controller-gen prints for the Go plugin at `dir`: the CRDs of its
/// root types (`None` when it has none).
pub(crate) fn print_crd(dir: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    if !has_root_types(dir)? {
        return Ok(None);
    }
    let output = Command::new(controller_gen()?)
        .current_dir(dir)
        .args(["crd", "paths=./...", "output:crd:stdout"])
        .env("GOTOOLCHAIN", GO_TOOLCHAIN)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false")
        .output()
        .context("running controller-gen")?;
    if !output.status.success() {
        bail!(
            "controller-gen crd failed in {}:\n{}",
            dir.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(Some(output.stdout))
}

/// Whether a Go file of the plugin (not under `dist/`) marks a root type.
fn has_root_types(dir: &Path) -> anyhow::Result<bool> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in
            std::fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?
        {
            let path = entry?.path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "dist") {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "go")
                && std::fs::read_to_string(&path)?.contains(ROOT_MARKER)
            {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// controller-gen, `go install`ed into the toolchains cache on first use.
fn controller_gen() -> anyhow::Result<PathBuf> {
    let dir = cache::toolchains_dir()?
        .join("go")
        .join(format!("controller-gen-{CONTROLLER_TOOLS}"));
    let binary = dir.join("controller-gen");
    if binary.is_file() {
        return Ok(binary);
    }
    eprintln!("gantry: installing controller-gen {CONTROLLER_TOOLS} (once)...");
    // Installed beside, then renamed: a concurrent install never leaves a
    // half-written binary where another process looks for it.
    let staging = dir.with_extension(format!("partial-{}", std::process::id()));
    let mut command = Command::new("go");
    command
        .args(["install"])
        .arg(format!(
            "sigs.k8s.io/controller-tools/cmd/controller-gen@{CONTROLLER_TOOLS}"
        ))
        .env("GOBIN", &staging)
        .env("GOTOOLCHAIN", GO_TOOLCHAIN)
        .env("GOFLAGS", "-mod=mod")
        .current_dir(std::env::temp_dir());
    cache::run(&mut command, "go install controller-gen")?;
    std::fs::create_dir_all(&dir)?;
    std::fs::rename(staging.join("controller-gen"), &binary)
        .with_context(|| format!("placing {}", binary.display()))?;
    let _ = std::fs::remove_dir_all(&staging);
    Ok(binary)
}
