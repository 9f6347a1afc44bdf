//! The component a local command runs: a file, a source directory built
//! first, or an OCI artifact pulled through the plugin cache.

use std::path::Path;

use anyhow::Context;

use gantry_toolchain::{self as toolchain, BuildOptions};

/// Pull the component of an `oci://` reference (through the plugin cache).
fn pull(reference: &str) -> anyhow::Result<(String, Vec<u8>)> {
    let source = gantry_operator::delivery::source::SourceSpec {
        url: None,
        oci: Some(reference.to_string()),
        insecure: false,
    }
    .check(false)
    .map_err(|(_, message)| anyhow::anyhow!(message))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let fetched = runtime
        .block_on(gantry_operator::delivery::source::Fetcher::default().fetch(&source, None))?;
    eprintln!(
        "pulled {} (sha256 {})",
        fetched.resolved.as_deref().unwrap_or(reference),
        fetched.component.digest()
    );
    let name = reference
        .rsplit('/')
        .next()
        .and_then(|last| last.split([':', '@']).next())
        .unwrap_or("plugin")
        .to_string();
    Ok((name, fetched.component.into_bytes()))
}

/// The component bytes and a display name: `path` itself, the component
/// built from the source directory at `path`, or pulled from `oci://…`.
pub(super) fn component(path: &Path) -> anyhow::Result<(String, Vec<u8>)> {
    if let Some(reference) = path.to_str().filter(|p| p.starts_with("oci://")) {
        return pull(reference);
    }
    let file = if path.is_dir() {
        toolchain::build_any(path, &BuildOptions::default())?
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let name = file
        .file_stem()
        .map_or_else(|| "plugin".into(), |s| s.to_string_lossy().into_owned());
    Ok((name, bytes))
}
