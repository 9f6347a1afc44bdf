//! JavaScript plugins (componentize-js, with jco).
//!
//! The plugin is one ES module (`main` of its `package.json`, default
//! `app.js`) exporting the world's interfaces: `reconcile` and `config`.
//! The toolchain is installed once per version pair into
//! `<toolchains>/js/componentize-js-<v>+jco-<v>` with `npm install --prefix`;
//! the versions are the exact ones the plugin's `package.json` pins in
//! `devDependencies`, else [`COMPONENTIZE_JS_VERSION`] and [`JCO_VERSION`].
//!
//! The build calls componentize-js's own CLI: `jco componentize` 1.35.0
//! cannot read the WIT directory (its WASI shim starts with no preopens).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::Value;

use super::cache;

/// componentize-js used when the plugin pins none.
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";
/// jco used when the plugin pins none (componentize-js depends on it).
pub const JCO_VERSION: &str = "1.35.0";

const COMPONENTIZE_JS: &str = "@bytecodealliance/componentize-js";
const JCO: &str = "@bytecodealliance/jco";
/// StarlingMonkey features whose WASI imports the host does not provide.
const DISABLED_FEATURES: &[&str] = &["http", "fetch-event"];

/// What the build needs from `package.json`.
struct Manifest {
    main: String,
    world: String,
    componentize_js: String,
    jco: String,
}

fn pinned(package: &Value, name: &str, default: &str) -> anyhow::Result<String> {
    match package.pointer(&format!("/devDependencies/{}", name.replace('/', "~1"))) {
        None => Ok(default.to_string()),
        Some(Value::String(v)) if cache::is_exact_version(v) => Ok(v.clone()),
        Some(v) => {
            bail!("package.json must pin {name} to an exact version (like \"{default}\"), not {v}")
        }
    }
}

fn manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join("package.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let package: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    if package
        .get("dependencies")
        .and_then(Value::as_object)
        .is_some_and(|d| !d.is_empty())
    {
        bail!(
            "{}: runtime `dependencies` are not supported; componentize-js takes one module, so bundle the plugin first",
            path.display()
        );
    }
    let string = |pointer: &str, default: &str| {
        package
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_string()
    };
    Ok(Manifest {
        main: string("/main", "app.js"),
        world: string("/gantry/world", "reconciler"),
        componentize_js: pinned(&package, COMPONENTIZE_JS, COMPONENTIZE_JS_VERSION)?,
        jco: pinned(&package, JCO, JCO_VERSION)?,
    })
}

/// The installed toolchain for `manifest`'s versions (installed on first use).
fn toolchain(manifest: &Manifest) -> anyhow::Result<PathBuf> {
    cache::require_program(
        "node",
        "Node.js (20 or newer) is needed to build JavaScript plugins",
    )?;
    let dir = cache::toolchains_dir()?.join("js").join(format!(
        "componentize-js-{}+jco-{}",
        manifest.componentize_js, manifest.jco
    ));
    cache::ensure_installed(&dir, "componentize-js and jco (npm)", |dir| {
        cache::require_program("npm", "npm is needed to install componentize-js")?;
        cache::run(
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                ])
                .arg(dir)
                .arg(format!("{COMPONENTIZE_JS}@{}", manifest.componentize_js))
                .arg(format!("{JCO}@{}", manifest.jco)),
            "npm install",
        )
    })?;
    Ok(dir)
}

/// Build the JavaScript plugin in `dir` (it has a `package.json`) into a
/// component; returns the component's path (`<dir>/dist/<dir name>.wasm`).
pub fn build_plugin(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = &cache::absolute(dir)?;
    let manifest = manifest(dir)?;
    let entry = dir.join(&manifest.main);
    if !entry.is_file() {
        bail!(
            "{} has no {} (the `main` module of its package.json)",
            dir.display(),
            manifest.main
        );
    }
    let wit = cache::wit_dir_for(dir)?;
    let contract = cache::contract_digest();
    let hash = cache::source_hash(
        dir,
        &[
            "js",
            &manifest.componentize_js,
            &manifest.jco,
            &manifest.world,
            &manifest.main,
            &contract,
        ],
    )?;
    // Up to date: no toolchain needed at all.
    cache::build_if_changed(dir, &cache::plugin_name(dir), &hash, |out| {
        let cli = toolchain(&manifest)?
            .join("node_modules")
            .join(COMPONENTIZE_JS)
            .join("src/cli.js");
        if !cli.exists() {
            bail!(
                "{} is missing; delete the toolchain directory to reinstall it",
                cli.display()
            );
        }
        let mut command = Command::new("node");
        command
            .current_dir(dir)
            .arg(&cli)
            .arg(&manifest.main)
            .arg("--wit")
            .arg(&wit)
            .args(["--world-name", &manifest.world, "--disable"])
            .args(DISABLED_FEATURES)
            .arg("--out")
            .arg(out);
        cache::run(&mut command, "componentize-js")
    })
}
