//! Shadow runs of converters: before a new version of a converter serves,
//! it converts every stored object of its CRD to each other served version
//! and back, writing nothing. A round trip must give the object back
//! unchanged; an error, a broken answer or a changed object is a failure.
//! The new version is refused if it fails on more objects than the
//! binding allows where the running version succeeds, or, as a first
//! version, if it fails on every object.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;

use super::review::describe;
use super::{ConverterSpec, LoadedConverter, convert_with};
use gantry_sandbox::runtime::{ConverterPlugin, Limits};

/// Round trips run at once.
const CONCURRENCY: usize = 4;
/// Failing objects named in a refusal.
const EXAMPLES: usize = 3;

/// What a converter's shadow run found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversionReport {
    /// Round trips tried (objects × other served versions).
    pub tried: u64,
    /// Round trips on which the new version fails where the running one
    /// succeeds (or, for a first version, fails at all).
    pub failed: u64,
    /// Up to three failing round trips, with what went wrong.
    pub examples: Vec<String>,
}

impl ConversionReport {
    /// One line for Events: the counts.
    pub fn summary(&self) -> String {
        format!(
            "shadow run of {} round trips through the other served versions: {} failed",
            self.tried, self.failed
        )
    }

    /// Why the new version may not serve, if it may not: more failures
    /// than `max_failures` with a version running, every round trip
    /// failed without one.
    pub fn refusal(&self, first_version: bool, max_failures: u64) -> Option<String> {
        let refused = if first_version {
            self.tried > 0 && self.failed == self.tried
        } else {
            self.failed > max_failures
        };
        refused.then(|| {
            let why = if first_version {
                "the new version fails on every stored object"
            } else {
                "the new version fails where the running one succeeds"
            };
            format!(
                "{}; {why}, e.g. {}",
                self.summary(),
                self.examples.join("; ")
            )
        })
    }
}

/// The first path at which `after` differs from `before`, for messages.
fn first_difference(before: &Value, after: &Value, path: &str) -> String {
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (a.get(key), b.get(key));
                if x != y {
                    let here = format!("{path}.{key}");
                    return match (x, y) {
                        (Some(x), Some(y)) => first_difference(x, y, &here),
                        (Some(_), None) => format!("{here} is lost"),
                        _ => format!("{here} is added"),
                    };
                }
            }
            format!("{path} differs")
        }
        _ => format!("{path} changes from {before} to {after}"),
    }
}

/// Convert `object` to `version` and back with `plugin`: `Err` says what
/// went wrong, or where the object came back different.
pub async fn round_trip(
    plugin: &Arc<ConverterPlugin>,
    limits: Limits,
    object: &Value,
    version: &str,
) -> Result<(), String> {
    let home = object["apiVersion"].as_str().unwrap_or_default();
    let there = convert_with(plugin, limits, std::slice::from_ref(object), version)
        .await
        .map_err(|e| format!("to {version}: {e}"))?;
    let back = convert_with(plugin, limits, &there, home)
        .await
        .map_err(|e| format!("from {version} back to {home}: {e}"))?;
    if back[0] == *object {
        Ok(())
    } else {
        Err(format!(
            "the round trip through {version} is not lossless: {}",
            first_difference(object, &back[0], "")
        ))
    }
}

/// Shadow-run `candidate` (with `spec`) on `stored` objects through each of
/// `versions` (`group/version`, the served ones other than each object's
/// own), judged against `running`, the version in service, if any.
pub async fn shadow_objects(
    candidate: Arc<ConverterPlugin>,
    spec: Arc<ConverterSpec>,
    running: Option<Arc<LoadedConverter>>,
    stored: Vec<Value>,
    versions: Vec<String>,
) -> ConversionReport {
    let trips: Vec<(Value, String)> = stored
        .into_iter()
        .flat_map(|object| {
            versions
                .iter()
                .filter(|v| object["apiVersion"] != v.as_str())
                .map(|v| (object.clone(), v.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let outcomes: Vec<(String, Result<(), String>, bool)> = futures::stream::iter(trips)
        .map(|(object, version)| {
            let (candidate, spec, running) = (candidate.clone(), spec.clone(), running.clone());
            async move {
                let new = round_trip(&candidate, spec.call_limits(), &object, &version).await;
                let old_ok = match (&new, running) {
                    (Err(_), Some(running)) => round_trip(
                        &running.plugin,
                        running.spec.call_limits(),
                        &object,
                        &version,
                    )
                    .await
                    .is_ok(),
                    _ => true,
                };
                (format!("{} via {version}", describe(&object)), new, old_ok)
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut report = ConversionReport::default();
    for (what, new, old_ok) in outcomes {
        report.tried += 1;
        if let Err(e) = new
            && old_ok
        {
            report.failed += 1;
            if report.examples.len() < EXAMPLES {
                report.examples.push(format!("{what}: {e}"));
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_named_by_path() {
        let a = json!({"spec": {"image": "a:1", "n": 2}});
        let b = json!({"spec": {"image": "a:1"}});
        assert_eq!(first_difference(&a, &b, ""), ".spec.n is lost");
        let c = json!({"spec": {"image": "a:2", "n": 2}});
        assert_eq!(
            first_difference(&a, &c, ""),
            ".spec.image changes from \"a:1\" to \"a:2\""
        );
    }

    #[test]
    fn refusals_follow_the_rollout() {
        let report = ConversionReport {
            tried: 4,
            failed: 1,
            examples: vec!["ns/a via x/v1: boom".into()],
        };
        assert!(report.refusal(false, 1).is_none());
        let why = report.refusal(false, 0).unwrap();
        assert!(
            why.contains("fails where the running one succeeds, e.g. ns/a via x/v1: boom"),
            "{why}"
        );
        assert!(
            report.refusal(true, 0).is_none(),
            "a first version may fail on some"
        );
        let all = ConversionReport {
            tried: 2,
            failed: 2,
            examples: vec![],
        };
        assert!(
            all.refusal(true, 5)
                .unwrap()
                .contains("fails on every stored object")
        );
        assert!(ConversionReport::default().refusal(true, 0).is_none());
    }
}
