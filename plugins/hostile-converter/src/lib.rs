//! A converter that misbehaves on purpose, for tests: what it does to each
//! object is named by the object's annotation [`MODE`]:
//!
//! - `trap`: panics;
//! - `spin`: loops until the host's deadline stops it;
//! - `lossy`: drops `spec.owner`, so a round trip does not give the object
//!   back;
//! - `kind`: answers with another kind;
//! - anything else, or no annotation: changes `apiVersion` only.

use gantry_sdk::{Converter, Value};

/// The annotation that says how to misbehave.
pub const MODE: &str = "hostile.gantry.dev/convert";

/// The converter.
pub struct HostileConverter;

impl Converter for HostileConverter {
    fn convert(mut object: Value, desired_api_version: &str) -> Result<Value, String> {
        let mode = object
            .pointer(&format!(
                "/metadata/annotations/{}",
                MODE.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match mode.as_str() {
            "trap" => panic!("hostile converter traps on purpose"),
            "spin" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "lossy" => {
                if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("owner");
                }
            }
            "kind" => object["kind"] = "Other".into(),
            _ => {}
        }
        object["apiVersion"] = desired_api_version.into();
        Ok(object)
    }
}

gantry_sdk::export_converter!(HostileConverter);
