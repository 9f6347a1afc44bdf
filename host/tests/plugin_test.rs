//! `gantry plugin test`: declarative cases run on a built component in the
//! sandbox. The memcached example (built once, as the other tests build
//! it) answers cases in a project directory made here: passing cases, an
//! expectation that is wrong (exit 1, the difference named and diffed),
//! `--update` (the case rewritten, then passing), and malformed cases.
//! `scaffold.rs` runs the cases `gantry plugin new` ships in each language.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gantry_test_support::output_text as text;
use std::sync::OnceLock;

const GANTRY: &str = env!("CARGO_BIN_EXE_gantry");

/// The memcached component, built once per test binary, and a compile
/// cache shared by every run of `gantry plugin test` here.
fn built() -> &'static (tempfile::TempDir, PathBuf) {
    static BUILT: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let bytes = gantry::toolchain::example_plugin("memcached").expect("memcached builds");
        let wasm = dir.path().join("memcached.wasm");
        std::fs::write(&wasm, bytes).unwrap();
        (dir, wasm)
    })
}

/// A project directory: memcached's binding and `cases` in `tests/`.
fn project(cases: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let source = gantry::toolchain::source_workspace_root().join("plugins/memcached");
    std::fs::copy(source.join("binding.yaml"), dir.path().join("binding.yaml")).unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    for (name, text) in cases {
        std::fs::write(dir.path().join("tests").join(name), text).unwrap();
    }
    dir
}

fn plugin_test(dir: &Path, extra: &[&str]) -> Output {
    let (cache, wasm) = built();
    Command::new(GANTRY)
        .args(["plugin", "test"])
        .arg(dir)
        .arg("--plugin")
        .arg(wasm)
        .arg("--cache-dir")
        .arg(cache.path().join("compiled"))
        .args(extra)
        .output()
        .unwrap()
}

/// Scaling from one replica to three: the child, the status from the
/// observed Deployment, a condition and an event.
const SCALES: &str = "\
description: scales the Deployment it observes
given:
  parent:
    apiVersion: cache.example.com/v1alpha1
    kind: Memcached
    metadata: {name: cache, namespace: default}
    spec: {size: 3}
  observed:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: cache, namespace: default}
    spec: {replicas: 1}
    status: {readyReplicas: 1}
expect:
  children:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: cache, labels: {app.kubernetes.io/instance: cache}}
    spec:
      replicas: 3
      template:
        spec:
          containers:
          - {name: memcached, image: 'memcached:1.6.26-alpine'}
  status: {readyReplicas: 1}
  conditions:
  - {type: Available, status: 'False', reason: Scaling}
  events:
  - {type: Normal, reason: Scaling, message: scaling memcached from 1 to 3 replicas}
";

const TOO_LARGE: &str = "\
given:
  parent: {apiVersion: cache.example.com/v1alpha1, kind: Memcached, metadata: {name: big}, spec: {size: 11}}
expect:
  error: {reason: InvalidSpec, retryable: false}
";

const BAD_CONFIG: &str = "\
given:
  parent: {apiVersion: cache.example.com/v1alpha1, kind: Memcached, metadata: {name: c}, spec: {size: 1}}
  config: {image: ' '}
expect:
  error: {reason: InvalidConfig, message: config.image must not be empty}
";

/// Expects three replicas and a ready Deployment of a parent that asks
/// for two.
const WRONG: &str = "\
# Written before the plugin's answer was known.
given:
  # two replicas, nothing observed yet
  parent: {apiVersion: cache.example.com/v1alpha1, kind: Memcached, metadata: {name: two}, spec: {size: 2}}
expect:
  # stale
  children:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: two}
    spec: {replicas: 3}
  conditions:
  - {type: Available, reason: DeploymentReady}
";

#[test]
fn cases_pass_and_a_wrong_expectation_fails_with_what_differs() {
    let dir = project(&[
        ("scales.yaml", SCALES),
        ("too-large.yaml", TOO_LARGE),
        ("bad-config.yaml", BAD_CONFIG),
        ("wrong.yaml", WRONG),
    ]);
    let out = plugin_test(dir.path(), &[]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    for line in [
        "ok      bad-config",
        "ok      scales",
        "ok      too-large",
        "FAIL    wrong",
        "        children[apps/v1 Deployment two].spec.replicas: expected 3, got 2",
        "        conditions[Available].reason: expected \"DeploymentReady\", got \"Scaling\"",
        "        -      replicas: 3",
        "        +      replicas: 2",
        "plugin test: 3 passed, 1 failed",
    ] {
        assert!(
            report.lines().any(|l| l.starts_with(line)),
            "no {line:?} in\n{report}"
        );
    }

    // Only the wrong case is left: exit 1 still; without it, 0.
    std::fs::remove_file(dir.path().join("tests/wrong.yaml")).unwrap();
    let out = plugin_test(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    // A named field the plugin does not set is a difference too.
    std::fs::write(
        dir.path().join("tests/scales.yaml"),
        SCALES.replace(
            "status: {readyReplicas: 1}",
            "status: {readyReplicas: 1, phase: Ready}",
        ),
    )
    .unwrap();
    let out = plugin_test(dir.path(), &[]);
    assert!(
        text(&out).contains("status.phase: expected \"Ready\", got nothing"),
        "{}",
        text(&out)
    );
}

#[test]
fn update_writes_the_answer_into_the_fields_a_case_names() {
    let dir = project(&[
        ("scales.yaml", SCALES),
        ("wrong.yaml", WRONG),
        (
            "new.yaml",
            "given:\n  parent: {apiVersion: cache.example.com/v1alpha1, kind: Memcached, metadata: {name: n}, spec: {size: 1}}\n",
        ),
    ]);
    let out = plugin_test(dir.path(), &["--update"]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(report.contains("ok      scales"), "{report}");
    assert!(report.contains("updated wrong"), "{report}");
    assert!(report.contains("updated new"), "{report}");
    assert!(
        report.contains("plugin test: 1 passed, 0 failed, 2 updated"),
        "{report}"
    );
    // A passing case is left byte for byte.
    let read = |name: &str| std::fs::read_to_string(dir.path().join("tests").join(name)).unwrap();
    assert_eq!(read("scales.yaml"), SCALES);

    // The rewritten case: its `given` and comments as written, `expect`
    // with the answer's values in the fields it named, nothing more.
    let wrong = read("wrong.yaml");
    assert!(
        wrong.starts_with("# Written before the plugin's answer was known.\ngiven:\n  # two replicas, nothing observed yet\n"),
        "{wrong}"
    );
    assert!(!wrong.contains("# stale"), "{wrong}");
    let expect: serde_json::Value =
        serde_yaml::from_str::<serde_json::Value>(&wrong).unwrap()["expect"].clone();
    assert_eq!(
        expect,
        serde_json::json!({
            "children": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "two"}, "spec": {"replicas": 2}}],
            "conditions": [{"type": "Available", "reason": "Scaling"}]
        })
    );
    // A case without `expect` gets the whole answer.
    let new: serde_json::Value = serde_yaml::from_str(&read("new.yaml")).unwrap();
    let child = &new["expect"]["children"][0];
    assert_eq!(
        child["spec"]["template"]["spec"]["containers"][0]["name"],
        "memcached"
    );
    assert_eq!(
        new["expect"]["status"],
        serde_json::json!({"readyReplicas": 0})
    );
    assert_eq!(new["expect"]["finalized"], false);

    let out = plugin_test(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("plugin test: 3 passed, 0 failed"),
        "{}",
        text(&out)
    );
}

#[test]
fn malformed_cases_are_refused_before_anything_runs() {
    let dir = project(&[
        ("scales.yaml", SCALES),
        ("typo.yaml", &SCALES.replace("expect:", "expected:")),
        (
            "nameless.yaml",
            &SCALES.replace(
                "metadata: {name: cache, labels: {app.kubernetes.io/instance: cache}}",
                "metadata: {labels: {a: b}}",
            ),
        ),
    ]);
    let out = plugin_test(dir.path(), &[]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(5), "{report}");
    assert!(
        report.contains("typo.yaml") && report.contains("unknown field `expected`"),
        "{report}"
    );
    assert!(
        report.contains("nameless.yaml")
            && report
                .contains("expect.children[0]: a child needs apiVersion, kind and metadata.name"),
        "{report}"
    );
    assert!(
        report.contains("2 malformed case(s): nothing was run"),
        "{report}"
    );
    assert!(!report.contains("ok      scales"), "{report}");

    let empty = tempfile::tempdir().unwrap();
    let out = plugin_test(empty.path(), &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("no cases"), "{}", text(&out));
}
