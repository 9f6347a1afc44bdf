//! Fields a binding hands over to another controller (`handOver`), such as
//! a Deployment's `spec.replicas` to a `HorizontalPodAutoscaler`.
//!
//! Children are server-side applied: a field the binding's field manager
//! owns alone is removed when the plugin stops setting it, and the API
//! server's default takes its place (a Deployment drops to 1 replica). For
//! a field listed in `handOver`, the host first applies that field alone,
//! at its live value, as the field manager `gantry-handover/<binding>`.
//! Both managers then own it, the binding's own apply lets go of it, and
//! the field keeps its value until the next controller writes it (the
//! HPA's scale), which leaves the hand-over manager owning nothing. This is
//! Kubernetes' documented way of transferring ownership with server-side
//! apply. A field the binding does not own (another controller wrote it
//! since) needs nothing.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value, json};

use crate::controller::spec::{HandOverSpec, KindRef};

/// The field manager that holds handed-over fields for binding `binding`.
pub(crate) fn manager(binding: &str) -> String {
    format!("gantry-handover/{binding}")
}

fn get<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |at, key| at.get(key))
}

/// The fields of `paths` that `intent` leaves out and `live` has, with
/// their live values.
pub(crate) fn released<'p>(
    paths: &'p [String],
    intent: &Value,
    live: &Value,
) -> Vec<(Vec<&'p str>, Value)> {
    paths
        .iter()
        .map(|p| p.split('.').collect::<Vec<_>>())
        .filter(|path| get(intent, path).is_none())
        .filter_map(|path| {
            let value = get(live, &path)?.clone();
            (!value.is_null()).then_some((path, value))
        })
        .collect()
}

/// Whether the `Apply` entry of `manager` in `managed_fields` (the
/// object's `metadata.managedFields`, as JSON) owns `path`.
pub(crate) fn owns(managed_fields: &Value, manager: &str, path: &[&str]) -> bool {
    managed_fields
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| {
            entry["manager"] == manager
                && entry["operation"] == "Apply"
                && entry.get("subresource").is_none_or(|s| s == "")
        })
        .any(|entry| {
            path.iter()
                .try_fold(&entry["fieldsV1"], |at, key| at.get(format!("f:{key}")))
                .is_some()
        })
}

/// The object a hand-over applies: the child's identity and `fields` at
/// their values, nothing else.
pub(crate) fn hand_over_object(intent: &Value, fields: &[(Vec<&str>, Value)]) -> Value {
    let mut metadata = Map::new();
    for key in ["name", "namespace"] {
        if let Some(value) = intent.pointer(&format!("/metadata/{key}")) {
            metadata.insert(key.into(), value.clone());
        }
    }
    let mut object = json!({
        "apiVersion": intent["apiVersion"],
        "kind": intent["kind"],
        "metadata": metadata,
    });
    for (path, value) in fields {
        let (last, parents) = path.split_last().expect("paths have two segments or more");
        let mut at = &mut object;
        for key in parents {
            at = at
                .as_object_mut()
                .expect("built of objects")
                .entry(*key)
                .or_insert_with(|| json!({}));
        }
        at[*last] = value.clone();
    }
    object
}

/// Before the binding's apply of `intent` (a child of kind `kind`), hand
/// over the fields of `hand_over` it leaves out and the binding's manager
/// `owner` owns. `live` is the child as last seen (none: not there), to
/// read it again with its managed fields only when there is something to
/// hand over. Whether a hand-over was applied.
pub(crate) async fn hand_over(
    api: &Api<DynamicObject>,
    hand_over: &[HandOverSpec],
    binding: &str,
    owner: &str,
    kind: &KindRef,
    intent: &Value,
    live: Option<&Value>,
) -> Result<bool, kube::Error> {
    let Some(entry) = hand_over.iter().find(|e| e.kind_ref() == *kind) else {
        return Ok(false);
    };
    let Some(live) = live else {
        return Ok(false);
    };
    if released(&entry.fields, intent, live).is_empty() {
        return Ok(false);
    }
    let name = intent
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(fresh) = api.get_opt(name).await? else {
        return Ok(false);
    };
    let fresh = serde_json::to_value(fresh).unwrap_or_default();
    let managed = fresh
        .pointer("/metadata/managedFields")
        .cloned()
        .unwrap_or(Value::Null);
    let fields: Vec<_> = released(&entry.fields, intent, &fresh)
        .into_iter()
        .filter(|(path, _)| owns(&managed, owner, path))
        .collect();
    if fields.is_empty() {
        return Ok(false);
    }
    let object = hand_over_object(intent, &fields);
    match api
        .patch(
            name,
            &PatchParams::apply(&manager(binding)),
            &Patch::Apply(&object),
        )
        .await
    {
        Ok(_) => {
            let paths: Vec<String> = fields.iter().map(|(p, _)| p.join(".")).collect();
            tracing::info!(%binding, child = %name, fields = %paths.join(","), "handed over to the next controller");
            Ok(true)
        }
        // Another manager set the field since it was read: it owns it now,
        // and the binding's apply removes nothing.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_fields_are_those_the_intent_leaves_out_and_the_live_object_has() {
        let paths = vec!["spec.replicas".to_string(), "spec.paused".to_string()];
        let live = json!({"spec": {"replicas": 3, "template": {}}});
        let without = json!({"spec": {"template": {}}});
        assert_eq!(
            released(&paths, &without, &live),
            vec![(vec!["spec", "replicas"], json!(3))]
        );
        let with = json!({"spec": {"replicas": 5}});
        assert!(released(&paths, &with, &live).is_empty());
    }

    #[test]
    fn ownership_is_read_from_the_managers_apply_entry() {
        let managed = json!([
            {"manager": "gantry/web", "operation": "Apply",
             "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "subresource": "scale",
             "fieldsV1": {"f:spec": {"f:paused": {}}}}
        ]);
        assert!(owns(&managed, "gantry/web", &["spec", "replicas"]));
        assert!(!owns(&managed, "gantry/web", &["spec", "paused"]));
        assert!(!owns(&managed, "gantry/other", &["spec", "replicas"]));
        assert!(!owns(&Value::Null, "gantry/web", &["spec", "replicas"]));
    }

    #[test]
    fn the_hand_over_object_holds_the_identity_and_the_fields_alone() {
        let intent = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "b"}},
            "spec": {"template": {}}});
        assert_eq!(
            hand_over_object(&intent, &[(vec!["spec", "replicas"], json!(3))]),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "namespace": "shop"},
                   "spec": {"replicas": 3}})
        );
    }
}
