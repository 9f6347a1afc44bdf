//! Server-side Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`).

use std::collections::HashMap;
use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

mod builtin;

/// One column: header, type, and how to compute the cell.
struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
    cell: Cell,
}

enum Cell {
    /// A CRD printer column (jsonPath, type).
    JsonPath(String, String),
    /// A column of kube's printer for the built-in group/plural.
    Builtin(String, String),
}

/// A column definition as kube's Table has it.
#[derive(serde::Deserialize)]
struct Definition {
    name: String,
    #[serde(rename = "type")]
    kind: String,
    format: String,
    description: String,
    priority: i64,
}

/// kube-apiserver 1.36.3's column definitions of each built-in kind's Table, by
/// `group/plural`: its printers' columns, descriptions from the API's docs
/// (`scripts/kube-table-columns` writes the file from a real control plane).
static KUBE_COLUMNS: LazyLock<HashMap<String, Vec<Definition>>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("columns.json")).expect("columns.json is valid")
});

/// kube's `duration.HumanDuration`.
// Seconds, minutes, hours, days, years: the units' letters, as in kube's `HumanDuration`.
#[allow(clippy::many_single_char_names)]
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        let y = d / 365;
        if d % 365 == 0 {
            format!("{y}y")
        } else {
            format!("{y}y{}d", d % 365)
        }
    } else {
        format!("{}y", d / 365)
    }
}

/// kube's `translateTimestampSince`: the age of an RFC 3339 time, `<unknown>`
/// without one.
fn age_of(ts: Option<&str>) -> Value {
    match ts.map(chrono::DateTime::parse_from_rfc3339) {
        Some(Ok(t)) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        _ => json!("<unknown>"),
    }
}

/// kube's Name column, and an Age column.
fn name_and_age(info: &ResourceInfo) -> Vec<Column> {
    KUBE_COLUMNS["/configmaps"]
        .iter()
        .filter(|d| d.name == "Name" || d.name == "Age")
        .map(|d| column(d, Cell::Builtin(info.group.clone(), info.plural.clone())))
        .collect()
}

fn column(d: &Definition, cell: Cell) -> Column {
    Column {
        name: d.name.clone(),
        kind: d.kind.clone(),
        format: d.format.clone(),
        description: d.description.clone(),
        priority: d.priority,
        cell,
    }
}

fn columns(info: &ResourceInfo) -> Vec<Column> {
    let Some(crd) = &info.crd else {
        let key = format!("{}/{}", info.group, info.plural);
        return match KUBE_COLUMNS.get(&key) {
            Some(defs) => defs
                .iter()
                .map(|d| column(d, Cell::Builtin(info.group.clone(), info.plural.clone())))
                .collect(),
            None => name_and_age(info),
        };
    };
    let mut cols = name_and_age(info);
    let age = cols.pop().expect("an Age column");
    if crd.printer_columns.is_empty() {
        cols.push(Column {
            kind: "date".into(),
            description: String::new(),
            ..age
        });
    }
    for c in &crd.printer_columns {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let description = match s("description") {
            d if d.is_empty() => format!(
                "Custom resource definition column (in JSONPath format): {}",
                s("jsonPath")
            ),
            d => d,
        };
        cols.push(Column {
            name: s("name"),
            kind: s("type"),
            format: s("format"),
            description,
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
            cell: Cell::JsonPath(s("jsonPath"), s("type")),
        });
    }
    cols
}

fn cell(c: &Column, obj: &Value) -> Value {
    match &c.cell {
        Cell::JsonPath(path, kind) => {
            gantry_schema::printer_column_value(obj, path, kind, &c.format)
        }
        Cell::Builtin(group, plural) => {
            builtin::cell(group, plural, &c.name, obj).unwrap_or_else(|| json!(""))
        }
    }
}

/// What each row's `object` holds (`?includeObject=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (default).
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the query value.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// The `meta.k8s.io/v1` `PartialObjectMetadata` view of an object (Table rows and
/// `Accept: ...;as=PartialObjectMetadata` requests).
pub fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

fn row(cols: &[Column], obj: &Value, include: IncludeObject) -> Value {
    let cells: Vec<Value> = cols.iter().map(|c| cell(c, obj)).collect();
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => obj.clone(),
        IncludeObject::Metadata => partial_object_metadata(obj),
    };
    let mut r = json!({ "cells": cells });
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

/// A Table of `objects`. Column definitions are left out when `with_columns` is false
/// (watch events after the first, as kube does).
pub fn table(
    info: &ResourceInfo,
    objects: &[Value],
    list_meta: &Value,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let cols = columns(info);
    let defs: Vec<Value> = if with_columns {
        cols.iter()
            .map(|c| {
                json!({ "name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority })
            })
            .collect()
    } else {
        vec![]
    };
    let rows: Vec<Value> = objects.iter().map(|o| row(&cols, o, include)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::human_duration;

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(900), "15m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
    }
}
