//! The `handOver` of a binding: fields of children that pass to another
//! controller when the plugin stops setting them (see
//! `controller::children::handover` for how).

use serde::{Deserialize, Serialize};

use super::KindRef;

/// One entry of `handOver`: fields of a child kind that pass to another
/// controller when the plugin stops setting them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HandOverSpec {
    /// The child kind's `group/version` (as in `children`).
    pub api_version: String,
    /// The child kind.
    pub kind: String,
    /// Dotted paths of the fields, e.g. `spec.replicas`.
    pub fields: Vec<String>,
}

impl HandOverSpec {
    /// The kind part.
    pub fn kind_ref(&self) -> KindRef {
        KindRef {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
        }
    }
}

/// Top-level fields that are never handed over: the object's identity, the
/// host's metadata and the status, which children are not applied with.
const NOT_HANDED_OVER: &[&str] = &["apiVersion", "kind", "metadata", "status"];

/// Check `hand_over` against the binding's `children`: every kind declared,
/// every path a dotted path of map keys outside the identity, metadata and
/// status, none twice. `Err` is the field and what is wrong.
pub(super) fn check(
    hand_over: &[HandOverSpec],
    children: &[KindRef],
) -> Result<(), (String, String)> {
    for (i, entry) in hand_over.iter().enumerate() {
        let at = format!("handOver[{i}]");
        let kind = entry.kind_ref();
        if !children.contains(&kind) {
            return Err((at, format!("{kind} is not one of the binding's children")));
        }
        if hand_over[..i].iter().any(|e| e.kind_ref() == kind) {
            return Err((at, format!("{kind} is listed twice")));
        }
        if entry.fields.is_empty() {
            return Err((format!("{at}.fields"), "names no field".into()));
        }
        for (j, path) in entry.fields.iter().enumerate() {
            let at = format!("{at}.fields[{j}]");
            let segments: Vec<&str> = path.split('.').collect();
            let well_formed = segments
                .iter()
                .all(|s| !s.is_empty() && !s.contains(['[', ']', '/']));
            if !well_formed || segments.len() < 2 {
                return Err((
                    at,
                    format!("{path:?} is not a dotted path of fields such as spec.replicas"),
                ));
            }
            if NOT_HANDED_OVER.contains(&segments[0]) {
                return Err((at, format!("{path:?}: {} is not handed over", segments[0])));
            }
            if entry.fields[..j].contains(path) {
                return Err((at, format!("{path:?} is listed twice")));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment_kind() -> KindRef {
        KindRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
        }
    }

    fn entry(fields: &[&str]) -> HandOverSpec {
        HandOverSpec {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            fields: fields.iter().map(|f| (*f).to_string()).collect(),
        }
    }

    #[test]
    fn entries_name_declared_children_and_plain_paths() {
        let children = [deployment_kind()];
        assert!(check(&[entry(&["spec.replicas"])], &children).is_ok());
        for (bad, message) in [
            (entry(&[]), "names no field"),
            (entry(&["replicas"]), "not a dotted path"),
            (entry(&["spec..replicas"]), "not a dotted path"),
            (entry(&["spec.containers[0].image"]), "not a dotted path"),
            (entry(&["metadata.labels"]), "metadata is not handed over"),
            (entry(&["spec.replicas", "spec.replicas"]), "listed twice"),
        ] {
            let (_, error) = check(&[bad], &children).unwrap_err();
            assert!(error.contains(message), "{error}");
        }
        let mut other = entry(&["spec.replicas"]);
        other.kind = "StatefulSet".into();
        let (field, error) = check(&[other], &children).unwrap_err();
        assert_eq!(field, "handOver[0]");
        assert!(
            error.contains("not one of the binding's children"),
            "{error}"
        );
    }
}
