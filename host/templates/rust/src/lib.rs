//! __NAME__: a Gantry reconcile plugin.
//!
//! A parent with `spec.who` wants a ConfigMap `<name>-greeting` whose
//! `message` is `"<config.greeting>, <spec.who>!"`.

use gantry_sdk::k8s_openapi::api::core::v1::ConfigMap;
use gantry_sdk::{PluginError, Reconciler, Request, Response, Value, json, serde_json};
use serde::Deserialize;

/// The parent's `spec`.
#[derive(Deserialize)]
struct Spec {
    who: String,
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
        let spec: Spec = request.spec()?;
        let name = request.parent_name()?;
        let greeting = config.greeting.as_deref().unwrap_or("Hello");
        let message = format!("{greeting}, {}!", spec.who);
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
}
