//! Decoding of `application/vnd.kubernetes.protobuf` request bodies for the kinds
//! kubectl's generator commands create with protobuf (`kubectl create namespace`,
//! `configmap`, `secret`, `serviceaccount`, `service`, `deployment`, `job`, `cronjob`; for pod
//! templates only the fields those generators set; `role`, `clusterrole`, `rolebinding`,
//! `clusterrolebinding` ([`rbac`]), `quota`, `pdb`, `priorityclass` ([`policy`]),
//! `ingress` ([`ingress`]), `autoscale` ([`autoscaling`])), `DeleteOptions` and `Eviction` ([`options`]), and the reviews
//! and token requests of `kubectl auth` and `kubectl create token` ([`reviews`]). Other
//! kinds get 415, and responses are always JSON (clients accept it).
//!
//! Hand-written mapping from the k8s-pb (prost) types to kube's JSON: no crate converts
//! Kubernetes protobuf messages to their JSON form.

mod autoscaling;
mod ingress;
mod options;
mod policy;
mod rbac;
mod reviews;

use base64::Engine;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ApiResult};

/// The 4-byte prefix of Kubernetes protobuf bodies.
const MAGIC: &[u8] = b"k8s\0";

fn unsupported(what: &str) -> ApiError {
    ApiError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml ({what} is not supported as protobuf)"
    ))
}

pub(crate) fn bad(e: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("error decoding protobuf body: {e}"))
}

pub(crate) fn put_str(m: &mut Map<String, Value>, k: &str, v: Option<&str>) {
    if let Some(v) = v.filter(|v| !v.is_empty()) {
        m.insert(k.into(), json!(v));
    }
}

pub(crate) fn meta(m: Option<ObjectMeta>) -> Value {
    let Some(m) = m else { return json!({}) };
    let mut o = Map::new();
    put_str(&mut o, "name", m.name.as_deref());
    put_str(&mut o, "generateName", m.generate_name.as_deref());
    put_str(&mut o, "namespace", m.namespace.as_deref());
    put_str(&mut o, "resourceVersion", m.resource_version.as_deref());
    if !m.labels.is_empty() {
        o.insert("labels".into(), json!(m.labels));
    }
    if !m.annotations.is_empty() {
        o.insert("annotations".into(), json!(m.annotations));
    }
    if !m.finalizers.is_empty() {
        o.insert("finalizers".into(), json!(m.finalizers));
    }
    if !m.owner_references.is_empty() {
        let refs: Vec<Value> = m
            .owner_references
            .iter()
            .map(|r| {
                let mut x = Map::new();
                put_str(&mut x, "apiVersion", r.api_version.as_deref());
                put_str(&mut x, "kind", r.kind.as_deref());
                put_str(&mut x, "name", r.name.as_deref());
                put_str(&mut x, "uid", r.uid.as_deref());
                if let Some(c) = r.controller {
                    x.insert("controller".into(), json!(c));
                }
                if let Some(b) = r.block_owner_deletion {
                    x.insert("blockOwnerDeletion".into(), json!(b));
                }
                Value::Object(x)
            })
            .collect();
        o.insert("ownerReferences".into(), Value::Array(refs));
    }
    Value::Object(o)
}

fn b64(bytes: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
}

pub(crate) fn opt<T: serde::Serialize>(o: &mut Map<String, Value>, k: &str, v: Option<T>) {
    if let Some(v) = v {
        o.insert(k.into(), json!(v));
    }
}

fn vec_str(o: &mut Map<String, Value>, k: &str, v: &[String]) {
    if !v.is_empty() {
        o.insert(k.into(), json!(v));
    }
}

fn container(c: &pb::Container) -> Value {
    let mut o = Map::new();
    put_str(&mut o, "name", c.name.as_deref());
    put_str(&mut o, "image", c.image.as_deref());
    vec_str(&mut o, "command", &c.command);
    vec_str(&mut o, "args", &c.args);
    put_str(&mut o, "workingDir", c.working_dir.as_deref());
    put_str(&mut o, "imagePullPolicy", c.image_pull_policy.as_deref());
    if !c.ports.is_empty() {
        let ports: Vec<Value> = c
            .ports
            .iter()
            .map(|p| {
                let mut x = Map::new();
                put_str(&mut x, "name", p.name.as_deref());
                opt(&mut x, "containerPort", p.container_port);
                put_str(&mut x, "protocol", p.protocol.as_deref());
                Value::Object(x)
            })
            .collect();
        o.insert("ports".into(), Value::Array(ports));
    }
    if !c.env.is_empty() {
        let env: Vec<Value> = c
            .env
            .iter()
            .map(|e| {
                let mut x = Map::new();
                put_str(&mut x, "name", e.name.as_deref());
                put_str(&mut x, "value", e.value.as_deref());
                Value::Object(x)
            })
            .collect();
        o.insert("env".into(), Value::Array(env));
    }
    o.insert("resources".into(), json!({}));
    Value::Object(o)
}

/// A pod template: metadata and the common `PodSpec` fields kubectl's generators set.
fn pod_template(t: Option<pb::PodTemplateSpec>) -> Value {
    let Some(t) = t else { return json!({}) };
    let mut spec = Map::new();
    if let Some(ps) = t.spec {
        spec.insert(
            "containers".into(),
            Value::Array(ps.containers.iter().map(container).collect()),
        );
        if !ps.init_containers.is_empty() {
            spec.insert(
                "initContainers".into(),
                Value::Array(ps.init_containers.iter().map(container).collect()),
            );
        }
        put_str(&mut spec, "restartPolicy", ps.restart_policy.as_deref());
        put_str(
            &mut spec,
            "serviceAccountName",
            ps.service_account_name.as_deref(),
        );
    }
    json!({ "metadata": meta(t.metadata), "spec": spec })
}

fn selector(s: Option<k8s_pb::apimachinery::pkg::apis::meta::v1::LabelSelector>) -> Value {
    let Some(s) = s else { return json!({}) };
    let mut o = Map::new();
    if !s.match_labels.is_empty() {
        o.insert("matchLabels".into(), json!(s.match_labels));
    }
    if !s.match_expressions.is_empty() {
        let expressions: Vec<Value> = s
            .match_expressions
            .iter()
            .map(|e| {
                let mut x = Map::new();
                put_str(&mut x, "key", e.key.as_deref());
                put_str(&mut x, "operator", e.operator.as_deref());
                vec_str(&mut x, "values", &e.values);
                Value::Object(x)
            })
            .collect();
        o.insert("matchExpressions".into(), Value::Array(expressions));
    }
    Value::Object(o)
}

/// An `IntOrString` (type 0 = int, 1 = string) as its JSON number or string.
fn int_or_string(v: &k8s_pb::apimachinery::pkg::util::intstr::IntOrString) -> Option<Value> {
    match (v.r#type, v.int_val, &v.str_val) {
        (Some(1), _, Some(s)) => Some(json!(s)),
        (_, Some(i), _) => Some(json!(i)),
        _ => None,
    }
}

fn job_spec(s: Option<k8s_pb::api::batch::v1::JobSpec>) -> Value {
    let Some(s) = s else { return json!({}) };
    let mut o = Map::new();
    o.insert("template".into(), pod_template(s.template));
    opt(&mut o, "backoffLimit", s.backoff_limit);
    opt(&mut o, "completions", s.completions);
    opt(&mut o, "parallelism", s.parallelism);
    Value::Object(o)
}

/// Decodes a protobuf body into the JSON object kube would have decoded.
pub fn decode(body: &[u8]) -> ApiResult<Value> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s protobuf prefix"))?;
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest).map_err(bad)?;
    let tm = unknown.type_meta.unwrap_or_default();
    let (api_version, kind) = (
        tm.api_version.unwrap_or_default(),
        tm.kind.unwrap_or_default(),
    );
    let raw = unknown.raw.unwrap_or_default();
    let mut obj = match (api_version.as_str(), kind.as_str()) {
        ("v1", "ConfigMap") => {
            let c = pb::ConfigMap::decode(raw.as_slice()).map_err(bad)?;
            let mut o = json!({ "metadata": meta(c.metadata) });
            if !c.data.is_empty() {
                o["data"] = json!(c.data);
            }
            if !c.binary_data.is_empty() {
                o["binaryData"] = Value::Object(
                    c.binary_data
                        .iter()
                        .map(|(k, v)| (k.clone(), b64(v)))
                        .collect(),
                );
            }
            if let Some(i) = c.immutable {
                o["immutable"] = json!(i);
            }
            o
        }
        ("v1", "Secret") => {
            let s = pb::Secret::decode(raw.as_slice()).map_err(bad)?;
            let mut o = json!({ "metadata": meta(s.metadata) });
            if !s.data.is_empty() {
                o["data"] =
                    Value::Object(s.data.iter().map(|(k, v)| (k.clone(), b64(v))).collect());
            }
            if !s.string_data.is_empty() {
                o["stringData"] = json!(s.string_data);
            }
            if let Some(t) = s.r#type.filter(|t| !t.is_empty()) {
                o["type"] = json!(t);
            }
            if let Some(i) = s.immutable {
                o["immutable"] = json!(i);
            }
            o
        }
        ("v1", "Namespace") => {
            let n = pb::Namespace::decode(raw.as_slice()).map_err(bad)?;
            let mut o = json!({ "metadata": meta(n.metadata) });
            if let Some(spec) = n.spec.filter(|s| !s.finalizers.is_empty()) {
                o["spec"] = json!({ "finalizers": spec.finalizers });
            }
            o
        }
        ("v1", "ServiceAccount") => {
            let s = pb::ServiceAccount::decode(raw.as_slice()).map_err(bad)?;
            let mut o = json!({ "metadata": meta(s.metadata) });
            if let Some(a) = s.automount_service_account_token {
                o["automountServiceAccountToken"] = json!(a);
            }
            o
        }
        ("v1", "Service") => {
            let svc = pb::Service::decode(raw.as_slice()).map_err(bad)?;
            let spec = svc.spec.unwrap_or_default();
            let mut sp = Map::new();
            put_str(&mut sp, "type", spec.r#type.as_deref());
            put_str(&mut sp, "clusterIP", spec.cluster_ip.as_deref());
            if !spec.selector.is_empty() {
                sp.insert("selector".into(), json!(spec.selector));
            }
            let ports: Vec<Value> = spec
                .ports
                .iter()
                .map(|p| {
                    let mut x = Map::new();
                    put_str(&mut x, "name", p.name.as_deref());
                    put_str(&mut x, "protocol", p.protocol.as_deref());
                    opt(&mut x, "port", p.port);
                    opt(&mut x, "nodePort", p.node_port.filter(|n| *n != 0));
                    if let Some(t) = p.target_port.as_ref().and_then(int_or_string) {
                        x.insert("targetPort".into(), t);
                    }
                    Value::Object(x)
                })
                .collect();
            if !ports.is_empty() {
                sp.insert("ports".into(), Value::Array(ports));
            }
            json!({ "metadata": meta(svc.metadata), "spec": sp })
        }
        ("apps/v1", "Deployment") => {
            let d = k8s_pb::api::apps::v1::Deployment::decode(raw.as_slice()).map_err(bad)?;
            let spec = d.spec.unwrap_or_default();
            let mut sp = Map::new();
            opt(&mut sp, "replicas", spec.replicas);
            sp.insert("selector".into(), selector(spec.selector));
            sp.insert("template".into(), pod_template(spec.template));
            sp.insert("strategy".into(), json!({}));
            json!({ "metadata": meta(d.metadata), "spec": sp })
        }
        ("batch/v1", "Job") => {
            let j = k8s_pb::api::batch::v1::Job::decode(raw.as_slice()).map_err(bad)?;
            json!({ "metadata": meta(j.metadata), "spec": job_spec(j.spec) })
        }
        ("batch/v1", "CronJob") => {
            let c = k8s_pb::api::batch::v1::CronJob::decode(raw.as_slice()).map_err(bad)?;
            let spec = c.spec.unwrap_or_default();
            let jt = spec.job_template.unwrap_or_default();
            let mut sp = Map::new();
            put_str(&mut sp, "schedule", spec.schedule.as_deref());
            sp.insert(
                "jobTemplate".into(),
                json!({ "metadata": meta(jt.metadata), "spec": job_spec(jt.spec) }),
            );
            json!({ "metadata": meta(c.metadata), "spec": sp })
        }
        _ => {
            let (v, k, r) = (api_version.as_str(), kind.as_str(), raw.as_slice());
            let decoded = reviews::decode(v, k, r)
                .or_else(|| rbac::decode(v, k, r))
                .or_else(|| policy::decode(v, k, r))
                .or_else(|| ingress::decode(v, k, r))
                .or_else(|| autoscaling::decode(v, k, r))
                .or_else(|| options::decode(v, k, r));
            match decoded {
                Some(decoded) => decoded?,
                None => return Err(unsupported(&format!("{api_version}/{kind}"))),
            }
        }
    };
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let u = k8s_pb::apimachinery::pkg::runtime::Unknown {
            type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: None,
            content_type: None,
        };
        [MAGIC.to_vec(), u.encode_to_vec()].concat()
    }

    #[test]
    fn configmap_round_trip() {
        let cm = pb::ConfigMap {
            metadata: Some(ObjectMeta {
                name: Some("x".into()),
                ..Default::default()
            }),
            data: [("a".to_string(), "b".to_string())].into(),
            ..Default::default()
        };
        let v = decode(&envelope("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}})
        );
    }

    #[test]
    fn secret_data_is_base64() {
        let s = pb::Secret {
            metadata: Some(ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            data: [("k".to_string(), b"hi".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let v = decode(&envelope("v1", "Secret", s.encode_to_vec())).unwrap();
        assert_eq!(v["data"]["k"], "aGk=");
        assert_eq!(v["type"], "Opaque");
    }

    #[test]
    fn deployment_pod_template() {
        let d = k8s_pb::api::apps::v1::Deployment {
            metadata: Some(ObjectMeta {
                name: Some("d".into()),
                ..Default::default()
            }),
            spec: Some(k8s_pb::api::apps::v1::DeploymentSpec {
                replicas: Some(2),
                template: Some(pb::PodTemplateSpec {
                    metadata: None,
                    spec: Some(pb::PodSpec {
                        containers: vec![pb::Container {
                            name: Some("c".into()),
                            image: Some("img".into()),
                            ports: vec![pb::ContainerPort {
                                container_port: Some(80),
                                ..Default::default()
                            }],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        };
        let v = decode(&envelope("apps/v1", "Deployment", d.encode_to_vec())).unwrap();
        assert_eq!(v["spec"]["replicas"], 2);
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["image"],
            "img"
        );
        assert_eq!(
            v["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            80
        );
    }

    #[test]
    fn garbage_and_unsupported_kinds() {
        assert_eq!(decode(b"nope").unwrap_err().code(), 400);
        assert_eq!(decode(b"k8s\0\xff\xff\xff").unwrap_err().code(), 400);
        assert_eq!(
            decode(&envelope("apps/v1", "StatefulSet", vec![]))
                .unwrap_err()
                .code(),
            415
        );
    }
}
