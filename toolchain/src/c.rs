//! C plugins: clang's wasm32 target and wasi-libc (Debian packages
//! `clang-19`, `lld-19`, `wasi-libc`, `libclang-rt-19-dev-wasm32`),
//! wit-bindgen's C generator, and `wasm-component-ld` (shipped with Rust's
//! `wasm32-wasip2` target) to turn the module into a component.
//!
//! A C plugin is a directory of `.c` and `.h` files implementing the
//! `reconciler` world's exports as wit-bindgen names them
//! (`exports_gantry_plugin_reconcile_reconcile`,
//! `exports_gantry_plugin_config_validate_config`), including the
//! generated `reconciler.h`. wit-bindgen-cli [`WIT_BINDGEN_VERSION`] is
//! installed once with `cargo install` into `<toolchains>/c/`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use super::cache;

/// wit-bindgen-cli used for the C bindings.
pub const WIT_BINDGEN_VERSION: &str = "0.61.1";
/// clang drivers tried, newest first.
const CLANGS: &[&str] = &["clang-19", "clang-20", "clang-18", "clang"];
/// wasm-ld tried, newest first.
const WASM_LDS: &[&str] = &["wasm-ld-19", "wasm-ld-20", "wasm-ld-18", "wasm-ld"];
const WORLD: &str = "reconciler";

fn find_program(candidates: &[&str], hint: &str) -> anyhow::Result<String> {
    for candidate in candidates {
        if cache::require_program(candidate, hint).is_ok() {
            return Ok((*candidate).to_string());
        }
    }
    bail!("{hint} (none of {} found)", candidates.join(", "))
}

/// wit-bindgen, installed on first use.
fn wit_bindgen() -> anyhow::Result<PathBuf> {
    let dir = cache::toolchains_dir()?
        .join("c")
        .join(format!("wit-bindgen-{WIT_BINDGEN_VERSION}"));
    cache::ensure_installed(&dir, "wit-bindgen-cli (cargo install)", |dir| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let target = tempfile_dir(dir)?;
        cache::run(
            Command::new(cargo)
                .args(["install", "--locked", "--quiet", "--root"])
                .arg(dir)
                .arg(format!("wit-bindgen-cli@{WIT_BINDGEN_VERSION}"))
                .env("CARGO_TARGET_DIR", &target),
            "cargo install wit-bindgen-cli",
        )?;
        let _ = std::fs::remove_dir_all(&target);
        Ok(())
    })?;
    Ok(dir.join("bin/wit-bindgen"))
}

fn tempfile_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let target = dir.join("build");
    std::fs::create_dir_all(&target).with_context(|| format!("creating {}", target.display()))?;
    Ok(target)
}

/// `wasm-component-ld` from the Rust toolchain's sysroot.
fn wasm_component_ld() -> anyhow::Result<PathBuf> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .context("running rustc --print sysroot")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let output = Command::new(&rustc)
        .args(["-vV"])
        .output()
        .context("running rustc -vV")?;
    let host = String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .context("rustc -vV names no host")?;
    let path = sysroot
        .join("lib/rustlib")
        .join(host)
        .join("bin/wasm-component-ld");
    if !path.is_file() {
        bail!(
            "{} is missing: it comes with Rust's wasm32-wasip2 target (rustup target add wasm32-wasip2)",
            path.display()
        );
    }
    Ok(path)
}

/// Whether `dir` holds C sources.
pub fn is_c_plugin(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "c"))
    })
}

/// Build the C plugin in `dir` into a component; returns its path
/// (`<dir>/dist/<dir name>.wasm`).
pub fn build_plugin(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = &cache::absolute(dir)?;
    let hint = "clang with the wasm32 target is needed to build C plugins (Debian: apt-get install clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32)";
    let wit = cache::wit_dir_for(dir)?;
    let contract = cache::contract_digest();
    let hash = cache::source_hash(dir, &["c", WIT_BINDGEN_VERSION, WORLD, &contract])?;
    cache::build_if_changed(dir, &cache::plugin_name(dir), &hash, |out| {
        let clang = find_program(CLANGS, hint)?;
        // clang hands wasm-component-ld the wasm-ld of its own LLVM.
        find_program(WASM_LDS, hint)?;
        let linker = wasm_component_ld()?;
        let gen_dir = out.with_extension("gen");
        let _ = std::fs::remove_dir_all(&gen_dir);
        std::fs::create_dir_all(&gen_dir)?;
        cache::run(
            Command::new(wit_bindgen()?)
                .args(["c", "--world", WORLD, "--out-dir"])
                .arg(&gen_dir)
                .arg(&wit),
            "wit-bindgen c",
        )?;
        let mut sources: Vec<PathBuf> = std::fs::read_dir(dir)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        sources.sort();
        let mut command = Command::new(&clang);
        command
            .current_dir(dir)
            .args([
                "--target=wasm32-wasi",
                "-mexec-model=reactor",
                "-Os",
                "-Wall",
                "-Werror=implicit-function-declaration",
            ])
            .arg("-I")
            .arg(&gen_dir)
            .arg("-I")
            .arg(dir)
            .args(&sources)
            .arg(gen_dir.join(format!("{WORLD}.c")))
            .arg(gen_dir.join(format!("{WORLD}_component_type.o")))
            .arg(format!("-fuse-ld={}", linker.display()))
            .arg("-Wl,--strip-all")
            .arg("-o")
            .arg(out);
        let result = cache::run(&mut command, "clang (wasm32) and wasm-component-ld");
        let _ = std::fs::remove_dir_all(&gen_dir);
        result
    })
}
