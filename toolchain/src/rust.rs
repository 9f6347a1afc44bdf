//! Rust plugins: `cargo build --target wasm32-wasip2`; the `cdylib` output
//! of that target is a component.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde::Deserialize;

/// The target plugins are built for: its `cdylib` output is a component.
pub const WASM_TARGET: &str = "wasm32-wasip2";

/// How to build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Cargo profile (`release`, or the workspace's size-optimised `plugin`).
    pub profile: String,
    /// Cargo target directory; default `<workspace target>/plugins`, apart
    /// from the host's so a build never waits on the host build's lock.
    pub target_dir: Option<PathBuf>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            profile: "release".into(),
            target_dir: None,
        }
    }
}

#[derive(Deserialize)]
struct Metadata {
    packages: Vec<Package>,
    target_directory: PathBuf,
    workspace_root: PathBuf,
}

#[derive(Deserialize)]
struct Package {
    name: String,
    manifest_path: PathBuf,
    targets: Vec<Target>,
}

#[derive(Deserialize)]
struct Target {
    name: String,
    crate_types: Vec<String>,
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn metadata(manifest: &Path) -> anyhow::Result<Metadata> {
    let output = cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--manifest-path",
        ])
        .arg(manifest)
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("parsing cargo metadata")
}

/// Make sure the wasm target is installed, adding it with rustup if needed.
pub fn ensure_wasm_target() -> anyhow::Result<()> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .context("running rustc")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if sysroot.join("lib/rustlib").join(WASM_TARGET).exists() {
        return Ok(());
    }
    tracing::info!("installing the {WASM_TARGET} target with rustup");
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status();
    match status {
        Ok(s) if s.success() => Ok(()),
        _ => bail!(
            "the {WASM_TARGET} Rust target is missing; install it with `rustup target add {WASM_TARGET}`"
        ),
    }
}

/// Build the plugin crate whose directory (or `Cargo.toml`) is `path`;
/// returns the path of the component.
pub fn build_plugin(path: &Path, options: &BuildOptions) -> anyhow::Result<PathBuf> {
    let manifest = if path.is_dir() {
        path.join("Cargo.toml")
    } else {
        path.to_path_buf()
    };
    let manifest = manifest
        .canonicalize()
        .with_context(|| format!("no Cargo.toml at {}", manifest.display()))?;
    let meta = metadata(&manifest)?;
    let package = meta
        .packages
        .iter()
        .find(|p| p.manifest_path == manifest)
        .with_context(|| format!("{} is not a package manifest", manifest.display()))?;
    let lib = package
        .targets
        .iter()
        .find(|t| t.crate_types.iter().any(|c| c == "cdylib"))
        .with_context(|| {
            format!(
                "package {} has no cdylib target; add `[lib] crate-type = [\"cdylib\"]`",
                package.name
            )
        })?;
    let outputs = build_packages(&meta, &[package.name.as_str()], options)?;
    Ok(outputs.join(format!("{}.wasm", lib.name.replace('-', "_"))))
}

/// Build every plugin of the workspace at `workspace_root` (the packages
/// under `plugins/` with a cdylib target); returns the output directory.
pub fn build_workspace_plugins(
    workspace_root: &Path,
    options: &BuildOptions,
) -> anyhow::Result<PathBuf> {
    let meta = metadata(&workspace_root.join("Cargo.toml"))?;
    let plugins_dir = meta.workspace_root.join("plugins");
    let names: Vec<&str> = meta
        .packages
        .iter()
        .filter(|p| p.manifest_path.starts_with(&plugins_dir))
        .filter(|p| {
            p.targets
                .iter()
                .any(|t| t.crate_types.iter().any(|c| c == "cdylib"))
        })
        .map(|p| p.name.as_str())
        .collect();
    if names.is_empty() {
        bail!("no plugin packages under {}", plugins_dir.display());
    }
    build_packages(&meta, &names, options)
}

fn build_packages(
    meta: &Metadata,
    packages: &[&str],
    options: &BuildOptions,
) -> anyhow::Result<PathBuf> {
    ensure_wasm_target()?;
    let target_dir = options
        .target_dir
        .clone()
        .unwrap_or_else(|| meta.target_directory.join("plugins"));
    let mut command = cargo();
    command
        .current_dir(&meta.workspace_root)
        .args([
            "build",
            "--target",
            WASM_TARGET,
            "--profile",
            &options.profile,
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        // A build started from a build script or test must not inherit the
        // outer build's flags for the host target.
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    for package in packages {
        command.args(["-p", package]);
    }
    let status = command.status().context("running cargo build")?;
    if !status.success() {
        bail!("building plugins {} failed", packages.join(", "));
    }
    let profile_dir = if options.profile == "dev" {
        "debug"
    } else {
        options.profile.as_str()
    };
    Ok(target_dir.join(WASM_TARGET).join(profile_dir))
}

/// The root of the source tree this binary was built from.
pub fn source_workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

/// The directory of this source tree's example plugins, built once per
/// process with the size-optimised `plugin` profile (tests, `gantry dev`).
pub fn example_plugins() -> anyhow::Result<&'static Path> {
    static BUILT: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let options = BuildOptions {
                profile: "plugin".into(),
                target_dir: None,
            };
            build_workspace_plugins(&source_workspace_root(), &options)
                .map_err(|e| format!("{e:#}"))
        })
        .as_deref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The component bytes of the example plugin `name` (e.g. `memcached`).
pub fn example_plugin(name: &str) -> anyhow::Result<Vec<u8>> {
    let path = example_plugins()?.join(format!("{}.wasm", name.replace('-', "_")));
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}

/// The component bytes of the example plugin `name`, built alone (for
/// `gantry dev`, which needs a few). Its own target directory: built
/// without the other examples, its dependencies may have other features,
/// and it must not replace the components [`example_plugins`] built.
pub fn example_plugin_alone(name: &str) -> anyhow::Result<Vec<u8>> {
    let root = source_workspace_root();
    let meta = metadata(&root.join("Cargo.toml"))?;
    let options = BuildOptions {
        profile: "plugin".into(),
        target_dir: Some(meta.target_directory.join("plugins-alone")),
    };
    let path = build_plugin(&root.join("plugins").join(name), &options)?;
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}

/// Name of the native binary of a Rust plugin project that prints its
/// CRD, and the feature that builds it.
const CRD_BINARY: (&str, &str) = ("crd", "crdgen");

/// What the `crd` binary of the Rust plugin project at `dir` prints (run
/// natively, with the `crdgen` feature); `None` when it has none.
pub fn print_crd(dir: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    let manifest = dir.join("Cargo.toml");
    let meta = metadata(&manifest)?;
    let (binary, feature) = CRD_BINARY;
    let has_binary = meta
        .packages
        .iter()
        .filter(|p| p.manifest_path == manifest.canonicalize().unwrap_or(manifest.clone()))
        .flat_map(|p| &p.targets)
        .any(|t| t.name == binary && t.crate_types.iter().any(|c| c == "bin"));
    if !has_binary {
        return Ok(None);
    }
    let output = cargo()
        .args(["run", "--quiet", "--bin", binary, "--features", feature])
        .arg("--manifest-path")
        .arg(&manifest)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo run --bin crd")?;
    if !output.status.success() {
        bail!(
            "building or running the crd binary of {} failed",
            dir.display()
        );
    }
    Ok(Some(output.stdout))
}
