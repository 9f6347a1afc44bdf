//! An admission policy that misbehaves on purpose, to test the webhook
//! server and the guardrails. The settings pick the behaviour:
//! `{"behaviour": "<name>"}` with one of
//!
//! - `allow`: allows everything (the default);
//! - `deny`: denies everything with "hostile policy denies <operation>";
//! - `mutate`: allows, adding the label `hostile: "yes"` to the object;
//! - `loop`: never returns (the deadline stops it);
//! - `memory-bomb`: allocates until the memory limit stops it;
//! - `panic`: panics (a trap);
//! - `sleep`: blocks in a WASI clock for `millis` (default 5000), then allows;
//! - `sleep-settings`: `validate-settings` blocks for `millis` (default
//!   5000), then accepts; `validate` allows.
//!
//! `validate-settings` rejects any other behaviour.

use gantry_sdk::{AdmissionRequest, Policy, Value, Verdict, json};

const BEHAVIOURS: &[&str] = &[
    "allow",
    "deny",
    "mutate",
    "loop",
    "memory-bomb",
    "panic",
    "sleep",
    "sleep-settings",
];

/// Block in a WASI clock subscription for the settings' `millis`.
fn sleep(settings: &Value) {
    let millis = settings
        .get("millis")
        .and_then(Value::as_u64)
        .unwrap_or(5000);
    std::thread::sleep(std::time::Duration::from_millis(millis));
}

fn behaviour(settings: &Value) -> &str {
    settings
        .get("behaviour")
        .and_then(Value::as_str)
        .unwrap_or("allow")
}

/// The policy.
pub struct HostilePolicy;

impl Policy for HostilePolicy {
    fn validate(request: AdmissionRequest) -> Verdict {
        match behaviour(&request.settings) {
            "deny" => Verdict::deny(format!("hostile policy denies {}", request.operation())),
            "mutate" => match request.object() {
                Some(object) => {
                    let mut object = object.clone();
                    if !object["metadata"]["labels"].is_object() {
                        object["metadata"]["labels"] = json!({});
                    }
                    object["metadata"]["labels"]["hostile"] = "yes".into();
                    Verdict::mutate(object)
                }
                None => Verdict::allow(),
            },
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
            "panic" => panic!("hostile policy panics on purpose"),
            "sleep" => {
                sleep(&request.settings);
                Verdict::allow()
            }
            _ => Verdict::allow(),
        }
    }

    fn validate_settings(settings: &Value) -> Result<(), String> {
        let wanted = behaviour(settings);
        if wanted == "sleep-settings" {
            sleep(settings);
        }
        if BEHAVIOURS.contains(&wanted) {
            Ok(())
        } else {
            Err(format!(
                "unknown behaviour {wanted:?}; expected one of {}",
                BEHAVIOURS.join(", ")
            ))
        }
    }
}

gantry_sdk::export_policy!(HostilePolicy);
