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
use crate::app::App;
use crate::error::{ApiError, Cause};
use crate::http::request::ResourcePath;
use crate::storage::Store;

/// A review resource: created and answered, never stored.
pub struct Review {
    /// API group.
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Resource (plural).
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Sent to a namespace (`LocalSubjectAccessReview`).
    pub namespaced: bool,
}

const fn review(
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Review {
    Review {
        group,
        version: "v1",
        plural,
        kind,
        namespaced,
    }
}

const AUTHZ: &str = "authorization.k8s.io";
const AUTHN: &str = "authentication.k8s.io";

/// The review resources.
pub const RESOURCES: &[Review] = &[
    review(
        AUTHZ,
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        false,
    ),
    review(
        AUTHZ,
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        false,
    ),
    review(AUTHZ, "subjectaccessreviews", "SubjectAccessReview", false),
    review(
        AUTHZ,
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        true,
    ),
    review(AUTHN, "selfsubjectreviews", "SelfSubjectReview", false),
    review(AUTHN, "tokenreviews", "TokenReview", false),
];

/// The review resource a request path names (`group/version/plural`, in a
/// namespace exactly for the namespaced ones, no name or subresource), if any.
pub fn plural(group: &str, version: &str, path: &ResourcePath) -> Option<&'static str> {
    if path.name.is_some() || path.subresource.is_some() {
        return None;
    }
    RESOURCES
        .iter()
        .find(|r| {
            r.group == group
                && r.version == version
                && r.plural == path.resource
                && r.namespaced == path.namespace.is_some()
        })
        .map(|r| r.plural)
}

/// Answers a review `POSTed` to `plural` (in `namespace` for a local one)
/// by `user`: the review with its `status` filled in.
pub fn answer(
    app: &App,
    user: &UserInfo,
    plural: &str,
    namespace: Option<&str>,
    body: &Value,
) -> Result<Value, ApiError> {
    use super::subject_reviews as subject;
    let store = &app.store;
    match plural {
        "selfsubjectaccessreviews" => access_review(store, user, body),
        "selfsubjectrulesreviews" => rules_review(store, user, body),
        "subjectaccessreviews" => subject::access_review(app, body),
        "localsubjectaccessreviews" => {
            subject::local_access_review(app, namespace.unwrap_or_default(), body)
        }
        "tokenreviews" => subject::token_review(app, body),
        _ => Ok(who_am_i(user)),
    }
}

/// Decodes `body` as kube's typed `T` (unknown fields dropped, types checked).
pub(super) fn decode<T: DeserializeOwned>(body: &Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(body.clone())
        .map_err(|e| ApiError::bad_request(format!("error decoding {kind}: {e}")))
}

/// The review as kube answers it: access and rules reviews with the
/// request's metadata (no creation time), a `SelfSubjectReview` created now.
pub(super) fn encode<T: Serialize>(review: &T, kind: &str, api_version: &str) -> Value {
    let mut out = serde_json::to_value(review).expect("a typed review encodes");
    out["kind"] = json!(kind);
    out["apiVersion"] = json!(api_version);
    if kind == "SelfSubjectReview" {
        out["metadata"]["creationTimestamp"] = json!(crate::objects::meta::now_rfc3339());
    }
    out
}

/// What a review's `resourceAttributes` ask about.
pub(super) fn resource_attributes(
    r: &k8s_openapi::api::authorization::v1::ResourceAttributes,
) -> Attributes {
    Attributes::Resource {
        verb: r.verb.clone().unwrap_or_default(),
        namespace: r.namespace.clone().unwrap_or_default(),
        group: r.group.clone().unwrap_or_default(),
        resource: r.resource.clone().unwrap_or_default(),
        subresource: r.subresource.clone().unwrap_or_default(),
        name: r.name.clone().unwrap_or_default(),
    }
}

/// What a review's `nonResourceAttributes` ask about.
pub(super) fn non_resource_attributes(
    n: &k8s_openapi::api::authorization::v1::NonResourceAttributes,
) -> Attributes {
    Attributes::NonResource {
        verb: n.verb.clone().unwrap_or_default(),
        path: n.path.clone().unwrap_or_default(),
    }
}

fn access_review(store: &Store, user: &UserInfo, body: &Value) -> Result<Value, ApiError> {
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;
    let mut review: SelfSubjectAccessReview = decode(body, "SelfSubjectAccessReview")?;
    let spec = &review.spec;
    let attributes = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (Some(r), None) => resource_attributes(r),
        (None, Some(n)) => non_resource_attributes(n),
        (Some(_), Some(_)) => {
            return Err(invalid_spec(
                "SelfSubjectAccessReview",
                "spec.nonResourceAttributes",
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid_spec(
                "SelfSubjectAccessReview",
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

/// kube's 422 for an access review spec whose attributes are wrong (both,
/// neither, or nonresource ones where they are not allowed).
pub(super) fn invalid_spec(kind: &str, field: &str, why: &str) -> ApiError {
    ApiError::invalid(
        "authorization.k8s.io",
        kind,
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
