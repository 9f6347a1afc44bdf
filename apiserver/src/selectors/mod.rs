//! Label and field selectors (`?labelSelector=`, `?fieldSelector=`).

use std::collections::BTreeSet;

use serde_json::Value;

use crate::registry::ResourceInfo;

pub mod fields;

/// One label requirement.
#[derive(Clone, Debug, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<Req>,
}

/// A selector that could not be parsed (its message is kube's).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = vec![];
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 317
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn parse_set(s: &str) -> Result<BTreeSet<String>, SelectorError> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| {
            SelectorError(format!(
                "unable to parse requirement: expected (values) in {s:?}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses kube's selector syntax: `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = vec![];
        for part in split_top(s) {
            let req = if let Some(k) = part.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().into(), parse_set(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Req::In(k.trim().into(), parse_set(v)?)
            } else {
                Req::Exists(part.trim().to_string())
            };
            let key = match &req {
                Req::Eq(k, _)
                | Req::NotEq(k, _)
                | Req::In(k, _)
                | Req::NotIn(k, _)
                | Req::Exists(k)
                | Req::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(SelectorError(format!(
                    "unable to parse requirement: invalid label key {key:?} in {part:?}"
                )));
            }
            reqs.push(req);
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether the object's labels satisfy the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, set) => get(k).is_some_and(|x| set.contains(x)),
            Req::NotIn(k, set) => get(k).is_none_or(|x| !set.contains(x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: each field as `info`'s kind reads it ([`fields`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<(fields::Field, bool, String)>,
}

impl FieldSelector {
    /// Parses `f=v,g!=w` (also `==`) for the kind `info`; a field the kind cannot
    /// be selected by is an error with kube's message.
    pub fn parse(info: &ResourceInfo, s: &str) -> Result<Self, SelectorError> {
        let mut reqs = vec![];
        for part in split_top(s) {
            let (field, eq, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = fields::field(info, field.trim()).map_err(SelectorError)?;
            reqs.push((field, eq, value.trim().to_string()));
        }
        Ok(FieldSelector { reqs })
    }

    /// Whether the object satisfies the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs
            .iter()
            .all(|(f, eq, v)| (f.value(obj) == *v) == *eq)
    }
}

/// Both selectors of a list or watch request.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Whether the object matches both.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Takes a `json!` literal by value so each call reads as data.
    #[allow(clippy::needless_pass_by_value)]
    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn label_operators() {
        let o = obj(json!({"app": "web", "tier": "fe"}));
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web,db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing notin (x)", true),
            ("app=web,tier=be", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("a in b").is_err());
    }

    fn builtin(group: &str, plural: &str) -> ResourceInfo {
        crate::registry::builtin::all()
            .into_iter()
            .find(|r| r.group == group && r.plural == plural)
            .unwrap()
    }

    #[test]
    fn field_selectors() {
        let cm = builtin("", "configmaps");
        let o = obj(json!({}));
        assert!(
            FieldSelector::parse(&cm, "metadata.name=a")
                .unwrap()
                .matches(&o)
        );
        assert!(
            !FieldSelector::parse(&cm, "metadata.namespace!=ns")
                .unwrap()
                .matches(&o)
        );
        assert_eq!(
            FieldSelector::parse(&cm, "spec.bogus=1")
                .unwrap_err()
                .to_string(),
            r#""spec.bogus" is not a known field selector: only "metadata.name", "metadata.namespace""#
        );
        let pods = builtin("", "pods");
        let pod = json!({"metadata": {"name": "p"}, "spec": {"restartPolicy": "Never"},
            "status": {"phase": "Pending", "podIPs": [{"ip": "10.0.0.1"}]}});
        for (sel, want) in [
            ("spec.restartPolicy=Never", true),
            ("spec.hostNetwork=false", true),
            ("status.podIP=10.0.0.1", true),
            ("status.nominatedNodeName=", true),
            ("spec.schedulerName=x", false),
            ("spec.host=", true),
        ] {
            assert_eq!(
                FieldSelector::parse(&pods, sel).unwrap().matches(&pod),
                want,
                "{sel}"
            );
        }
        assert_eq!(
            FieldSelector::parse(&pods, "spec.bogus=1")
                .unwrap_err()
                .to_string(),
            "field label not supported: spec.bogus"
        );
        let events = builtin("events.k8s.io", "events");
        let event = json!({"involvedObject": {"apiVersion": "v1", "kind": "Pod"},
            "reportingComponent": "kubelet"});
        for sel in [
            "regarding.apiVersion=v1",
            "regarding.kind=Pod",
            "reportingController=kubelet",
        ] {
            assert!(
                FieldSelector::parse(&events, sel).unwrap().matches(&event),
                "{sel}"
            );
        }
        let core = builtin("", "events");
        assert!(
            FieldSelector::parse(&core, "involvedObject.apiVersion=v1,source=kubelet")
                .unwrap()
                .matches(&event)
        );
    }
}
