//! Builds the examples `gantry dev` installs and embeds them: their
//! components and YAML files become `EMBEDDED` in
//! `$OUT_DIR/embedded_examples.rs` (see `src/examples/mod.rs`).
//!
//! Rust examples are built alone with the `plugin` profile in the target
//! directory's `plugins-alone/` (a target directory of its own, so the
//! nested cargo never waits on this build's lock); Guestbook with Go.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

include!("src/examples/names.rs");

/// Directories under an example that are build output, not source.
const OUTPUT_DIRS: &[&str] = &["dist", "target", "node_modules", "__pycache__"];

fn main() -> anyhow::Result<()> {
    let root = gantry_toolchain::source_workspace_root();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The nested cargo is a plain build: not clippy's, not this build's flags.
    // SAFETY: the build script is single-threaded.
    unsafe {
        for var in [
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
        ] {
            std::env::remove_var(var);
        }
    }
    for shared in ["guest-sdk", "go-sdk", "wit"] {
        watch(&root.join(shared));
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.lock").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );

    let mut code = String::from("static EMBEDDED: &[Embedded] = &[\n");
    for &name in EXAMPLES
        .iter()
        .chain(POLICY_EXAMPLES)
        .chain(CONVERTER_EXAMPLES)
    {
        let dir = root.join("plugins").join(name);
        watch(&dir);
        let go = gantry_toolchain::go::is_go_plugin(&dir);
        let component = if go {
            std::fs::read(gantry_toolchain::go::build_plugin(&dir)?)?
        } else {
            gantry_toolchain::rust::example_plugin_alone(name)?
        };
        let wasm = out.join(format!("{name}.wasm"));
        std::fs::write(&wasm, component)?;
        writeln!(
            code,
            "    Embedded {{ name: {name:?}, go: {go}, component: include_bytes!({:?}), files: &[",
            wasm.display().to_string()
        )?;
        for file in yaml_files(&dir)? {
            let file_name = file.file_name().unwrap().to_string_lossy().to_string();
            writeln!(
                code,
                "        ({file_name:?}, include_str!({:?})),",
                file.display().to_string()
            )?;
        }
        code.push_str("    ] },\n");
    }
    code.push_str("];\n");
    std::fs::write(out.join("embedded_examples.rs"), code)?;
    Ok(())
}

/// The YAML files at the top of `dir`, sorted.
fn yaml_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.retain(|path| path.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    Ok(files)
}

/// Rebuild when a source file under `dir` changes. File by file: a whole
/// directory would count its build output (Guestbook's `dist/`), which
/// every build rewrites.
fn watch(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !OUTPUT_DIRS.iter().any(|skip| name == *skip) {
                watch(&path);
            }
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
