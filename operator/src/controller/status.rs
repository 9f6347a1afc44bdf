//! Status: server-side apply to `/status` with the binding's status field
//! manager: the plugin's status, `observedGeneration`, conditions merged by
//! type, and the plugin digest under `status.gantry`.

use gantry_sdk::{Condition, ConditionStatus};
use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use super::ReconcileError;
use super::children::fingerprint::{fingerprint, reflects};
use super::conditions::{self, SYNCED};
use super::context::{BindingContext, object_key};
use super::ledger::ParentState;

/// Keys of `status` the host manages itself.
const HOST_KEYS: &[&str] = &["conditions", "observedGeneration", "gantry"];

/// The outcome to record on the parent.
pub(crate) struct Outcome<'a> {
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

/// The status a reconcile wants on its parent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Planned {
    /// The whole `status` to apply.
    pub status: Value,
    /// Its fingerprint, for the ledger.
    pub print: u64,
    /// The plugin's part of it, kept for reconciles that report none.
    pub plugin_status: Value,
    /// The last write of this status still stands: nothing to write.
    pub unchanged: bool,
}

/// The status of `parent` for `outcome` of binding `binding`, given what
/// `ledger` remembers and that it is `now`; no API call.
pub(crate) fn plan(
    binding: &str,
    parent: &DynamicObject,
    outcome: Outcome<'_>,
    ledger: &ParentState,
    now: &str,
) -> Planned {
    let live = parent.data.get("status");
    let generation = parent.metadata.generation.unwrap_or(0);
    // Keep the plugin's last status when it reports none (or failed): SSA
    // would otherwise remove fields this manager stops sending.
    let plugin_status = match outcome.plugin_status {
        Some(status) => status,
        None => ledger.plugin_status().unwrap_or_else(|| plugin_part(live)),
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
        now,
    );

    let mut status: Map<String, Value> = plugin_status.as_object().cloned().unwrap_or_default();
    status.insert("observedGeneration".into(), observed_generation.into());
    status.insert("conditions".into(), Value::Array(merged));
    status.insert(
        "gantry".into(),
        json!({"binding": binding, "pluginDigest": outcome.digest}),
    );
    let status = Value::Object(status);
    let print = fingerprint(&status);
    let unchanged = ledger.status_written_as(print) && live.is_some_and(|l| reflects(l, &status));
    Planned {
        status,
        print,
        plugin_status,
        unchanged,
    }
}

/// Write the status of `parent`, unless it would change nothing. Returns
/// whether a write happened.
pub(crate) async fn write_status(
    ctx: &BindingContext,
    parent: &DynamicObject,
    outcome: Outcome<'_>,
) -> Result<bool, ReconcileError> {
    if !ctx.parent.has_status {
        return Ok(false);
    }
    let key = object_key(parent);
    let planned = ctx.ledgers.read(&key, |ledger| {
        plan(&ctx.name, parent, outcome, ledger, &now())
    });
    if planned.unchanged {
        return Ok(false);
    }
    let patch = json!({
        "apiVersion": ctx.parent.kind.api_version,
        "kind": ctx.parent.kind.kind,
        "metadata": {"name": parent.name_any()},
        "status": planned.status,
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
    ctx.ledgers.record_status(
        &key,
        written.resource_version(),
        planned.print,
        &planned.plugin_status,
    );
    Ok(true)
}

/// `Synced=True`.
pub(crate) fn synced() -> Condition {
    conditions::condition(
        SYNCED,
        ConditionStatus::True,
        "ReconcileSucceeded",
        "desired state applied",
    )
}

/// `Synced=Unknown`, reason `BindingRemoved`: the binding `binding` that
/// reconciled the parent is gone, so nothing keeps it as desired any more.
pub(crate) fn binding_removed(binding: &str) -> Condition {
    conditions::condition(
        SYNCED,
        ConditionStatus::Unknown,
        "BindingRemoved",
        &format!("binding {binding} was deleted; this object is no longer reconciled"),
    )
}

/// `Synced=False` with `reason` and `message`.
pub(crate) fn not_synced(reason: &str, message: &str) -> Condition {
    conditions::condition(SYNCED, ConditionStatus::False, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-12-02T00:00:00Z";

    fn parent(generation: i64, status: Option<Value>) -> DynamicObject {
        let mut object = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "default", "generation": generation},
        });
        if let Some(status) = status {
            object["status"] = status;
        }
        serde_json::from_value(object).unwrap()
    }

    fn outcome(plugin_status: Option<Value>, observed: bool) -> Outcome<'static> {
        Outcome {
            plugin_status,
            conditions: &[],
            synced: synced(),
            observed,
            digest: "abc",
        }
    }

    #[test]
    fn a_status_carries_the_plugins_part_the_generation_and_the_digest() {
        let planned = plan(
            "widgets",
            &parent(3, None),
            outcome(Some(json!({"ready": 2})), true),
            &ParentState::default(),
            NOW,
        );
        assert!(!planned.unchanged);
        let status = &planned.status;
        assert_eq!(status["ready"], 2);
        assert_eq!(status["observedGeneration"], 3);
        assert_eq!(
            status["gantry"],
            json!({"binding": "widgets", "pluginDigest": "abc"})
        );
        let synced = status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Synced")
            .unwrap();
        assert_eq!(synced["status"], "True");
        assert_eq!(synced["lastTransitionTime"], NOW);
        assert_eq!(planned.plugin_status, json!({"ready": 2}));
    }

    #[test]
    fn a_failed_reconcile_keeps_the_observed_generation_and_the_plugins_status() {
        let live = json!({"ready": 1, "observedGeneration": 2, "conditions": []});
        // Nothing in the ledger (a restart): the plugin's part comes from the live status.
        let planned = plan(
            "widgets",
            &parent(5, Some(live.clone())),
            outcome(None, false),
            &ParentState::default(),
            NOW,
        );
        assert_eq!(planned.status["observedGeneration"], 2);
        assert_eq!(planned.status["ready"], 1);
        // What the ledger remembers wins over the live status.
        let mut ledger = ParentState::default();
        ledger.record_status(0, &json!({"ready": 4}));
        let planned = plan(
            "widgets",
            &parent(5, Some(live)),
            outcome(None, false),
            &ledger,
            NOW,
        );
        assert_eq!(planned.status["ready"], 4);
    }

    #[test]
    fn a_status_written_before_and_still_live_is_not_written_again() {
        let first = plan(
            "widgets",
            &parent(1, None),
            outcome(Some(json!({"ready": 2})), true),
            &ParentState::default(),
            NOW,
        );
        let mut ledger = ParentState::default();
        ledger.record_status(first.print, &first.plugin_status);
        let again = plan(
            "widgets",
            &parent(1, Some(first.status.clone())),
            outcome(Some(json!({"ready": 2})), true),
            &ledger,
            NOW,
        );
        assert!(again.unchanged);
        // Someone else changed it meanwhile: written again.
        let mut changed = first.status.clone();
        changed["ready"] = json!(9);
        let drifted = plan(
            "widgets",
            &parent(1, Some(changed)),
            outcome(Some(json!({"ready": 2})), true),
            &ledger,
            NOW,
        );
        assert!(!drifted.unchanged);
    }
}
