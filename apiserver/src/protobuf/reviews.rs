//! Protobuf bodies of the self-reviews (`kubectl auth can-i`, `auth
//! whoami`) and of `TokenRequest` (`kubectl create token`), which kubectl
//! sends as protobuf, and of the access and token reviews client-go's
//! protobuf clients send (`SubjectAccessReview`, `LocalSubjectAccessReview`,
//! `TokenReview`).

use k8s_pb::api::authentication::v1 as authn;
use k8s_pb::api::authorization::v1 as authz;
use prost::Message;
use serde_json::{Map, Value, json};

use super::{bad, meta, put_str};
use crate::error::ApiResult;

/// The JSON of a review or `TokenRequest` body, or None for other kinds.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<ApiResult<Value>> {
    let decoded = match (api_version, kind) {
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            authz::SelfSubjectAccessReview::decode(raw).map(|r| {
                let spec = r.spec.unwrap_or_default();
                let attributes = attributes(spec.resource_attributes, spec.non_resource_attributes);
                json!({ "metadata": meta(r.metadata), "spec": attributes })
            })
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview") => {
            authz::SubjectAccessReview::decode(raw)
                .map(|r| json!({ "metadata": meta(r.metadata), "spec": subject_spec(r.spec) }))
        }
        ("authorization.k8s.io/v1", "LocalSubjectAccessReview") => {
            authz::LocalSubjectAccessReview::decode(raw)
                .map(|r| json!({ "metadata": meta(r.metadata), "spec": subject_spec(r.spec) }))
        }
        ("authentication.k8s.io/v1", "TokenReview") => authn::TokenReview::decode(raw).map(|r| {
            let spec = r.spec.unwrap_or_default();
            let mut out = Map::new();
            put_str(&mut out, "token", spec.token.as_deref());
            if !spec.audiences.is_empty() {
                out.insert("audiences".into(), json!(spec.audiences));
            }
            json!({ "metadata": meta(r.metadata), "spec": out })
        }),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            authz::SelfSubjectRulesReview::decode(raw).map(|r| {
                let mut spec = Map::new();
                put_str(
                    &mut spec,
                    "namespace",
                    r.spec.and_then(|s| s.namespace).as_deref(),
                );
                json!({ "metadata": meta(r.metadata), "spec": spec })
            })
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            authn::SelfSubjectReview::decode(raw).map(|r| json!({ "metadata": meta(r.metadata) }))
        }
        ("authentication.k8s.io/v1", "TokenRequest") => {
            authn::TokenRequest::decode(raw).map(token_request)
        }
        _ => return None,
    };
    Some(decoded.map_err(bad))
}

/// A `SubjectAccessReviewSpec`: attributes and the user they are asked for.
fn subject_spec(spec: Option<authz::SubjectAccessReviewSpec>) -> Value {
    let spec = spec.unwrap_or_default();
    let mut out = attributes(spec.resource_attributes, spec.non_resource_attributes);
    let Value::Object(o) = &mut out else {
        unreachable!("attributes are an object")
    };
    put_str(o, "user", spec.user.as_deref());
    if !spec.groups.is_empty() {
        o.insert("groups".into(), json!(spec.groups));
    }
    put_str(o, "uid", spec.uid.as_deref());
    if !spec.extra.is_empty() {
        let extra: Map<String, Value> = spec
            .extra
            .into_iter()
            .map(|(k, v)| (k, json!(v.items)))
            .collect();
        o.insert("extra".into(), Value::Object(extra));
    }
    out
}

/// Resource or nonresource attributes, as a spec holds them.
fn attributes(
    resource: Option<authz::ResourceAttributes>,
    non_resource: Option<authz::NonResourceAttributes>,
) -> Value {
    let mut out = Map::new();
    if let Some(a) = resource {
        let mut attributes = Map::new();
        for (key, value) in [
            ("namespace", &a.namespace),
            ("verb", &a.verb),
            ("group", &a.group),
            ("version", &a.version),
            ("resource", &a.resource),
            ("subresource", &a.subresource),
            ("name", &a.name),
        ] {
            put_str(&mut attributes, key, value.as_deref());
        }
        out.insert("resourceAttributes".into(), Value::Object(attributes));
    }
    if let Some(a) = non_resource {
        let mut attributes = Map::new();
        put_str(&mut attributes, "path", a.path.as_deref());
        put_str(&mut attributes, "verb", a.verb.as_deref());
        out.insert("nonResourceAttributes".into(), Value::Object(attributes));
    }
    Value::Object(out)
}

fn token_request(r: authn::TokenRequest) -> Value {
    let spec = r.spec.unwrap_or_default();
    let mut out = Map::new();
    if !spec.audiences.is_empty() {
        out.insert("audiences".into(), json!(spec.audiences));
    }
    if let Some(seconds) = spec.expiration_seconds {
        out.insert("expirationSeconds".into(), json!(seconds));
    }
    if let Some(bound) = spec.bound_object_ref {
        let mut reference = Map::new();
        put_str(&mut reference, "kind", bound.kind.as_deref());
        put_str(&mut reference, "apiVersion", bound.api_version.as_deref());
        put_str(&mut reference, "name", bound.name.as_deref());
        put_str(&mut reference, "uid", bound.u_id.as_deref());
        out.insert("boundObjectRef".into(), Value::Object(reference));
    }
    json!({ "metadata": meta(r.metadata), "spec": out })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protobuf_access_review_reads_as_its_json() {
        let review = authz::SelfSubjectAccessReview {
            spec: Some(authz::SelfSubjectAccessReviewSpec {
                resource_attributes: Some(authz::ResourceAttributes {
                    namespace: Some("default".into()),
                    verb: Some("list".into()),
                    resource: Some("pods".into()),
                    ..Default::default()
                }),
                non_resource_attributes: None,
            }),
            ..Default::default()
        };
        let json = decode(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &review.encode_to_vec(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            json["spec"],
            json!({"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}})
        );
    }

    #[test]
    fn a_protobuf_token_request_keeps_audiences_and_lifetime() {
        let request = authn::TokenRequest {
            spec: Some(authn::TokenRequestSpec {
                audiences: vec!["vault".into()],
                expiration_seconds: Some(900),
                bound_object_ref: None,
            }),
            ..Default::default()
        };
        let json = decode(
            "authentication.k8s.io/v1",
            "TokenRequest",
            &request.encode_to_vec(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            json["spec"],
            json!({"audiences": ["vault"], "expirationSeconds": 900})
        );
        assert!(decode("v1", "Pod", &[]).is_none());
    }

    #[test]
    fn a_protobuf_subject_access_review_keeps_its_user() {
        let review = authz::SubjectAccessReview {
            spec: Some(authz::SubjectAccessReviewSpec {
                non_resource_attributes: Some(authz::NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
                user: Some("alice".into()),
                groups: vec!["devs".into()],
                extra: [(
                    "scopes".to_string(),
                    authz::ExtraValue {
                        items: vec!["a".into()],
                    },
                )]
                .into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let json = decode(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            &review.encode_to_vec(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            json["spec"],
            json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                "user": "alice", "groups": ["devs"], "extra": {"scopes": ["a"]}})
        );
    }
}
