//! What a new plugin version would change on one parent, against the
//! version in service: children created, changed (a unified diff of their
//! YAML) or pruned, and the parent's status and conditions.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;
use similar::TextDiff;

use gantry_operator::controller::rollout::Answer;

/// The comparison of two answers for one parent.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ParentDiff {
    /// The parent, `namespace/name`.
    pub parent: String,
    /// Children only the new version wants, as YAML, by identity.
    pub created: Vec<(String, String)>,
    /// Children both want differently: identity and unified diff.
    pub changed: Vec<(String, String)>,
    /// Children only the version in service wants: they would be pruned.
    pub pruned: Vec<String>,
    /// Unified diff of status, conditions, requeue and finalized.
    pub status: Option<String>,
    /// Why the new version fails on this parent.
    pub failure: Option<String>,
    /// Why the version in service fails on this parent.
    pub current_failure: Option<String>,
}

impl ParentDiff {
    /// Compare the `current` and `new` answers for `parent`.
    pub(super) fn new(parent: String, current: &Answer, new: &Answer) -> Self {
        let mut diff = Self {
            parent,
            ..Self::default()
        };
        let new = match new {
            Ok(new) => new,
            Err(e) => {
                diff.failure = Some(e.clone());
                return diff;
            }
        };
        let empty = Value::Null;
        let current = match current {
            Ok(current) => current,
            Err(e) => {
                diff.current_failure = Some(e.clone());
                &empty
            }
        };
        let before = children(current);
        let after = children(new);
        for (id, object) in &after {
            match before.get(id) {
                None => diff.created.push((id.clone(), yaml(object))),
                Some(old) if old != object => diff
                    .changed
                    .push((id.clone(), unified(&yaml(old), &yaml(object)))),
                Some(_) => {}
            }
        }
        diff.pruned = before
            .keys()
            .filter(|id| !after.contains_key(*id))
            .cloned()
            .collect();
        let (old, new) = (outcome(current), outcome(new));
        if old != new {
            diff.status = Some(unified(&yaml(&old), &yaml(&new)));
        }
        diff
    }

    /// Whether the new version answers exactly as the one in service.
    pub(super) fn unchanged(&self) -> bool {
        self.failure.is_none()
            && self.current_failure.is_none()
            && self.created.is_empty()
            && self.changed.is_empty()
            && self.pruned.is_empty()
            && self.status.is_none()
    }

    /// The comparison in words, for a terminal.
    pub(super) fn render(&self) -> String {
        let mut out = String::new();
        if let Some(failure) = &self.failure {
            let _ = writeln!(out, "{}: the new version fails: {failure}", self.parent);
            return out;
        }
        if self.unchanged() {
            let _ = writeln!(out, "{}: unchanged", self.parent);
            return out;
        }
        let _ = writeln!(
            out,
            "{}: {} created, {} changed, {} pruned, status {}",
            self.parent,
            self.created.len(),
            self.changed.len(),
            self.pruned.len(),
            if self.status.is_some() {
                "changed"
            } else {
                "unchanged"
            }
        );
        if let Some(failure) = &self.current_failure {
            let _ = writeln!(out, "  (the version in service fails here: {failure})");
        }
        for (id, object) in &self.created {
            let _ = writeln!(out, "+ {id}");
            out.push_str(&indent(object, "    "));
        }
        for (id, diff) in &self.changed {
            let _ = writeln!(out, "~ {id}");
            out.push_str(&indent(diff, "    "));
        }
        for id in &self.pruned {
            let _ = writeln!(out, "- {id}");
        }
        if let Some(status) = &self.status {
            let _ = writeln!(out, "~ status");
            out.push_str(&indent(status, "    "));
        }
        out
    }
}

/// The children of an answer by identity: `apiVersion Kind namespace/name`.
fn children(answer: &Value) -> BTreeMap<String, &Value> {
    answer
        .get("children")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|child| (identity(child), child))
        .collect()
}

fn identity(child: &Value) -> String {
    let text = |pointer: &str| child.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let name = match text("/metadata/namespace") {
        "" => text("/metadata/name").to_string(),
        ns => format!("{ns}/{}", text("/metadata/name")),
    };
    format!("{} {} {name}", text("/apiVersion"), text("/kind"))
}

/// Everything of an answer but its children.
fn outcome(answer: &Value) -> Value {
    let mut outcome = answer.clone();
    if let Some(map) = outcome.as_object_mut() {
        map.remove("children");
    }
    outcome
}

fn yaml(value: &Value) -> String {
    serde_yaml::to_string(value).expect("JSON values serialize as YAML")
}

fn unified(old: &str, new: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header("in service", "new")
        .to_string()
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines().fold(String::new(), |mut out, line| {
        let _ = writeln!(out, "{prefix}{line}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(name: &str, data: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": data}})
    }

    #[test]
    fn children_are_created_changed_or_pruned_and_status_is_diffed() {
        let current = Ok(json!({
            "children": [map("keep", "a"), map("edit", "old"), map("gone", "x")],
            "status": {"replicas": 1}, "conditions": [], "finalized": false, "requeue": null,
        }));
        let new = Ok(json!({
            "children": [map("keep", "a"), map("edit", "new"), map("fresh", "y")],
            "status": {"replicas": 2}, "conditions": [], "finalized": false, "requeue": null,
        }));
        let diff = ParentDiff::new("default/p".into(), &current, &new);
        assert!(!diff.unchanged());
        assert_eq!(diff.created.len(), 1);
        assert_eq!(diff.created[0].0, "v1 ConfigMap default/fresh");
        assert_eq!(diff.pruned, vec!["v1 ConfigMap default/gone".to_string()]);
        assert_eq!(diff.changed[0].0, "v1 ConfigMap default/edit");
        assert!(
            diff.changed[0].1.contains("-  k: old\n+  k: new"),
            "{}",
            diff.changed[0].1
        );
        let status = diff.status.as_deref().unwrap();
        assert!(
            status.contains("-  replicas: 1\n+  replicas: 2"),
            "{status}"
        );
        let text = diff.render();
        assert!(
            text.starts_with("default/p: 1 created, 1 changed, 1 pruned, status changed\n"),
            "{text}"
        );
        assert!(text.contains("\n- v1 ConfigMap default/gone\n"), "{text}");

        let same = ParentDiff::new("default/p".into(), &current, &current);
        assert!(same.unchanged());
        assert_eq!(same.render(), "default/p: unchanged\n");
    }

    #[test]
    fn failures_are_reported_on_either_side() {
        let ok = Ok(json!({"children": [map("a", "1")]}));
        let failing = ParentDiff::new("default/p".into(), &ok, &Err("plugin trapped: boom".into()));
        assert_eq!(
            failing.render(),
            "default/p: the new version fails: plugin trapped: boom\n"
        );
        let fixed = ParentDiff::new("default/p".into(), &Err("old bug".into()), &ok);
        assert_eq!(
            fixed.created.len(),
            1,
            "everything the fixed version wants is new"
        );
        assert!(
            fixed
                .render()
                .contains("(the version in service fails here: old bug)")
        );
    }
}
