//! A reconcile plugin that misbehaves on purpose, to test the host's sandbox.
//!
//! It is written against the raw WIT bindings (not the SDK) so that it can
//! also break the contract in ways the SDK would not let it. The binding's
//! config picks the behaviour: `{"behaviour": "<name>"}` with one of
//! `ok` (one ConfigMap `<parent>-fine`), `slow` (like `ok` after `millis` of busy
//! wall-clock time, default 1000), `loop`, `memory-bomb`, `panic`, `oversized-output`,
//! `too-many-children`, `invalid-json`, `not-an-object`, `missing-name`,
//! `echo` (a ConfigMap `<parent>-echo` naming the related and observed
//! objects and the trigger), `chatty` (writes to stdout/stderr and the log; ConfigMap `<parent>-chatty`), `counter` (names its
//! child after a global call counter), `error`, and `fail-for` (an error for
//! the parents named in `names`, like `ok` for the others). `ok` puts the
//! config's `value`, if any, into its ConfigMap's data.
//!
//! Behaviours that attack the host rather than break the contract:
//! `sleep` (blocks in a WASI clock for `millis`, default 5000, then like
//! `ok`), `stdout-flood` (writes `bytes`, default 1 MiB, to stdout, then a
//! ConfigMap `<parent>-flood`), `children` (returns the config's `children`
//! verbatim, e.g. a ConfigMap labelled `gantry.dev/plugin`), `conditions`
//! and `events` (`count` of each, default 100,000 and 3,000), and
//! `requeue-zero` (like `ok` with `requeue-after-ms: 0`).
//!
//! `slow-error` is busy like `slow`, then fails (`retryable`, default true).
//! A parent's `spec.hostile`, when set, stands in for the config: parents
//! of one binding can misbehave each in their own way.
//!
//! `validate-config` rejects `{"behaviour": "reject-config"}` and sleeps
//! for `millis` (default 5000) with `{"behaviour": "sleep-config"}`.

#[cfg(target_arch = "wasm32")]
// For the glue `generate!` writes here, which rebuilds `Vec`s with
// `from_raw_parts(ptr, len, len)`.
#[allow(clippy::same_length_and_capacity)]
mod component {
    use serde_json::{Value, json};

    wit_bindgen::generate!({ world: "reconciler", path: "../../wit" });

    use exports::gantry::plugin::reconcile::{Guest, PluginError, Request, Response, Trigger};
    use gantry::plugin::host::log;
    use gantry::plugin::types::LogLevel;

    struct Hostile;

    fn behaviour(config: &str) -> String {
        serde_json::from_str::<Value>(config)
            .ok()
            .and_then(|c| {
                c.get("behaviour")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "ok".into())
    }

    fn response(children: Vec<String>) -> Response {
        Response {
            children,
            status: None,
            conditions: Vec::new(),
            events: Vec::new(),
            requeue_after_ms: None,
            finalized: false,
        }
    }

    fn number(config: &str, key: &str, default: u64) -> u64 {
        serde_json::from_str::<Value>(config)
            .ok()
            .and_then(|c| c.get(key).and_then(Value::as_u64))
            .unwrap_or(default)
    }

    /// Busy (in wasm code, not in the host) for `millis` of wall-clock time.
    fn busy(millis: u64) {
        let started = std::time::Instant::now();
        while started.elapsed().as_millis() < u128::from(millis) {
            std::hint::spin_loop();
        }
    }

    fn config_map(name: &str) -> String {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()
    }

    impl Guest for Hostile {
        fn reconcile(mut request: Request) -> Result<Response, PluginError> {
            if let Some(own) = serde_json::from_str::<Value>(&request.parent)
                .ok()
                .and_then(|p| p.pointer("/spec/hostile").cloned())
            {
                request.config = own.to_string();
            }
            let parent: String = serde_json::from_str::<Value>(&request.parent)
                .ok()
                .and_then(|p| {
                    p.pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_else(|| "parent".into());
            match behaviour(&request.config).as_str() {
                "loop" => {
                    let mut n: u64 = 0;
                    loop {
                        n = std::hint::black_box(n.wrapping_add(1));
                    }
                }
                "memory-bomb" => {
                    let mut hoard: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hoard.push(vec![1u8; 1 << 20]);
                        std::hint::black_box(&hoard);
                    }
                }
                "slow" => {
                    busy(number(&request.config, "millis", 1000));
                    Ok(response(vec![config_map(&format!("{parent}-fine"))]))
                }
                "slow-error" => {
                    busy(number(&request.config, "millis", 1000));
                    let retryable = serde_json::from_str::<Value>(&request.config)
                        .ok()
                        .and_then(|c| c.get("retryable").and_then(Value::as_bool))
                        .unwrap_or(true);
                    Err(PluginError {
                        message: format!("the hostile plugin fails slowly for {parent}"),
                        reason: "Refused".into(),
                        retryable,
                    })
                }
                "sleep" => {
                    // Blocks in the host (a WASI clock subscription), not in wasm code.
                    let millis = number(&request.config, "millis", 5000);
                    std::thread::sleep(std::time::Duration::from_millis(millis));
                    Ok(response(vec![config_map(&format!("{parent}-fine"))]))
                }
                "stdout-flood" => {
                    use std::io::Write;
                    let bytes = usize::try_from(number(&request.config, "bytes", 1 << 20))
                        .unwrap_or(usize::MAX);
                    let line = "x".repeat(1023);
                    let mut out = std::io::stdout().lock();
                    for _ in 0..bytes / 1024 {
                        writeln!(out, "{line}").expect("stdout takes what it is given");
                    }
                    out.flush().expect("stdout flushes");
                    Ok(response(vec![config_map(&format!("{parent}-flood"))]))
                }
                "children" => {
                    let children = serde_json::from_str::<Value>(&request.config)
                        .ok()
                        .and_then(|c| c.get("children").and_then(Value::as_array).cloned())
                        .unwrap_or_default();
                    Ok(response(children.iter().map(Value::to_string).collect()))
                }
                "conditions" => {
                    let count = number(&request.config, "count", 100_000);
                    let mut r = response(vec![config_map(&format!("{parent}-fine"))]);
                    r.conditions = (0..count)
                        .map(|i| exports::gantry::plugin::reconcile::Condition {
                            condition_type: format!("C{i}"),
                            status: exports::gantry::plugin::reconcile::ConditionStatus::True,
                            reason: "Many".into(),
                            message: String::new(),
                        })
                        .collect();
                    Ok(r)
                }
                "events" => {
                    let count = number(&request.config, "count", 3000);
                    let mut r = response(vec![config_map(&format!("{parent}-fine"))]);
                    r.events = (0..count)
                        .map(|i| exports::gantry::plugin::reconcile::Event {
                            event_type: exports::gantry::plugin::reconcile::EventType::Normal,
                            reason: "Many".into(),
                            message: format!("event {i}"),
                        })
                        .collect();
                    Ok(r)
                }
                "requeue-zero" => {
                    let mut r = response(vec![config_map(&format!("{parent}-fine"))]);
                    r.requeue_after_ms = Some(0);
                    Ok(r)
                }
                "panic" => panic!("hostile plugin panics on purpose"),
                "oversized-output" => {
                    // One child with a 6 MiB annotation: above the 4 MiB default cap.
                    let big = "x".repeat(6 << 20);
                    let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "big", "annotations": {"big": big}}});
                    Ok(response(vec![child.to_string()]))
                }
                "too-many-children" => Ok(response(
                    (0..1001).map(|i| config_map(&format!("c{i}"))).collect(),
                )),
                "invalid-json" => Ok(response(vec!["{not json".into()])),
                "not-an-object" => Ok(response(vec!["[1, 2, 3]".into()])),
                "missing-name" => Ok(response(vec![
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}).to_string(),
                ])),
                "chatty" => {
                    println!("hello from stdout");
                    eprintln!("hello from stderr");
                    log(LogLevel::Info, "hello from the log import");
                    Ok(response(vec![config_map(&format!("{parent}-chatty"))]))
                }
                "counter" => {
                    // Global state: a fresh instance per call must start from zero.
                    static CALLS: std::sync::atomic::AtomicU32 =
                        std::sync::atomic::AtomicU32::new(0);
                    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    Ok(response(vec![config_map(&format!("call-{n}"))]))
                }
                "echo" => {
                    // Reports what it was given: related names, observed names, trigger.
                    let names = |objects: &[String]| {
                        let mut names: Vec<String> = objects
                            .iter()
                            .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                            .filter_map(|o| {
                                o.pointer("/metadata/name")
                                    .and_then(Value::as_str)
                                    .map(str::to_string)
                            })
                            .collect();
                        names.sort();
                        names.join(",")
                    };
                    // A change of its own child, or a resync, keeps the
                    // trigger it last recorded, so the output settles.
                    let own = request
                        .observed
                        .iter()
                        .filter_map(|o| serde_json::from_str::<Value>(o).ok())
                        .find(|o| {
                            o.pointer("/metadata/name").and_then(Value::as_str)
                                == Some(&format!("{parent}-echo"))
                        });
                    let recorded = own.as_ref().and_then(|o| {
                        o.pointer("/data/trigger")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    });
                    let trigger = match &request.trigger {
                        Trigger::ParentChanged => "parent-changed".to_string(),
                        Trigger::ChildChanged(r) => {
                            recorded.unwrap_or_else(|| format!("child-changed:{}", r.name))
                        }
                        Trigger::RelatedChanged(r) => format!("related-changed:{}", r.name),
                        Trigger::Resync => recorded.unwrap_or_else(|| "resync".to_string()),
                        Trigger::Requeue => "requeue".to_string(),
                        Trigger::PluginChanged => "plugin-changed".to_string(),
                    };
                    let child = json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("{parent}-echo")},
                        "data": {"related": names(&request.related), "observed": names(&request.observed), "trigger": trigger}});
                    Ok(response(vec![child.to_string()]))
                }
                "requeue" => {
                    let mut r = response(vec![config_map(&format!("{parent}-fine"))]);
                    r.requeue_after_ms = Some(300);
                    Ok(r)
                }
                "error" => Err(PluginError {
                    message: "the hostile plugin refuses".into(),
                    reason: "Refused".into(),
                    retryable: true,
                }),
                "fail-for" => {
                    let names = serde_json::from_str::<Value>(&request.config)
                        .ok()
                        .and_then(|c| c.get("names").cloned())
                        .unwrap_or_default();
                    if names
                        .as_array()
                        .is_some_and(|n| n.iter().any(|n| *n == parent))
                    {
                        Err(PluginError {
                            message: format!("the hostile plugin fails for {parent}"),
                            reason: "Refused".into(),
                            retryable: false,
                        })
                    } else {
                        Ok(response(vec![config_map(&format!("{parent}-fine"))]))
                    }
                }
                _ => {
                    // `ok`, with the config's `value` (if any) in the child.
                    let value = serde_json::from_str::<Value>(&request.config)
                        .ok()
                        .and_then(|c| c.get("value").cloned());
                    let mut child: Value =
                        serde_json::from_str(&config_map(&format!("{parent}-fine"))).unwrap();
                    if let Some(value) = value {
                        child["data"] = json!({"value": value});
                    }
                    Ok(response(vec![child.to_string()]))
                }
            }
        }
    }

    impl exports::gantry::plugin::config::Guest for Hostile {
        fn validate_config(config: String) -> Result<(), String> {
            match behaviour(&config).as_str() {
                "reject-config" => Err("this config is rejected on purpose".into()),
                "sleep-config" => {
                    let millis = number(&config, "millis", 5000);
                    std::thread::sleep(std::time::Duration::from_millis(millis));
                    Ok(())
                }
                _ => Ok(()),
            }
        }
    }

    export!(Hostile);
}
