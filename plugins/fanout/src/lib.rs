//! The benchmark plugin: each `Fanout` parent gets `children` ConfigMaps
//! (binding config, default 3) named `<parent>-<i>`, each holding the
//! parent's `spec.value`. Status reports how many children were observed.
//!
//! With `trapPercent: P` in the config, P% of calls panic (a trap in the
//! sandbox), chosen at random: `gantry bench converge --fault-plugin-traps`
//! and the fault tests use it.

use gantry_sdk::{PluginError, Reconciler, Request, Response, Value};
use serde::Deserialize;
use serde_json::json;

/// The binding's config.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// ConfigMaps per parent.
    #[serde(default = "three")]
    pub children: u32,
    /// Percentage of calls that trap.
    #[serde(default)]
    pub trap_percent: u8,
}

fn three() -> u32 {
    3
}

impl Default for Config {
    fn default() -> Self {
        Self {
            children: three(),
            trap_percent: 0,
        }
    }
}

/// A random percentile, 0..100, from the platform's random source (WASI
/// `random` in the sandbox).
fn roll() -> u8 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u8(0);
    (hasher.finish() % 100) as u8
}

/// The plugin.
pub struct Fanout;

impl Reconciler for Fanout {
    fn reconcile(request: Request) -> Result<Response, PluginError> {
        if request.finalizing {
            return Ok(Response::new().finalized());
        }
        let config: Config = if request.config.is_null() {
            Config::default()
        } else {
            request.config_as()?
        };
        assert!(
            !(config.trap_percent > 0 && roll() < config.trap_percent),
            "fanout traps on purpose ({}% of calls)",
            config.trap_percent
        );
        let name = request.parent_name()?;
        let value = request
            .parent
            .pointer("/spec/value")
            .cloned()
            .unwrap_or(Value::Null);
        let value = match value {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let mut response = Response::new();
        for i in 0..config.children {
            response = response.child_json(json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": format!("{name}-{i}")},
                "data": {"value": value},
            }));
        }
        let observed = request.observed.len();
        response = response.status(&json!({"children": observed}))?;
        Ok(response)
    }

    fn validate_config(config: &Value) -> Result<(), String> {
        if config.is_null() {
            return Ok(());
        }
        let config: Config =
            serde_json::from_value(config.clone()).map_err(|e| format!("invalid config: {e}"))?;
        if config.trap_percent > 100 {
            return Err("trapPercent must be 0..=100".into());
        }
        Ok(())
    }
}

gantry_sdk::export_reconciler!(Fanout);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_config_map_per_child_with_the_value() {
        let mut request = Request::for_parent(json!({"apiVersion": "bench.gantry.dev/v1",
            "kind": "Fanout", "metadata": {"name": "p"}, "spec": {"value": "v1"}}));
        request.config = json!({"children": 2});
        let response = Fanout::reconcile(request).unwrap();
        let names: Vec<&str> = response
            .children
            .iter()
            .map(|c| c["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["p-0", "p-1"]);
        assert!(response.children.iter().all(|c| c["data"]["value"] == "v1"));
    }

    #[test]
    fn every_call_traps_at_one_hundred_percent() {
        let mut request = Request::for_parent(json!({"metadata": {"name": "p"}}));
        request.config = json!({"trapPercent": 100});
        assert!(std::panic::catch_unwind(|| Fanout::reconcile(request)).is_err());
        assert!(Fanout::validate_config(&json!({"trapPercent": 101})).is_err());
    }
}
