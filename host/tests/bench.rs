//! The benchmarks run, at tiny sizes: they produce their reports, and the
//! properties they measure hold (equal answers before timing; no writes on
//! a resync with nothing changed). Their numbers are not asserted.

mod common;

use std::process::Command;

use common::{Backend, Cluster, backends};
use serde_json::Value;

fn gantry_json(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gantry {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

#[test]
fn dispatch_measures_native_wasm_and_webhook_per_size() {
    let dir = tempfile::tempdir().unwrap();
    let report = gantry_json(&[
        "bench",
        "dispatch",
        "--sizes",
        "1k,20k",
        "--calls",
        "20",
        "--warmup",
        "2",
        "--chart-dir",
        dir.path().to_str().unwrap(),
    ]);
    let sizes: Vec<u64> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["parent_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [1024, 20480]);
    for size in report.as_array().unwrap() {
        let names: Vec<&str> = size["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "native Rust call",
                "wasm, Rust guest (sandboxed)",
                "HTTP webhook on loopback"
            ]
        );
        assert!(
            size["rows"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["calls"] == 20)
        );
    }
    for bytes in [1024, 20480] {
        let svg =
            std::fs::read_to_string(dir.path().join(format!("dispatch-{bytes}.svg"))).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("HTTP webhook on loopback"));
    }
}

#[test]
fn load_times_compiling_and_precompiled_loads_of_each_plugin() {
    let report = gantry_json(&["bench", "load", "--loads", "2", "--compiles", "1"]);
    let rows: Vec<(&str, u64)> = report
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["calls"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [
            ("memcached: compile and load", 1),
            ("memcached: precompiled load", 2),
            ("fanout: compile and load", 1),
            ("fanout: precompiled load", 2),
        ]
    );
}

/// `gantry bench converge` at a tiny size, with the controller-runtime peer
/// after Gantry: JSON with every phase of both.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converge_reports_phases_side_by_side_and_a_resync_writes_nothing(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("converge.svg");
    // The embedded backend: the bench starts its own `gantry apiserver`;
    // the real one: the bench runs against a cluster by its kubeconfig.
    let cluster = match backend {
        Backend::Embedded => None,
        Backend::Node => unreachable!("#[backends] runs embedded and real"),
        Backend::Real => Some(Cluster::start(backend).await),
    };
    let kubeconfig = cluster
        .as_ref()
        .map(|c| c.kubeconfig().to_str().unwrap().to_string());
    let mut args = vec![
        "--log-format",
        "text",
        "bench",
        "converge",
        "--parents",
        "6",
        "--children-per-parent",
        "2",
        "--resync-secs",
        "2",
        "--timeout-secs",
        "120",
        "--churn-secs",
        "2",
        "--churn-percent",
        "50",
        "--peer",
        "controller-runtime",
        "--chart",
        chart.to_str().unwrap(),
    ];
    if let Some(kubeconfig) = &kubeconfig {
        args.extend(["--kubeconfig", kubeconfig]);
    }
    let args: Vec<String> = args.into_iter().map(String::from).collect();
    let report = tokio::task::spawn_blocking(move || {
        gantry_json(&args.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    let runs = rows(&report, "writes");
    let phases = |implementation: &str| -> Vec<(&str, u64)> {
        runs.iter()
            .filter(|r| r.0 == implementation)
            .map(|r| (r.1, r.2))
            .collect()
    };
    for implementation in ["gantry", "controller-runtime"] {
        let phases = phases(implementation);
        assert_eq!(phases[0].0, "converge", "{report}");
        // 12 children and 6 status writes at least.
        assert!(phases[0].1 >= 18, "{implementation}: {report}");
        assert_eq!(phases[1].0, "resync", "{report}");
        assert_eq!(phases[2].0, "spec-change");
        assert!(phases[2].1 >= 12, "{implementation}: {report}");
        // Churn: half the parents a second for two seconds, each change
        // timed to its children written (two ConfigMaps each at least).
        assert_eq!(phases[3].0, "churn", "{report}");
        assert!(phases[3].1 >= 12, "{implementation}: {report}");
    }
    for run in report["runs"].as_array().unwrap() {
        let latency = &run["latency"];
        if run["phase"] != "churn" {
            assert!(latency.is_null(), "{run}");
            continue;
        }
        assert_eq!(latency["changes"], 6, "{run}");
        let [p50, p99, max] =
            ["p50_seconds", "p99_seconds", "max_seconds"].map(|k| latency[k].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{run}");
        assert!(max < 60.0, "{run}");
    }
    // Gantry writes nothing on a resync that changes nothing. (The peer's
    // requeues may still catch up on statuses then: not asserted.)
    assert_eq!(phases("gantry")[1], ("resync", 0), "{report}");
    // Gantry's new version is shadow-run on every parent before it serves.
    assert_eq!(phases("gantry").len(), 5, "{report}");
    assert_eq!(phases("gantry")[4].0, "shadow");
    assert_eq!(phases("controller-runtime").len(), 4, "{report}");
    for run in report["runs"].as_array().unwrap() {
        assert!(run["seconds"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["peak_rss_bytes"].as_u64().unwrap() > 0, "{run}");
        assert!(run["cpu_seconds"].as_f64().unwrap() >= 0.0, "{run}");
    }
    let converge = |implementation: &str| {
        report["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["implementation"] == implementation && r["phase"] == "converge")
            .unwrap()
            .clone()
    };
    for implementation in ["gantry", "controller-runtime"] {
        assert!(
            converge(implementation)["cpu_seconds"].as_f64().unwrap() > 0.0,
            "{implementation} converged without CPU time: {report}"
        );
        assert!(converge(implementation)["reconciles"].as_u64().unwrap() >= 6);
    }
    // Event writes are counted apart from the writes: Gantry tells each
    // parent of the children it created; the peer writes Events only on
    // failures.
    assert!(
        converge("gantry")["events"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert_eq!(converge("controller-runtime")["events"], 0, "{report}");
    if cluster.is_none() {
        // Only the API server process the bench started itself is measured.
        assert!(report["apiserver_peak_rss"].as_u64().unwrap() > 0);
    }
    assert!(std::fs::read_to_string(&chart).unwrap().starts_with("<svg"));
}

/// `gantry bench converge --converge-only`, the scale run: Gantry and the
/// peer converge, and nothing else runs; `--logs` keeps both logs.
#[test]
fn a_scale_run_measures_the_converge_phase_only() {
    let logs = tempfile::tempdir().unwrap();
    let logs_dir = logs.path().join("logs");
    let report = gantry_json(&[
        "--log-format",
        "text",
        "bench",
        "converge",
        "--parents",
        "4",
        "--children-per-parent",
        "1",
        "--converge-only",
        "--peer",
        "controller-runtime",
        "--logs",
        logs_dir.to_str().unwrap(),
    ]);
    for log in ["gantry.log", "controller-runtime.log"] {
        let text = std::fs::read_to_string(logs_dir.join(log)).unwrap();
        assert!(!text.is_empty(), "{log} is empty");
    }
    let runs = rows(&report, "reconciles");
    assert_eq!(runs.len(), 2, "{report}");
    for ((implementation, phase, reconciles), expected) in
        runs.into_iter().zip(["gantry", "controller-runtime"])
    {
        assert_eq!((implementation, phase), (expected, "converge"), "{report}");
        assert!(reconciles >= 4, "{report}");
    }
}

/// Each run of a converge report as (implementation, phase, `field`).
fn rows<'a>(report: &'a Value, field: &str) -> Vec<(&'a str, &'a str, u64)> {
    report["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["implementation"].as_str().unwrap(),
                r["phase"].as_str().unwrap(),
                r[field].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `gantry bench density` at a tiny size, with the controller-runtime peer
/// (one process per operator) after Gantry (one process for all): every
/// operator, the one added for the marginal cost included, converges with
/// all its children.
#[test]
fn density_converges_every_operator_in_one_gantry_and_in_one_peer_each() {
    let report = gantry_json(&[
        "--log-format",
        "text",
        "bench",
        "density",
        "--operators",
        "3",
        "--parents-per-operator",
        "2",
        "--children-per-parent",
        "2",
        "--resync-secs",
        "2",
        "--steady-secs",
        "1",
        "--extra-operators",
        "1",
        "--timeout-secs",
        "120",
        "--peer",
        "controller-runtime",
    ]);
    let runs = report["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["implementation"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gantry", "controller-runtime"], "{report}");
    for (run, processes) in runs.iter().zip([1, 3]) {
        assert_eq!(run["processes"], processes, "{run}");
        let operators = run["operators"].as_array().unwrap();
        let kinds: Vec<&str> = operators
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Density0", "Density1", "Density2", "Density3"]);
        for operator in operators {
            assert_eq!(
                (
                    &operator["parents"],
                    &operator["converged"],
                    &operator["children"]
                ),
                (&Value::from(2), &Value::from(2), &Value::from(4)),
                "{run}"
            );
        }
        let counts: Vec<u64> = run["rss_by_operators"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_u64().unwrap())
            .collect();
        assert_eq!(counts, [3, 4], "{run}");
        assert!(run["marginal_rss_bytes"].is_f64(), "{run}");
        assert!(run["converge_seconds"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["steady_rss_bytes"].as_u64().unwrap() > 0, "{run}");
        assert!(
            run["converge_peak_rss_bytes"].as_u64().unwrap() > 0,
            "{run}"
        );
        for cpu in [
            "start_cpu_seconds",
            "converge_cpu_seconds",
            "steady_cpu_seconds",
        ] {
            assert!(run[cpu].as_f64().unwrap() >= 0.0, "{cpu}: {run}");
        }
    }
    assert!(report["apiserver_peak_rss"].as_u64().unwrap() > 0);
}
