//! A reconcile plugin that misbehaves on purpose, to test the host's sandbox.
//!
//! It is written against the raw WIT bindings (not the SDK) so that it can
//! also break the contract in ways the SDK would not let it. The binding's
//! config picks the behaviour: `{"behaviour": "<name>"}` with one of
//! `ok`, `loop`, `memory-bomb`, `panic`, `oversized-output`,
//! `too-many-children`, `invalid-json`, `not-an-object`, `missing-name`,
//! `chatty` (writes to stdout/stderr and the log), `counter` (names its
//! child after a global call counter), `error`.
//! `validate-config` rejects `{"behaviour": "reject-config"}`.

#[cfg(target_arch = "wasm32")]
mod component {
    use serde_json::{Value, json};

    wit_bindgen::generate!({ world: "reconciler", path: "../../wit" });

    use exports::gantry::plugin::reconcile::{Guest, PluginError, Request, Response};
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

    fn config_map(name: &str) -> String {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}).to_string()
    }

    impl Guest for Hostile {
        fn reconcile(request: Request) -> Result<Response, PluginError> {
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
                    Ok(response(vec![config_map("chatty")]))
                }
                "counter" => {
                    // Global state: a fresh instance per call must start from zero.
                    static CALLS: std::sync::atomic::AtomicU32 =
                        std::sync::atomic::AtomicU32::new(0);
                    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    Ok(response(vec![config_map(&format!("call-{n}"))]))
                }
                "error" => Err(PluginError {
                    message: "the hostile plugin refuses".into(),
                    reason: "Refused".into(),
                    retryable: true,
                }),
                _ => Ok(response(vec![config_map("fine")])),
            }
        }
    }

    impl exports::gantry::plugin::config::Guest for Hostile {
        fn validate_config(config: String) -> Result<(), String> {
            match behaviour(&config).as_str() {
                "reject-config" => Err("this config is rejected on purpose".into()),
                _ => Ok(()),
            }
        }
    }

    export!(Hostile);
}
