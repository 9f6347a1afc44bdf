//! The sandbox against hostile components: every call ends by
//! its deadline whatever the guest calls, a concurrency slot is held until
//! its instance is gone, and a flood on stdout is cut, not fatal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gantry::runtime::{
    CallError, EngineSettings, Limits, PolicyPlugin, ReconcilerPlugin, Runtime, RuntimeSettings,
};
use gantry::toolchain::example_plugin;
use gantry_sdk::{AdmissionRequest, Request, json};
use serde_json::Value;

/// A sleep the deadline must cut short, and the bound it must be cut by:
/// far below the sleep, far above the deadline, for a loaded machine.
const SLEEP_MS: u64 = 5000;
const DEADLINE: Duration = Duration::from_millis(200);
const BOUND: Duration = Duration::from_secs(2);

/// A runtime with `slots` call slots and no disk cache.
fn runtime_with_slots(slots: usize) -> Runtime {
    Runtime::new(RuntimeSettings {
        engine: EngineSettings {
            max_concurrent_calls: slots,
            ..EngineSettings::default()
        },
        cache_dir: None,
    })
    .unwrap()
}

fn hostile(runtime: &Runtime) -> Arc<ReconcilerPlugin> {
    let bytes = example_plugin("hostile").expect("hostile plugin builds");
    runtime.load_reconciler("hostile", &bytes).expect("loads")
}

fn hostile_policy(runtime: &Runtime) -> Arc<PolicyPlugin> {
    let bytes = example_plugin("hostile-policy").expect("hostile policy builds");
    runtime
        .load_policy("hostile-policy", &bytes)
        .expect("loads")
}

fn request(config: Value) -> Request {
    let mut request = Request::for_parent(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p"}}),
    );
    request.config = config;
    request
}

fn short() -> Limits {
    Limits {
        deadline: DEADLINE,
        ..Limits::default()
    }
}

fn assert_timed_out<T: std::fmt::Debug>(what: &str, result: &Result<T, CallError>, took: Duration) {
    eprintln!("{what}: a {SLEEP_MS} ms sleep under a {DEADLINE:?} deadline returned in {took:?}");
    assert!(
        matches!(result, Err(CallError::Timeout { deadline }) if *deadline == DEADLINE),
        "{what}: expected a timeout, got {result:?}"
    );
    assert!(
        took < BOUND,
        "{what}: took {took:?}, the deadline is {DEADLINE:?}"
    );
}

#[test]
fn a_sleep_in_reconcile_ends_at_the_deadline() {
    let rt = Runtime::with_defaults().unwrap();
    let plugin = hostile(&rt);
    let started = Instant::now();
    let result = plugin.reconcile_blocking(
        &request(json!({"behaviour": "sleep", "millis": SLEEP_MS})),
        &short(),
    );
    assert_timed_out("reconcile", &result, started.elapsed());
    // The same plugin answers normally right after.
    let ok = plugin
        .reconcile_blocking(&request(json!({"behaviour": "ok"})), &Limits::default())
        .unwrap();
    assert_eq!(ok.children[0]["metadata"]["name"], "p-fine");
}

#[test]
fn a_sleep_in_validate_config_ends_at_the_deadline() {
    let rt = Runtime::with_defaults().unwrap();
    let plugin = hostile(&rt);
    let started = Instant::now();
    let result = plugin.validate_config_blocking(
        &json!({"behaviour": "sleep-config", "millis": SLEEP_MS}),
        &short(),
    );
    assert_timed_out("validate-config", &result, started.elapsed());
}

#[test]
fn a_sleep_in_a_policy_ends_at_the_deadline() {
    let rt = Runtime::with_defaults().unwrap();
    let policy = hostile_policy(&rt);
    let settings = json!({"behaviour": "sleep", "millis": SLEEP_MS});
    let admission = AdmissionRequest {
        request: json!({"operation": "CREATE", "object": {"metadata": {"name": "x"}}}),
        settings: settings.clone(),
    };
    let started = Instant::now();
    let result = policy.validate_blocking(&admission, &short());
    assert_timed_out("validate", &result, started.elapsed());

    let started = Instant::now();
    let result = policy.validate_settings_blocking(
        &json!({"behaviour": "sleep-settings", "millis": SLEEP_MS}),
        &short(),
    );
    assert_timed_out("validate-settings", &result, started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_calls_end_at_the_deadline_too() {
    let rt = Runtime::with_defaults().unwrap();
    let plugin = hostile(&rt);
    let started = Instant::now();
    let result = plugin
        .reconcile(
            request(json!({"behaviour": "sleep", "millis": SLEEP_MS})),
            short(),
        )
        .await;
    assert_timed_out("async reconcile", &result, started.elapsed());
    let started = Instant::now();
    let result = plugin
        .validate_config(
            json!({"behaviour": "sleep-config", "millis": SLEEP_MS}),
            short(),
        )
        .await;
    assert_timed_out("async validate-config", &result, started.elapsed());
}

/// A caller that gives up (as the reconcile timeout does) does not free
/// the slot: it is freed when the instance is dropped, at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_is_held_until_its_instance_is_gone() {
    let rt = runtime_with_slots(1);
    let plugin = hostile(&rt);
    let limits = Limits {
        deadline: Duration::from_millis(1500),
        ..Limits::default()
    };
    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        plugin.reconcile(
            request(json!({"behaviour": "sleep", "millis": SLEEP_MS})),
            limits,
        ),
    )
    .await;
    assert!(abandoned.is_err(), "the call should still run");
    assert_eq!(
        rt.calls_in_flight(),
        1,
        "the slot was freed while the instance still runs"
    );
    let started = Instant::now();
    while rt.calls_in_flight() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the sleeping instance outlived its deadline"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The one slot serves the next call.
    let ok = plugin
        .reconcile(request(json!({"behaviour": "ok"})), Limits::default())
        .await
        .unwrap();
    assert_eq!(ok.children.len(), 1);
}

/// Many sleeping calls at once, more than there are slots: each ends at its
/// deadline, and a good call runs right after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sleeping_calls_do_not_exhaust_the_pool() {
    let rt = runtime_with_slots(2);
    let plugin = hostile(&rt);
    let started = Instant::now();
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move {
                plugin
                    .reconcile(
                        request(json!({"behaviour": "sleep", "millis": SLEEP_MS})),
                        short(),
                    )
                    .await
            })
        })
        .collect();
    for call in calls {
        assert!(matches!(
            call.await.unwrap(),
            Err(CallError::Timeout { .. })
        ));
    }
    // 10 calls, 2 at a time, 200 ms each: about 1 s, far from 10 x 5 s / 2.
    let took = started.elapsed();
    eprintln!("10 sleeping calls over 2 slots took {took:?}");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_eq!(rt.calls_in_flight(), 0);
    plugin
        .reconcile(request(json!({"behaviour": "ok"})), Limits::default())
        .await
        .unwrap();
}

/// Reconciles that sleep on every slot of a runtime do not hold up a
/// policy loaded through `with_own_slots`, as the operator loads its
/// admission policies: the webhook answers while they are still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_have_slots_of_their_own() {
    let rt = runtime_with_slots(2);
    let plugin = hostile(&rt);
    let long = Limits {
        deadline: Duration::from_secs(30),
        ..Limits::default()
    };
    let sleepers: Vec<_> = (0..2)
        .map(|_| {
            let plugin = plugin.clone();
            tokio::spawn(async move {
                plugin
                    .reconcile(
                        request(json!({"behaviour": "sleep", "millis": SLEEP_MS})),
                        long,
                    )
                    .await
            })
        })
        .collect();
    while rt.calls_in_flight() < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let policies = rt.with_own_slots();
    let policy = hostile_policy(&policies);
    let admission = AdmissionRequest {
        request: json!({"operation": "CREATE", "object": {"metadata": {"name": "x"}}}),
        settings: json!({"behaviour": "deny"}),
    };
    let verdict = policy.validate(admission, Limits::default()).await;
    assert!(verdict.is_ok(), "{verdict:?}");
    // Both reconciles still hold their slots: the policy did not wait for them.
    assert_eq!(rt.calls_in_flight(), 2);
    assert!(sleepers.iter().all(|s| !s.is_finished()));
    assert_eq!(policies.calls_in_flight(), 0);
    for sleeper in sleepers {
        sleeper.await.unwrap().unwrap();
    }
}

/// More than the 64 KiB kept of stdout: the excess is dropped, the call
/// succeeds.
#[test]
fn a_flood_on_stdout_is_cut_not_fatal() {
    let rt = Runtime::with_defaults().unwrap();
    let plugin = hostile(&rt);
    let response = plugin
        .reconcile_blocking(
            &request(json!({"behaviour": "stdout-flood", "bytes": 1 << 20})),
            &Limits::default(),
        )
        .unwrap();
    assert_eq!(response.children[0]["metadata"]["name"], "p-flood");
}

/// The `*_blocking` calls work from async code too (a current-thread
/// runtime, as in `#[tokio::test]`), deadline included.
#[tokio::test]
async fn blocking_calls_work_from_a_current_thread_runtime() {
    let rt = Runtime::with_defaults().unwrap();
    let plugin = hostile(&rt);
    let ok = plugin
        .reconcile_blocking(&request(json!({"behaviour": "ok"})), &Limits::default())
        .unwrap();
    assert_eq!(ok.children.len(), 1);
    let started = Instant::now();
    let result = plugin.reconcile_blocking(
        &request(json!({"behaviour": "sleep", "millis": SLEEP_MS})),
        &short(),
    );
    assert_timed_out(
        "reconcile_blocking in async code",
        &result,
        started.elapsed(),
    );
}

/// And from a worker of a multi-threaded runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_calls_work_from_a_multi_thread_runtime() {
    let rt = Runtime::with_defaults().unwrap();
    let policy = hostile_policy(&rt);
    policy
        .validate_settings_blocking(&json!({"behaviour": "allow"}), &Limits::default())
        .unwrap();
    let started = Instant::now();
    let result = policy.validate_settings_blocking(
        &json!({"behaviour": "sleep-settings", "millis": SLEEP_MS}),
        &short(),
    );
    assert_timed_out(
        "validate_settings_blocking in async code",
        &result,
        started.elapsed(),
    );
}
