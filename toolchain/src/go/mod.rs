//! Go plugins: the standard Go toolchain (`GOOS=wasip1 GOARCH=wasm go build
//! -buildmode=c-shared`) and the Go SDK in `go-sdk/`, whose
//! `//go:wasmexport` functions implement the canonical ABI of
//! `wit/gantry.wit`. The core module is then made a component here, with
//! wit-component: the WIT world is embedded and the module's WASI preview 1
//! imports are adapted to preview 2 by the reactor adapter that wasmtime
//! ships (`wasi-preview1-component-adapter-provider`).
//!
//! A Go plugin is a directory with a `go.mod` whose main package registers
//! its reconciler (or policy, or converter) with the SDK. The world is read
//! from the module's exports and imports (see [`world_of`]): the SDK's
//! `gantry.dev/go-sdk/policy` package exports the `policy` world, its
//! `converter` package the `converter` world, the root package the
//! `reconciler` world, or `reconciler-capable` with the `http` or
//! `metrics` package.
//!
//! Pins: the Go toolchain is [`GO_TOOLCHAIN`] (`GOTOOLCHAIN`: the `go` on
//! `PATH` switches to it, fetching it through the Go module proxy when it is
//! another version), modules are pinned by the plugin's `go.sum` (built
//! with `-mod=readonly`), and wit-component and the adapter are compiled
//! into gantry. Go's build cache (`GOCACHE`) is outside the plugin; built
//! components are also kept under `<toolchains>/go/components/`, keyed by
//! the source hash, so a fresh clone of unchanged sources builds nothing.

mod adapter_heap;
pub(crate) mod crd;
mod world;

pub use world::world_of;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::cache;

/// The Go toolchain plugins are built with.
pub const GO_TOOLCHAIN: &str = "go1.26.8";

/// The linker flags: no symbol table or DWARF (Go's own
/// panic traces still name functions).
const LDFLAGS: &str = "-ldflags=-s -w";

/// Identifies the componentization step (part of the build hash).
const COMPONENTIZE: &str = "wit-component-0.254+adapter-48-reactor+adapter-heap-1";

/// Whether `dir` holds a Go plugin (a `go.mod`).
pub fn is_go_plugin(dir: &Path) -> bool {
    dir.join("go.mod").is_file()
}

/// Local directories `go.mod` replaces modules with (the SDK, say): their
/// sources are part of the build's hash.
fn local_replacements(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let path = dir.join("go.mod");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut dirs = Vec::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let Some((_, target)) = line.split_once("=>") else {
            continue;
        };
        let target = target.split_whitespace().next().unwrap_or_default();
        if target.starts_with('.') || target.starts_with('/') {
            let replaced = dir.join(target);
            dirs.push(
                replaced
                    .canonicalize()
                    .with_context(|| format!("go.mod replaces with {}", replaced.display()))?,
            );
        }
    }
    Ok(dirs)
}

/// Where built components are kept across clones.
fn component_cache() -> anyhow::Result<PathBuf> {
    Ok(cache::toolchains_dir()?.join("go").join("components"))
}

/// Build the Go plugin in `dir` into a component; returns its path
/// (`<dir>/dist/<dir name>.wasm`).
pub fn build_plugin(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = &cache::absolute(dir)?;
    let name = cache::plugin_name(dir);
    let contract = cache::contract_digest();
    let mut hashes = vec![cache::source_hash(
        dir,
        &["go", GO_TOOLCHAIN, LDFLAGS, COMPONENTIZE, &contract],
    )?];
    for replaced in local_replacements(dir)? {
        hashes.push(cache::source_hash(&replaced, &[])?);
    }
    let hash = cache::source_hash_of_parts(&hashes);
    cache::build_if_changed(dir, &name, &hash, |out| {
        let cached = component_cache()?.join(format!("{name}-{hash}.wasm"));
        if cached.is_file() {
            std::fs::copy(&cached, out).with_context(|| format!("copying {}", cached.display()))?;
            return Ok(());
        }
        let core = out.with_extension("core.wasm");
        go_build(dir, &core)?;
        let module = std::fs::read(&core).with_context(|| format!("reading {}", core.display()))?;
        let _ = std::fs::remove_file(&core);
        let component = componentize(&module, &cache::wit_dir_for(dir)?)?;
        std::fs::write(out, &component).with_context(|| format!("writing {}", out.display()))?;
        remember(&cached, &name, &component);
        Ok(())
    })
}

/// `go build` for wasip1 into `core`.
fn go_build(dir: &Path, core: &Path) -> anyhow::Result<()> {
    let hint = "Go (1.21 or newer; it switches to the pinned toolchain itself) is needed to build Go plugins";
    match Command::new("go").arg("version").output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => bail!(
            "`go version` failed ({}): {hint}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => bail!("`go` was not found ({e}): {hint}"),
    }
    let mut command = Command::new("go");
    command
        .current_dir(dir)
        .args(["build", "-buildmode=c-shared", "-trimpath", LDFLAGS, "-o"])
        .arg(core)
        .arg(".")
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", GO_TOOLCHAIN)
        .env("GOFLAGS", "-mod=readonly -buildvcs=false");
    cache::run(&mut command, "go build (GOOS=wasip1 GOARCH=wasm)")
}

/// Keep a copy of `component` at `cached`, replacing older builds of the
/// same plugin. A failure only costs a rebuild later.
fn remember(cached: &Path, name: &str, component: &[u8]) {
    let Some(dir) = cached.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        let prefix = format!("{name}-");
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            if file.starts_with(&prefix)
                && file.len() == prefix.len() + 64 + ".wasm".len()
                && file.ends_with(".wasm")
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    let tmp = cached.with_extension(format!("{}.tmp", std::process::id()));
    if std::fs::write(&tmp, component).is_ok() {
        let _ = std::fs::rename(&tmp, cached);
    }
}

/// Turn the core module `module` into a component of its world in the WIT
/// package at `wit`.
pub fn componentize(module: &[u8], wit: &Path) -> anyhow::Result<Vec<u8>> {
    let world_name = world_of(module)?;
    let mut module = adapter_heap::add_allocator(module)?;
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve
        .push_dir(wit)
        .with_context(|| format!("reading the WIT package at {}", wit.display()))?;
    let world = resolve.select_world(&[package], Some(world_name))?;
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )?;
    wit_component::ComponentEncoder::default()
        .module(&module)?
        .adapter(
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .validate(true)
        .encode()
        .context("making the Go module a component (wit-component)")
}
