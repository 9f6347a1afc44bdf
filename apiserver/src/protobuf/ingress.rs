//! Protobuf bodies of `kubectl create ingress`.

use k8s_pb::api::networking::v1 as net;
use prost::Message;
use serde_json::{Map, Value, json};

use super::{bad, meta, opt, put_str, vec_str};
use crate::error::ApiResult;

/// The JSON of an Ingress, or None for other kinds.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<ApiResult<Value>> {
    if (api_version, kind) != ("networking.k8s.io/v1", "Ingress") {
        return None;
    }
    Some(net::Ingress::decode(raw).map(ingress).map_err(bad))
}

fn ingress(i: net::Ingress) -> Value {
    let spec = i.spec.unwrap_or_default();
    let mut sp = Map::new();
    put_str(
        &mut sp,
        "ingressClassName",
        spec.ingress_class_name.as_deref(),
    );
    if let Some(b) = spec.default_backend {
        sp.insert("defaultBackend".into(), backend(b));
    }
    if !spec.tls.is_empty() {
        let tls: Vec<Value> = spec
            .tls
            .iter()
            .map(|t| {
                let mut o = Map::new();
                vec_str(&mut o, "hosts", &t.hosts);
                put_str(&mut o, "secretName", t.secret_name.as_deref());
                Value::Object(o)
            })
            .collect();
        sp.insert("tls".into(), Value::Array(tls));
    }
    if !spec.rules.is_empty() {
        let rules: Vec<Value> = spec.rules.into_iter().map(rule).collect();
        sp.insert("rules".into(), Value::Array(rules));
    }
    json!({ "metadata": meta(i.metadata), "spec": sp })
}

fn rule(r: net::IngressRule) -> Value {
    let mut o = Map::new();
    put_str(&mut o, "host", r.host.as_deref());
    if let Some(http) = r.ingress_rule_value.and_then(|v| v.http) {
        let paths: Vec<Value> = http
            .paths
            .into_iter()
            .map(|p| {
                let mut x = Map::new();
                put_str(&mut x, "path", p.path.as_deref());
                put_str(&mut x, "pathType", p.path_type.as_deref());
                x.insert("backend".into(), backend(p.backend.unwrap_or_default()));
                Value::Object(x)
            })
            .collect();
        o.insert("http".into(), json!({ "paths": paths }));
    }
    Value::Object(o)
}

fn backend(b: net::IngressBackend) -> Value {
    let mut o = Map::new();
    if let Some(s) = b.service {
        let mut svc = Map::new();
        put_str(&mut svc, "name", s.name.as_deref());
        let mut port = Map::new();
        if let Some(p) = s.port {
            put_str(&mut port, "name", p.name.as_deref());
            opt(&mut port, "number", p.number.filter(|n| *n != 0));
        }
        svc.insert("port".into(), Value::Object(port));
        o.insert("service".into(), Value::Object(svc));
    }
    if let Some(r) = b.resource {
        let mut x = Map::new();
        put_str(&mut x, "apiGroup", r.api_group.as_deref());
        put_str(&mut x, "kind", r.kind.as_deref());
        put_str(&mut x, "name", r.name.as_deref());
        o.insert("resource".into(), Value::Object(x));
    }
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ingress_keeps_rules_and_backends() {
        let i = net::Ingress {
            spec: Some(net::IngressSpec {
                rules: vec![net::IngressRule {
                    host: Some("foo.com".into()),
                    ingress_rule_value: Some(net::IngressRuleValue {
                        http: Some(net::HttpIngressRuleValue {
                            paths: vec![net::HttpIngressPath {
                                path: Some("/bar".into()),
                                path_type: Some("Exact".into()),
                                backend: Some(net::IngressBackend {
                                    service: Some(net::IngressServiceBackend {
                                        name: Some("svc".into()),
                                        port: Some(net::ServiceBackendPort {
                                            name: None,
                                            number: Some(8080),
                                        }),
                                    }),
                                    resource: None,
                                }),
                            }],
                        }),
                    }),
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = decode("networking.k8s.io/v1", "Ingress", &i.encode_to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(
            v["spec"]["rules"][0],
            json!({"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Exact",
                "backend": {"service": {"name": "svc", "port": {"number": 8080}}}}]}})
        );
    }
}
