//! The reviews a client asks about itself: `SelfSubjectAccessReview` ("may I
//! do this?", `kubectl auth can-i`), `SelfSubjectRulesReview` ("what may I
//! do here?", `kubectl auth can-i --list`) and `SelfSubjectReview` ("who am
//! I?", `kubectl auth whoami`). None is stored: each is answered and gone.

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    NonResourceRule, ResourceRule, SelfSubjectAccessReview, SelfSubjectRulesReview,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::rbac::{self, Attributes};
use crate::admission::UserInfo;
use crate::error::{ApiError, Cause};
use crate::http::request::ResourcePath;
use crate::storage::Store;

/// The review resources: (group, version, plural, kind).
pub const RESOURCES: &[(&str, &str, &str, &str)] = &[
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    ),
    (
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    ),
    (
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
    ),
];

/// The review resource a request path names (`group/version/plural`, no
/// namespace, name or subresource), if any.
pub fn plural(group: &str, version: &str, path: &ResourcePath) -> Option<&'static str> {
    if path.namespace.is_some() || path.name.is_some() || path.subresource.is_some() {
        return None;
    }
    RESOURCES
        .iter()
        .find(|(g, v, p, _)| *g == group && *v == version && *p == path.resource)
        .map(|(_, _, p, _)| *p)
}

/// Answers a review `POSTed` to `plural` by `user`: the review with its
/// `status` filled in.
pub fn answer(
    store: &Store,
    user: &UserInfo,
    plural: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    match plural {
        "selfsubjectaccessreviews" => access_review(store, user, body),
        "selfsubjectrulesreviews" => rules_review(store, user, body),
        _ => Ok(who_am_i(user)),
    }
}

/// Decodes `body` as kube's typed `T` (unknown fields dropped, types checked).
fn decode<T: DeserializeOwned>(body: &Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(body.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding {kind}: {e}")))
}

/// The review as kube answers it: access and rules reviews with the
/// request's metadata (no creation time), a `SelfSubjectReview` created now.
fn encode<T: Serialize>(review: &T, kind: &str, api_version: &str) -> Value {
    let mut out = serde_json::to_value(review).expect("a typed review encodes");
    out["kind"] = json!(kind);
    out["apiVersion"] = json!(api_version);
    if kind == "SelfSubjectReview" {
        out["metadata"]["creationTimestamp"] = json!(crate::objects::meta::now_rfc3339());
    }
    out
}

fn access_review(store: &Store, user: &UserInfo, body: &Value) -> Result<Value, ApiError> {
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
    let mut review: SelfSubjectAccessReview = decode(body, "SelfSubjectAccessReview")?;
    let spec = &review.spec;
    let attributes = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(r), None) => Attributes::Resource {
            verb: r.verb.clone().unwrap_or_default(),
            namespace: r.namespace.clone().unwrap_or_default(),
            group: r.group.clone().unwrap_or_default(),
            resource: r.resource.clone().unwrap_or_default(),
            subresource: r.subresource.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
        },
        (None, Some(n)) => Attributes::NonResource {
            verb: n.verb.clone().unwrap_or_default(),
            path: n.path.clone().unwrap_or_default(),
        },
        (Some(_), Some(_)) => {
            return Err(invalid_spec(
                "spec.nonResourceAttributes",
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid_spec(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    let decision = super::decide(store, user, &attributes);
    review.status = Some(SubjectAccessReviewStatus {
        allowed: decision.allowed,
        reason: Some(decision.reason).filter(|r| !r.is_empty()),
        ..SubjectAccessReviewStatus::default()
    });
    Ok(encode(
        &review,
        "SelfSubjectAccessReview",
        "authorization.k8s.io/v1",
    ))
}

/// kube's 422 for a `SelfSubjectAccessReview` spec that names both or
/// neither kind of attributes.
fn invalid_spec(field: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "",
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: \"null\": {why}"),
            field: field.into(),
        }],
    )
}

fn rules_review(store: &Store, user: &UserInfo, body: &Value) -> Result<Value, ApiError> {
    use k8s_openapi::api::authorization::v1::SubjectRulesReviewStatus;
    let mut review: SelfSubjectRulesReview = decode(body, "SelfSubjectRulesReview")?;
    let namespace = review.spec.namespace.clone().unwrap_or_default();
    let found = rbac::rules_for(store, user, &namespace);
    let non_empty = |v: &Option<Vec<String>>| v.clone().filter(|v| !v.is_empty());
    let resource_rules = found
        .rules
        .iter()
        .filter(|r| r.resources.as_ref().is_some_and(|r| !r.is_empty()))
        .map(|r| ResourceRule {
            verbs: r.verbs.clone(),
            api_groups: non_empty(&r.api_groups),
            resources: non_empty(&r.resources),
            resource_names: non_empty(&r.resource_names),
        })
        .collect();
    let non_resource_rules = found
        .rules
        .iter()
        .filter(|r| r.non_resource_urls.as_ref().is_some_and(|u| !u.is_empty()))
        .map(|r| NonResourceRule {
            verbs: r.verbs.clone(),
            non_resource_urls: non_empty(&r.non_resource_urls),
        })
        .collect();
    let incomplete = !found.errors.is_empty();
    review.status = Some(SubjectRulesReviewStatus {
        resource_rules,
        non_resource_rules,
        incomplete,
        evaluation_error: incomplete.then(|| found.errors.join(", ")),
    });
    Ok(encode(
        &review,
        "SelfSubjectRulesReview",
        "authorization.k8s.io/v1",
    ))
}

fn who_am_i(user: &UserInfo) -> Value {
    use k8s_openapi::api::authentication::v1::{SelfSubjectReviewStatus, UserInfo as KubeUser};
    let review = SelfSubjectReview {
        status: Some(SelfSubjectReviewStatus {
            user_info: Some(KubeUser {
                username: Some(user.username.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: None,
            }),
        }),
        ..SelfSubjectReview::default()
    };
    encode(&review, "SelfSubjectReview", "authentication.k8s.io/v1")
}
