//! Python plugins (componentize-py).
//!
//! The plugin is a module `app.py` defining one class per exported
//! interface (`Reconcile`, `Config`), subclassing the protocols of the
//! generated `wit_world.exports`. componentize-py is installed once per
//! version into a private venv, `<toolchains>/python/componentize-py-<v>`;
//! the version is the one the plugin pins (`componentize-py==<v>` in its
//! `pyproject.toml` or `requirements.txt`), else [`COMPONENTIZE_PY_VERSION`].

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::bail;

use super::cache;

/// componentize-py used when the plugin pins none.
pub const COMPONENTIZE_PY_VERSION: &str = "0.25.1";

/// The module componentize-py builds: `app.py`.
const MODULE: &str = "app";
const PIN: &str = "componentize-py==";

/// The componentize-py version pinned in `pyproject.toml` or
/// `requirements.txt` (first `componentize-py==<v>` found), else the default.
fn pinned_version(dir: &Path) -> anyhow::Result<String> {
    for file in ["pyproject.toml", "requirements.txt"] {
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
            continue;
        };
        if let Some(at) = text.find(PIN) {
            let version: String = text[at + PIN.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
                .collect();
            if !cache::is_exact_version(&version) {
                bail!(
                    "{}: cannot read the pinned componentize-py version",
                    dir.join(file).display()
                );
            }
            return Ok(version);
        }
    }
    Ok(COMPONENTIZE_PY_VERSION.to_string())
}

/// The venv with componentize-py `version` (created on first use).
fn toolchain(version: &str) -> anyhow::Result<PathBuf> {
    let dir = cache::toolchains_dir()?
        .join("python")
        .join(format!("componentize-py-{version}"));
    cache::ensure_installed(&dir, "componentize-py (pip, in a venv)", |dir| {
        cache::require_program(
            "python3",
            "Python 3 (with the venv module) is needed to install componentize-py",
        )?;
        let venv = dir.join("venv");
        cache::run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv (on Debian, install python3-venv)",
        )?;
        cache::run(
            Command::new(venv.join("bin/python"))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .arg(format!("{PIN}{version}")),
            "pip install componentize-py",
        )
    })?;
    let componentize_py = dir.join("venv/bin/componentize-py");
    if !componentize_py.exists() {
        bail!(
            "{} is incomplete; delete it to reinstall componentize-py",
            dir.display()
        );
    }
    Ok(componentize_py)
}

/// Build the Python plugin in `dir` (it has an `app.py`) into a component;
/// returns the component's path (`<dir>/dist/<dir name>.wasm`).
pub fn build_plugin(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = &cache::absolute(dir)?;
    if !dir.join(format!("{MODULE}.py")).is_file() {
        bail!(
            "{} has no {MODULE}.py, the module componentize-py builds",
            dir.display()
        );
    }
    let version = pinned_version(dir)?;
    let wit = cache::wit_dir_for(dir)?;
    let contract = cache::contract_digest();
    let world = "reconciler";
    let hash = cache::source_hash(dir, &["python", &version, world, &contract])?;
    // Up to date: no toolchain needed at all.
    cache::build_if_changed(dir, &cache::plugin_name(dir), &hash, |out| {
        let mut command = Command::new(toolchain(&version)?);
        command
            .current_dir(dir)
            .arg("--quiet")
            .arg("--wit-path")
            .arg(&wit)
            .args(["--world", world, "componentize", MODULE, "--python-path"])
            .arg(dir)
            .arg("--output")
            .arg(out);
        cache::run(&mut command, "componentize-py")
    })
}
