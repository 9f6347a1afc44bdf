//! Status: server-side apply to `/status` with the binding's status field
//! manager: the plugin's status, `observedGeneration`, conditions merged by
//! type, and the plugin digest under `status.gantry`.

use gantry_sdk::{Condition, ConditionStatus};
use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::ReconcileError;
use super::conditions::{self, SYNCED};
use super::context::{BindingContext, object_key};
use super::intent::{fingerprint, reflects};

/// Keys of `status` the host manages itself.
const HOST_KEYS: &[&str] = &["conditions", "observedGeneration", "gantry"];

/// The outcome to record on the parent.
pub struct Outcome<'a> {
    /// The plugin's status, or `None` to keep what it last reported.
    pub plugin_status: Option<Value>,
    /// The plugin's conditions.
    pub conditions: &'a [Condition],
    /// `Synced`: did the desired state get applied.
    pub synced: Condition,
    /// Advance `observedGeneration` (only when the spec was acted on).
    pub observed: bool,
    /// Digest of the plugin that produced it.
    pub digest: &'a str,
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The plugin's part of `status`: everything but the host's keys.
fn plugin_part(status: Option<&Value>) -> Value {
    let mut part = status
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for key in HOST_KEYS {
        part.remove(*key);
    }
    Value::Object(part)
}

/// Write the status of `parent`, unless it would change nothing. Returns
/// whether a write happened.
pub async fn write_status(
    ctx: &BindingContext,
    parent: &DynamicObject,
    outcome: Outcome<'_>,
) -> Result<bool, ReconcileError> {
    if !ctx.parent.has_status {
        return Ok(false);
    }
    let key = object_key(parent);
    let live = parent.data.get("status");
    let generation = parent.metadata.generation.unwrap_or(0);
    // Keep the plugin's last status when it reports none (or failed): SSA
    // would otherwise remove fields this manager stops sending.
    let plugin_status = match outcome.plugin_status {
        Some(status) => status,
        None => ctx
            .with_state(&key, |s| s.plugin_status.clone())
            .unwrap_or_else(|| plugin_part(live)),
    };
    let observed_generation = if outcome.observed {
        generation
    } else {
        live.and_then(|s| s.get("observedGeneration"))
            .and_then(Value::as_i64)
            .unwrap_or(0)
    };
    let wanted = conditions::with_host_conditions(outcome.conditions, outcome.synced);
    let merged = conditions::merge(
        live.and_then(|s| s.get("conditions")),
        &wanted,
        generation,
        &now(),
    );

    let mut status: Map<String, Value> = plugin_status.as_object().cloned().unwrap_or_default();
    status.insert("observedGeneration".into(), observed_generation.into());
    status.insert("conditions".into(), Value::Array(merged));
    status.insert(
        "gantry".into(),
        json!({"binding": ctx.name, "pluginDigest": outcome.digest}),
    );
    let status = Value::Object(status);

    let print = fingerprint(&status);
    let unchanged = ctx.with_state(&key, |s| s.status == Some(print));
    if unchanged && live.is_some_and(|l| reflects(l, &status)) {
        return Ok(false);
    }
    let patch = json!({
        "apiVersion": ctx.parent.kind.api_version,
        "kind": ctx.parent.kind.kind,
        "metadata": {"name": parent.name_any()},
        "status": status,
    });
    let api = ctx.parent.api(&ctx.client, parent.namespace().as_deref());
    let written = api
        .patch_status(
            &parent.name_any(),
            &PatchParams::apply(&ctx.spec.status_field_manager()).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(ReconcileError::Kube)?;
    ctx.note_own_write(&key, written.resource_version());
    ctx.with_state(&key, |s| {
        s.status = Some(print);
        s.plugin_status = Some(plugin_status);
    });
    Ok(true)
}

/// `Synced=True`.
pub fn synced() -> Condition {
    conditions::condition(
        SYNCED,
        ConditionStatus::True,
        "ReconcileSucceeded",
        "desired state applied",
    )
}

/// `Synced=False` with `reason` and `message`.
pub fn not_synced(reason: &str, message: &str) -> Condition {
    conditions::condition(SYNCED, ConditionStatus::False, reason, message)
}
