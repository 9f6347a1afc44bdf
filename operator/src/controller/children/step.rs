//! What to do with one intent, decided from the cache and the ledger
//! alone: skip it, apply it, look the child up first, or refuse it.

use serde_json::Value;

use super::fingerprint::reflects;
use crate::controller::cached::CachedObject;
use crate::controller::context::is_our_child;

/// What to do with one intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Ours, applied with this intent last time, and the live object
    /// still shows it: no write.
    Skip,
    /// Ours: apply.
    Apply,
    /// Not in the (label-filtered) cache: read it first, since it may exist
    /// without our label and then is not ours to change.
    LookUp,
    /// In the cache but controlled by another parent or binding: refuse.
    NotOurs,
}

/// The step for an intent `object` of binding `binding` and the parent
/// with `uid`: `live` is the cached child and its JSON, `applied_before`
/// whether the ledger has this intent as the last one applied.
pub(crate) fn step(
    live: Option<(&CachedObject, &Value)>,
    binding: &str,
    uid: &str,
    applied_before: bool,
    object: &Value,
) -> Step {
    match live {
        None => Step::LookUp,
        Some((live, _)) if !is_our_child(live, binding, uid) => Step::NotOurs,
        Some((_, json)) if applied_before && reflects(json, object) => Step::Skip,
        Some(_) => Step::Apply,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controller::spec::CHILD_LABEL;

    // Takes a `json!` literal by value so each call reads as data.
    #[allow(clippy::needless_pass_by_value)]
    fn child(binding: &str, owner_uid: &str, data: Value) -> (CachedObject, Value) {
        let json = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": "c", "namespace": "default",
                "labels": {CHILD_LABEL: binding},
                "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget", "name": "w",
                                     "uid": owner_uid, "controller": true}],
            },
            "data": data,
        });
        (serde_json::from_value(json.clone()).unwrap(), json)
    }

    #[test]
    fn an_unchanged_child_still_shown_live_is_skipped() {
        let (live, json) = child("widgets", "u1", json!({"a": "1"}));
        let intent = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        assert_eq!(
            step(Some((&live, &json)), "widgets", "u1", true, &intent),
            Step::Skip
        );
        // Not applied with this intent before (a restart, or a new intent): applied.
        assert_eq!(
            step(Some((&live, &json)), "widgets", "u1", false, &intent),
            Step::Apply
        );
        // Someone changed it since: applied again.
        let drifted = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
        assert_eq!(
            step(Some((&live, &json)), "widgets", "u1", true, &drifted),
            Step::Apply
        );
    }

    #[test]
    fn a_child_of_another_parent_or_binding_is_not_ours() {
        let intent = json!({"metadata": {"name": "c"}});
        let (other_parent, json) = child("widgets", "u2", json!({}));
        assert_eq!(
            step(
                Some((&other_parent, &json)),
                "widgets",
                "u1",
                false,
                &intent
            ),
            Step::NotOurs
        );
        let (other_binding, json) = child("gadgets", "u1", json!({}));
        assert_eq!(
            step(
                Some((&other_binding, &json)),
                "widgets",
                "u1",
                true,
                &intent
            ),
            Step::NotOurs
        );
        assert_eq!(step(None, "widgets", "u1", true, &intent), Step::LookUp);
    }
}
