//! # gantry-toolchain
//!
//! Building plugins into components with each language's own toolchain.
//! Used by `gantry plugin build`, by `gantry plugin run` when given a
//! source directory, by the build script that embeds `gantry dev`'s
//! examples, and by the tests.
//!
//! - [`rust`]: `cargo build --target wasm32-wasip2` (the guest SDK).
//! - [`js`]: JavaScript through jco / componentize-js.
//! - [`python`]: Python through componentize-py.
//! - [`c`]: C through clang's wasm32 target, wasi-libc and wit-bindgen.
//! - [`go`]: Go through the standard Go toolchain and wit-component.
//! - [`scaffold`]: `gantry plugin new`, a working project in each language.
//! - [`manifest`]: reading objects and values from YAML or JSON files.

// Items are private unless another crate uses them.
#![warn(unreachable_pub)]

pub mod c;
mod cache;
pub mod crd;
pub mod go;
pub mod js;
pub mod manifest;
pub mod python;
pub mod rust;
pub mod scaffold;

pub use rust::{
    BuildOptions, WASM_TARGET, build_plugin, build_workspace_plugins, ensure_wasm_target,
    example_plugin, example_plugins, source_workspace_root,
};

use std::path::{Path, PathBuf};

/// The language of the plugin source at `dir`, from the files it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    /// `Cargo.toml`
    Rust,
    /// `package.json`
    JavaScript,
    /// `pyproject.toml` or `app.py`
    Python,
    /// `.c` files
    C,
    /// `go.mod`
    Go,
}

/// Detect the plugin language of the source directory `dir`.
pub fn detect(dir: &Path) -> anyhow::Result<Language> {
    if dir.join("Cargo.toml").exists() {
        Ok(Language::Rust)
    } else if dir.join("package.json").exists() {
        Ok(Language::JavaScript)
    } else if dir.join("pyproject.toml").exists() || dir.join("app.py").exists() {
        Ok(Language::Python)
    } else if go::is_go_plugin(dir) {
        Ok(Language::Go)
    } else if c::is_c_plugin(dir) {
        Ok(Language::C)
    } else {
        anyhow::bail!(
            "{} has no Cargo.toml, package.json, pyproject.toml, app.py, go.mod or .c files: which language is it?",
            dir.display()
        )
    }
}

/// Build the plugin source at `path` (a directory, or a Cargo.toml) in
/// whatever language it is written; returns the component's path.
pub fn build_any(path: &Path, rust_options: &BuildOptions) -> anyhow::Result<PathBuf> {
    if path.is_file() {
        return build_plugin(path, rust_options);
    }
    match detect(path)? {
        Language::Rust => build_plugin(path, rust_options),
        Language::JavaScript => js::build_plugin(path),
        Language::Python => python::build_plugin(path),
        Language::C => c::build_plugin(path),
        Language::Go => go::build_plugin(path),
    }
}
