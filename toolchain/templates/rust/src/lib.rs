//! __NAME__: a Gantry reconcile plugin.
//!
//! A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose
//! `message` is `"<config.greeting>, <spec.who>!"`.

use gantry_sdk::k8s_openapi::api::core::v1::ConfigMap;
use gantry_sdk::{PluginError, Reconciler, Request, Response, Value, json, serde_json};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The parent kind, `Greeting` (example.com/v1): its CRD is derived from
/// these types (`gantry plugin crd .` prints it). Validation and defaults
/// in the schema are enforced by the API server, before the plugin runs.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    printcolumn = r#"{"name": "Who", "type": "string", "jsonPath": ".spec.who"}"#,
    printcolumn = r#"{"name": "Message", "type": "string", "jsonPath": ".status.message"}"#,
    // The SDK's copies of these crates.
    crates(
        k8s_openapi = "::gantry_sdk::k8s_openapi",
        serde_json = "::gantry_sdk::serde_json"
    )
)]
pub struct GreetingSpec {
    /// Whom to greet.
    #[schemars(length(min = 1, max = 63))]
    pub who: String,
    /// What ends the message (default "!"): the API server fills it in.
    #[serde(default = "default_punctuation")]
    #[schemars(length(max = 3))]
    pub punctuation: String,
}

fn default_punctuation() -> String {
    "!".into()
}

/// What the plugin reports in `status`, beside what the host writes.
#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
pub struct GreetingStatus {
    /// The message written into the ConfigMap.
    #[serde(default)]
    pub message: String,
    /// Conditions and `observedGeneration`, written by the host.
    #[serde(flatten)]
    pub host: gantry_sdk::HostStatus,
}

/// The binding's `config`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Config {
    greeting: Option<String>,
}

pub struct Plugin;

impl Reconciler for Plugin {
    fn reconcile(request: Request) -> Result<Response, PluginError> {
        if request.finalizing {
            return Ok(Response::new().finalized());
        }
        let config: Config = request.config_as::<Option<Config>>()?.unwrap_or_default();
        let spec: GreetingSpec = request.spec()?;
        let name = request.parent_name()?;
        let greeting = config.greeting.as_deref().unwrap_or("Hello");
        let message = format!("{greeting}, {}{}", spec.who, spec.punctuation);
        let child_name = format!("{name}-greeting");

        let mut map = ConfigMap::default();
        map.metadata.name = Some(child_name.clone());
        map.data = Some([("message".to_string(), message.clone())].into());
        Response::new()
            .child(&map)?
            .condition(
                "Greeted",
                true,
                "ConfigMapWritten",
                format!("{child_name} says {message}"),
            )
            .status(&json!({ "message": message }))
    }

    fn validate_config(config: &Value) -> Result<(), String> {
        let config: Option<Config> =
            serde_json::from_value(config.clone()).map_err(|e| format!("invalid config: {e}"))?;
        match config.and_then(|c| c.greeting) {
            Some(g) if g.trim().is_empty() => Err("config.greeting must not be empty".into()),
            _ => Ok(()),
        }
    }
}

gantry_sdk::export_reconciler!(Plugin);

// Unit tests of the logic, natively: `cargo test`. The cases in tests/ run
// the built component instead (`gantry plugin test .`).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_who_the_spec_names() {
        let mut request = Request::for_parent(json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": "world", "namespace": "default"},
            "spec": {"who": "World"}
        }));
        request.config = json!({"greeting": "Hi"});
        let response = Plugin::reconcile(request).unwrap();
        assert_eq!(response.children[0]["data"]["message"], "Hi, World!");
        assert!(Plugin::validate_config(&json!({"greeting": " "})).is_err());
    }

    #[test]
    fn a_parent_without_who_is_invalid_input() {
        let request = Request::for_parent(json!({
            "apiVersion": "example.com/v1", "kind": "Greeting",
            "metadata": {"name": "nobody", "namespace": "default"}, "spec": {}
        }));
        let error = Plugin::reconcile(request).unwrap_err();
        assert_eq!((error.reason.as_str(), error.retryable), ("InvalidInput", false));
    }
}
