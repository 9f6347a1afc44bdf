//! The cells of kube's `HorizontalPodAutoscaler` printer (`printHorizontalPodAutoscaler`):
//! REFERENCE, TARGETS, MINPODS, MAXPODS, REPLICAS.

use serde_json::{Value, json};

/// kube prints at most this many metrics, then `+ N more...`.
const SHOWN_METRICS: usize = 3;

fn text(v: &Value, pointer: &str) -> String {
    match v.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn present(v: &Value, pointer: &str) -> Option<String> {
    Some(text(v, pointer)).filter(|s| !s.is_empty())
}

/// The current status of the `index`th metric, if its type matches.
fn current<'a>(obj: &'a Value, index: usize, kind: &str) -> Option<&'a Value> {
    obj.pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .and_then(|c| c.get(index))
        .filter(|c| c["type"] == kind)
}

/// One metric as `current/target` (kube's `formatHPAMetrics`).
fn metric(obj: &Value, index: usize, m: &Value) -> String {
    let unknown = || "<unknown>".to_string();
    let kind = m["type"].as_str().unwrap_or("");
    match kind {
        "Resource" | "ContainerResource" => {
            let key = if kind == "Resource" {
                "resource"
            } else {
                "containerResource"
            };
            let source = &m[key];
            let status = current(obj, index, kind).map(|c| &c[key]);
            let name = text(source, "/name");
            if let Some(target) = present(source, "/target/averageValue") {
                let cur = status
                    .and_then(|s| present(s, "/current/averageValue"))
                    .unwrap_or_else(unknown);
                format!("{name}: {cur}/{target}")
            } else {
                let cur = status
                    .and_then(|s| present(s, "/current/averageUtilization"))
                    .map_or_else(unknown, |u| format!("{u}%"));
                format!(
                    "{name}: {cur}/{}%",
                    text(source, "/target/averageUtilization")
                )
            }
        }
        "Pods" => {
            let cur = current(obj, index, kind)
                .and_then(|s| present(s, "/pods/current/averageValue"))
                .unwrap_or_else(unknown);
            format!("{cur}/{}", text(m, "/pods/target/averageValue"))
        }
        "Object" | "External" => {
            let key = if kind == "Object" {
                "object"
            } else {
                "external"
            };
            let status = current(obj, index, kind).map(|c| &c[key]);
            if let Some(target) = present(&m[key], "/target/averageValue") {
                let cur = status
                    .and_then(|s| present(s, "/current/averageValue"))
                    .unwrap_or_else(unknown);
                format!("{cur}/{target} (avg)")
            } else {
                let cur = status
                    .and_then(|s| present(s, "/current/value"))
                    .unwrap_or_else(unknown);
                format!("{cur}/{}", text(&m[key], "/target/value"))
            }
        }
        _ => "<unknown type>".into(),
    }
}

/// The cell of `column` for an HPA in its v2 form; None for other columns.
pub fn cell(column: &str, v2: &Value) -> Option<Value> {
    Some(match column {
        "Reference" => json!(format!(
            "{}/{}",
            text(v2, "/spec/scaleTargetRef/kind"),
            text(v2, "/spec/scaleTargetRef/name")
        )),
        "Targets" => {
            let metrics: Vec<&Value> = v2
                .pointer("/spec/metrics")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .collect();
            if metrics.is_empty() {
                return Some(json!("<none>"));
            }
            let shown: Vec<String> = metrics
                .iter()
                .take(SHOWN_METRICS)
                .enumerate()
                .map(|(i, m)| metric(v2, i, m))
                .collect();
            let mut cell = shown.join(", ");
            if metrics.len() > SHOWN_METRICS {
                let more = metrics.len() - SHOWN_METRICS;
                cell = format!("{cell} + {more} more...");
            }
            json!(cell)
        }
        "MinPods" => match v2.pointer("/spec/minReplicas") {
            Some(Value::Number(n)) => json!(n.to_string()),
            _ => json!("<unset>"),
        },
        "MaxPods" => json!(
            v2.pointer("/spec/maxReplicas")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        ),
        "Replicas" => {
            json!(
                v2.pointer("/status/currentReplicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            )
        }
        _ => return None,
    })
}
