//! `gantry plugin new` scaffolds a project in each language whose tests
//! pass out of the box: `test.sh` runs the language's own unit tests
//! (`cargo test`, `node --test`, `python3 -m unittest`, `make test`, `go
//! test`), then `gantry plugin test .`, which builds the component and runs
//! the cases in `tests/` in the sandbox.
//!
//! JavaScript and Python need Node.js/npm and Python, Go needs `go`; their toolchains are
//! installed into the user's cache on first use (as for `polyglot.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gantry::toolchain::source_workspace_root;

const GANTRY: &str = env!("CARGO_BIN_EXE_gantry");

/// The workspace's target directory: Rust scaffolds build there, so the
/// SDK's dependencies are compiled once, not in every temporary project.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| source_workspace_root().join("target"), PathBuf::from)
}

fn scaffold_and_test(lang: &str, root: &Path) {
    let name = format!("hello-{lang}");
    let dir = root.join(&name);
    let out = Command::new(GANTRY)
        .args(["plugin", "new", "--lang", lang, &name, "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{lang}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = String::from_utf8_lossy(&out.stdout);
    for file in [
        "wit/gantry.wit",
        "test.sh",
        "tests/greets-world.yaml",
        "tests/rejects-a-missing-who.yaml",
        "binding.yaml",
    ] {
        assert!(
            listed.contains(file),
            "{lang}: {file} not written: {listed}"
        );
    }
    if lang == "rust" {
        // The versions this tree is tested with, and no registry lookup.
        std::fs::copy(
            source_workspace_root().join("Cargo.lock"),
            dir.join("Cargo.lock"),
        )
        .unwrap();
    }
    let started = Instant::now();
    let out = Command::new(dir.join("test.sh"))
        .env("GANTRY", GANTRY)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{lang}: test.sh failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for case in [
        "ok      greets-world",
        "ok      refuses-an-empty-greeting",
        "ok      rejects-a-missing-who",
        "plugin test: 3 passed, 0 failed",
    ] {
        assert!(stdout.contains(case), "{lang}: no {case:?} in\n{stdout}");
    }
    eprintln!(
        "{lang}: scaffold built and passed its test in {:?}",
        started.elapsed()
    );

    // `plugin bench` on the directory, with the scaffold's own config: one
    // row, the plugin's (there is no native build of it to compare with).
    let out = Command::new(GANTRY)
        .args(["plugin", "bench", "--plugin"])
        .arg(&dir)
        .args([
            "--parent",
            "examples/parent.yaml",
            "--config",
            "examples/config.yaml",
        ])
        .args([
            "--calls",
            "5",
            "--warmup",
            "1",
            "--deadline-ms",
            "5000",
            "--json",
        ])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", target_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{lang}: plugin bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{lang}: {rows:?}");
    assert!(
        rows[0]["name"]
            .as_str()
            .unwrap()
            .ends_with("(wasm, sandboxed)")
    );
}

#[test]
fn a_scaffolded_rust_plugin_passes_its_test() {
    scaffold_and_test("rust", tempfile::tempdir().unwrap().path());
}

#[test]
fn a_scaffolded_javascript_plugin_passes_its_test() {
    scaffold_and_test("js", tempfile::tempdir().unwrap().path());
}

#[test]
fn a_scaffolded_python_plugin_passes_its_test() {
    scaffold_and_test("python", tempfile::tempdir().unwrap().path());
}

#[test]
fn a_scaffolded_c_plugin_passes_its_test() {
    scaffold_and_test("c", tempfile::tempdir().unwrap().path());
}

/// Go: `go test` of the logic, then the component built with the standard
/// Go toolchain and run.
#[test]
fn a_scaffolded_go_plugin_passes_its_test() {
    scaffold_and_test("go", tempfile::tempdir().unwrap().path());
}

#[test]
fn plugin_new_refuses_a_bad_name_or_a_full_directory() {
    let root = tempfile::tempdir().unwrap();
    let out = Command::new(GANTRY)
        .args(["plugin", "new", "--lang", "js", "Bad_Name", "--dir"])
        .arg(root.path().join("x"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::write(root.path().join("file"), "x").unwrap();
    let out = Command::new(GANTRY)
        .args(["plugin", "new", "--lang", "python", "ok", "--dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not empty"));
}
