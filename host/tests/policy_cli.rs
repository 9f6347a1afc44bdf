//! The `gantry policy` commands, run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn policy(name: &str) -> String {
    gantry::toolchain::example_plugins()
        .expect("example plugins build")
        .join(format!("{}.wasm", name.replace('-', "_")))
        .display()
        .to_string()
}

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/admission")
        .join(name)
        .display()
        .to_string()
}

fn gantry(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CACHE_DIR", cache)
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

#[test]
fn policy_run_prints_the_admission_review_response() {
    let cache = tempfile::tempdir().unwrap();
    let out = gantry(
        &[
            "policy",
            "run",
            "--plugin",
            &policy("disallow-privileged"),
            "--request",
            &fixture("pod-privileged-create.json"),
        ],
        cache.path(),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let review: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        review["response"]["uid"],
        "0df28fbd-5f5f-11e8-bc74-36e6bb280816"
    );
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 403);

    // Settings from YAML; a mutating policy's patch with --mutating.
    let settings = write(cache.path(), "settings.yaml", "cpu: 100m\nmemory: 128Mi\n");
    let mut args = vec![
        "policy",
        "run",
        "--request",
        "",
        "--settings",
        &settings,
        "--plugin",
    ];
    let plugin = policy("default-resources");
    let request = fixture("pod-without-requests-create.json");
    args[3] = &request;
    args.push(&plugin);
    args.push("--mutating");
    let out = gantry(&args, cache.path());
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let review: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(review["response"]["patchType"], "JSONPatch");

    // Without --mutating the mutation is refused, as the webhook would.
    args.pop();
    let out = gantry(&args, cache.path());
    let review: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(review["response"]["allowed"], false);
    assert!(text(&out.stderr).contains("not marked mutating"));
}

#[test]
fn policy_run_exit_codes_match_plugin_run() {
    let cache = tempfile::tempdir().unwrap();
    let request = fixture("pod-privileged-create.json");
    let hostile = policy("hostile-policy");
    let code = |settings: &str, plugin: &str, request: &str| {
        let settings = write(cache.path(), "s.yaml", settings);
        let out = gantry(
            &[
                "policy",
                "run",
                "--plugin",
                plugin,
                "--request",
                request,
                "--settings",
                &settings,
                "--deadline-ms",
                "200",
            ],
            cache.path(),
        );
        (out.status.code(), text(&out.stderr))
    };
    let (status, stderr) = code("behaviour: sideways", &hostile, &request);
    assert_eq!(status, Some(1), "rejected settings: {stderr}");
    assert!(stderr.contains("unknown behaviour"), "{stderr}");
    let (status, stderr) = code("behaviour: loop", &hostile, &request);
    assert_eq!(status, Some(3), "deadline: {stderr}");
    assert!(stderr.contains("deadline"), "{stderr}");
    let (status, _) = code("behaviour: panic", &hostile, &request);
    assert_eq!(status, Some(3));
    let not_wasm = write(cache.path(), "x.wasm", "not wasm");
    assert_eq!(code("{}", &not_wasm, &request).0, Some(4));
    let not_review = write(cache.path(), "r.yaml", "kind: Pod\napiVersion: v1\n");
    let (status, stderr) = code("{}", &hostile, &not_review);
    assert_eq!(status, Some(5));
    assert!(stderr.contains("AdmissionReview"), "{stderr}");
    // A reconcile plugin is not a policy.
    assert_eq!(code("{}", &policy("memcached"), &request).0, Some(4));
}

#[test]
fn policy_bench_reports_latency() {
    let cache = tempfile::tempdir().unwrap();
    let out = gantry(
        &[
            "policy",
            "bench",
            "--plugin",
            &policy("cap-replicas"),
            "--request",
            &fixture("deployment-scale-update.json"),
            "--settings",
            &write(cache.path(), "s.json", "{\"max\": 5}"),
            "--calls",
            "50",
            "--warmup",
            "5",
            "--json",
        ],
        cache.path(),
    );
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["calls"], json!(50));
    assert!(rows[0]["name"].as_str().unwrap().contains("cap-replicas"));
}
