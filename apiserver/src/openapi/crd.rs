//! The OpenAPI v3 document of a custom resource group-version, built from each
//! served version's `openAPIV3Schema` as kube's CRD OpenAPI builder does: the
//! kind's schema with `apiVersion`, `kind` and `metadata` (a reference to
//! `ObjectMeta`) and `x-kubernetes-group-version-kind`, its List, and the
//! operations kubectl reads (`fieldValidation` on writes).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::registry::ResourceInfo;

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// kube's schema name of a kind: the group reversed, version, kind
/// (`com.example.v1.Widget`).
pub fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// The kind's schema as kube publishes it (`ref_prefix`: `#/components/schemas/`
/// for v3, `#/definitions/` for v2).
pub fn kind_schema(r: &ResourceInfo, ref_prefix: &str) -> Value {
    let mut schema = r
        .crd
        .as_ref()
        .and_then(|c| c.raw_schema.clone())
        .unwrap_or_else(|| json!({ "type": "object" }));
    let obj = schema.as_object_mut().expect("a CRD schema is an object");
    let props = obj
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("properties is an object");
    props.insert(
        "apiVersion".into(),
        json!({ "description": API_VERSION_DOC, "type": "string" }),
    );
    props.insert(
        "kind".into(),
        json!({ "description": KIND_DOC, "type": "string" }),
    );
    props.insert(
        "metadata".into(),
        metadata_ref(
            METADATA_DOC,
            &format!("{ref_prefix}{META}.ObjectMeta"),
            ref_prefix,
        ),
    );
    obj.insert("x-kubernetes-group-version-kind".into(), gvk(r, &r.kind));
    schema
}

/// `metadata`: v3 wraps the reference in `allOf` (a sibling `description`
/// beside `$ref` is ignored in OpenAPI 3), v2 puts it beside.
fn metadata_ref(description: &str, target: &str, ref_prefix: &str) -> Value {
    if ref_prefix.starts_with("#/components/") {
        json!({ "description": description, "allOf": [{ "$ref": target }] })
    } else {
        json!({ "description": description, "$ref": target })
    }
}

fn gvk(r: &ResourceInfo, kind: &str) -> Value {
    json!([{ "group": r.group, "kind": kind, "version": r.version }])
}

/// The kind's List schema.
pub fn list_schema(r: &ResourceInfo, ref_prefix: &str) -> Value {
    let list_kind = format!("{}List", r.kind);
    json!({
        "description": format!("{list_kind} is a list of {}", r.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": { "description": API_VERSION_DOC, "type": "string" },
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", r.plural),
                "type": "array",
                "items": { "$ref": format!("{ref_prefix}{}", schema_name(&r.group, &r.version, &r.kind)) }
            },
            "kind": { "description": KIND_DOC, "type": "string" },
            "metadata": metadata_ref(LIST_METADATA_DOC, &format!("{ref_prefix}{META}.ListMeta"), ref_prefix)
        },
        "x-kubernetes-group-version-kind": gvk(r, &list_kind)
    })
}

/// v3 adds `anyOf: [integer, string]` beside `x-kubernetes-int-or-string`, as kube.
fn with_int_or_string(schema: &mut Value) {
    match schema {
        Value::Object(m) => {
            if m.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                && !m.contains_key("anyOf")
            {
                m.insert(
                    "anyOf".into(),
                    json!([{ "type": "integer" }, { "type": "string" }]),
                );
            }
            for v in m.values_mut() {
                with_int_or_string(v);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(with_int_or_string),
        _ => {}
    }
}

fn param(name: &str) -> Value {
    json!({ "name": name, "in": "query", "schema": { "type": "string", "uniqueItems": true } })
}

/// The operations kubectl looks at: writes with their query parameters and the
/// kind they act on.
fn paths(r: &ResourceInfo, gv_path: &str, out: &mut Map<String, Value>) {
    let base = if r.namespaced {
        format!("/{gv_path}/namespaces/{{namespace}}/{}", r.plural)
    } else {
        format!("/{gv_path}/{}", r.plural)
    };
    let write_params = json!([
        param("dryRun"),
        param("fieldManager"),
        param("fieldValidation"),
        param("force")
    ]);
    let op = |action: &str, kind: &str| {
        let mut o = json!({
            "operationId": format!("{action}{kind}"),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": { "group": r.group, "version": r.version, "kind": kind },
            "responses": { "200": { "description": "OK" } }
        });
        if matches!(action, "post" | "put" | "patch") {
            o["parameters"] = write_params.clone();
        }
        o
    };
    let list_kind = format!("{}List", r.kind);
    out.insert(
        base.clone(),
        json!({ "get": op("list", &list_kind), "post": op("post", &r.kind) }),
    );
    let item = json!({ "get": op("get", &r.kind), "put": op("put", &r.kind), "patch": op("patch", &r.kind), "delete": op("delete", &r.kind) });
    out.insert(format!("{base}/{{name}}"), item.clone());
    if r.has_status {
        out.insert(format!("{base}/{{name}}/status"), item);
    }
    if r.scale.is_some() {
        let scale = |action: &str| {
            let mut o = op(action, "Scale");
            o["x-kubernetes-group-version-kind"] =
                json!({ "group": "autoscaling", "version": "v1", "kind": "Scale" });
            o
        };
        out.insert(
            format!("{base}/{{name}}/scale"),
            json!({ "get": scale("get"), "put": scale("put"), "patch": scale("patch") }),
        );
    }
}

/// The v3 document of the custom resources `rs` (one group-version).
pub fn v3_document(rs: &[Arc<ResourceInfo>], gv_path: &str, shared: &Map<String, Value>) -> Value {
    let prefix = "#/components/schemas/";
    let mut schemas = Map::new();
    let mut all_paths = Map::new();
    let mut scale = false;
    for r in rs {
        let mut kind = kind_schema(r, prefix);
        with_int_or_string(&mut kind);
        schemas.insert(schema_name(&r.group, &r.version, &r.kind), kind);
        schemas.insert(
            schema_name(&r.group, &r.version, &format!("{}List", r.kind)),
            list_schema(r, prefix),
        );
        paths(r, gv_path, &mut all_paths);
        scale |= r.scale.is_some();
    }
    for (name, schema) in shared {
        if scale || !name.starts_with("io.k8s.api.autoscaling.") {
            schemas.insert(name.clone(), schema.clone());
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes CRD Swagger", "version": "v0.1.0" },
        "paths": all_paths,
        "components": { "schemas": schemas }
    })
}
