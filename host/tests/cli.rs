//! The `gantry plugin` commands, run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gantry::toolchain::example_plugins;

fn root() -> PathBuf {
    gantry::toolchain::source_workspace_root()
}

fn plugin(name: &str) -> PathBuf {
    example_plugins()
        .expect("example plugins build")
        .join(format!("{name}.wasm"))
}

fn gantry(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CACHE_DIR", cache)
        .current_dir(root())
        .output()
        .expect("run gantry")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

/// `gantry plugin <command>` with the memcached plugin on its example
/// parent, then `extra` flags.
fn memcached(command: &str, extra: &[&str], cache: &Path) -> Output {
    let component = plugin("memcached");
    let base = [
        "plugin",
        command,
        "--plugin",
        component.to_str().unwrap(),
        "--parent",
        "plugins/memcached/example.yaml",
    ];
    gantry(&[&base[..], extra].concat(), cache)
}

#[test]
fn plugin_run_prints_children_then_the_outcome_as_yaml() {
    let cache = tempfile::tempdir().unwrap();
    let out = memcached("run", &[], cache.path());
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let documents: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(documents.len(), 2, "{stdout}");
    assert_eq!(documents[0]["kind"], "Deployment");
    assert_eq!(documents[0]["spec"]["replicas"], 3);
    assert_eq!(documents[1]["status"]["readyReplicas"], 0);
    assert_eq!(documents[1]["conditions"][0]["type"], "Available");
    assert_eq!(documents[1]["finalized"], false);
}

#[test]
fn plugin_run_takes_observed_related_config_and_finalizing() {
    let dir = tempfile::tempdir().unwrap();
    let observed = write(
        dir.path(),
        "observed.yaml",
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: orders}\nspec: {selector: {}, template: {}, serviceName: orders}\nstatus: {replicas: 2, readyReplicas: 2}\n",
    );
    let out = gantry(
        &[
            "plugin",
            "run",
            "--plugin",
            plugin("database").to_str().unwrap(),
            "--parent",
            "plugins/database/example.yaml",
            "--observed",
            &observed,
            "--finalizing",
        ],
        dir.path(),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("replicas: 0"),
        "draining scales to zero:\n{stdout}"
    );
    assert!(stdout.contains("finalized: false"), "{stdout}");
    assert!(stdout.contains("requeueAfterMs: 2000"), "{stdout}");
}

#[test]
fn limit_breaches_and_plugin_errors_exit_non_zero_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = plugin("hostile");
    let hostile = hostile.to_str().unwrap();
    let parent = "plugins/memcached/example.yaml";
    // Only the loop gets a short deadline: on a loaded machine the others
    // must not be mistaken for timeouts.
    for (behaviour, deadline, code, message) in [
        ("loop", "100", 3, "exceeded its deadline of 100ms"),
        (
            "memory-bomb",
            "20000",
            3,
            "exceeded its memory limit of 16777216 bytes",
        ),
        ("panic", "20000", 3, "hostile plugin panics on purpose"),
        ("missing-name", "20000", 3, "has no metadata.name"),
        (
            "error",
            "20000",
            1,
            "the hostile plugin refuses (retryable)",
        ),
        ("reject-config", "20000", 1, "rejected on purpose"),
    ] {
        let config = write(
            dir.path(),
            "config.yaml",
            &format!("behaviour: {behaviour}\n"),
        );
        let args = [
            "plugin", "run", "--plugin", hostile, "--parent", parent, "--config", &config,
        ];
        let limits = ["--deadline-ms", deadline, "--memory-mib", "16"];
        let out = gantry(&[&args[..], &limits[..]].concat(), dir.path());
        assert_eq!(
            out.status.code(),
            Some(code),
            "{behaviour}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains(message),
            "{behaviour}: {}",
            text(&out.stderr)
        );
        assert!(out.stdout.is_empty(), "{behaviour} printed a response");
    }
}

#[test]
fn bad_plugins_and_bad_inputs_are_reported_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let not_wasm = write(dir.path(), "not.wasm", "hello");
    let out = gantry(
        &[
            "plugin",
            "run",
            "--plugin",
            &not_wasm,
            "--parent",
            "plugins/memcached/example.yaml",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("not a WebAssembly binary"),
        "{}",
        text(&out.stderr)
    );

    let policy = plugin("require_labels");
    let out = gantry(
        &[
            "plugin",
            "run",
            "--plugin",
            policy.to_str().unwrap(),
            "--parent",
            "plugins/memcached/example.yaml",
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(
        text(&out.stderr).contains("does not implement world gantry:plugin/reconciler@0.1.0"),
        "{}",
        text(&out.stderr)
    );

    let broken = write(dir.path(), "parent.yaml", "metadata: [unclosed\n");
    let out = gantry(
        &[
            "plugin",
            "run",
            "--plugin",
            plugin("memcached").to_str().unwrap(),
            "--parent",
            &broken,
        ],
        dir.path(),
    );
    assert_eq!(out.status.code(), Some(5));
    assert!(
        text(&out.stderr).contains("not valid YAML"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn plugin_bench_reports_wasm_and_native_side_by_side() {
    let cache = tempfile::tempdir().unwrap();
    let out = memcached(
        "bench",
        &["--calls", "20", "--warmup", "2", "--json"],
        cache.path(),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["name"], "memcached (wasm, sandboxed)");
    assert_eq!(rows[1]["name"], "memcached (native Rust)");
    for row in rows {
        assert_eq!(row["calls"], 20);
        assert!(row["calls_per_sec"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn plugin_run_reuses_the_compiled_cache() {
    let cache = tempfile::tempdir().unwrap();
    assert!(memcached("run", &[], cache.path()).status.success());
    let entries: Vec<PathBuf> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "one compiled component cached");
    let written = std::fs::metadata(&entries[0]).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = memcached("run", &[], cache.path());
    assert!(second.status.success());
    // Compiling again would have replaced the file (write, then rename).
    assert_eq!(
        std::fs::metadata(&entries[0]).unwrap().modified().unwrap(),
        written
    );
}
