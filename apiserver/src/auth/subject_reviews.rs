//! Reviews one client asks about another: `SubjectAccessReview` ("may this
//! user do this?", cluster-wide), `LocalSubjectAccessReview` (the same,
//! within the namespace of the request) and `TokenReview` ("whose token is
//! this?"). Webhook authorizers and authenticators (kube-rbac-proxy, metrics
//! servers) send them. None is stored; who may send them is RBAC's
//! (`create` on the resource), as in kube.

use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, SubjectAccessReview, SubjectAccessReviewSpec,
    SubjectAccessReviewStatus,
};
use serde_json::{Value, json};

use super::reviews::{decode, encode};
use crate::admission::UserInfo;
use crate::app::App;
use crate::error::{ApiError, Cause};

/// Answers a `SubjectAccessReview`: the review with its `status`.
pub fn access_review(app: &App, body: &Value) -> Result<Value, ApiError> {
    const KIND: &str = "SubjectAccessReview";
    let mut review: SubjectAccessReview = decode(body, KIND)?;
    review.status = Some(status(app, &review.spec, false)?);
    Ok(encode(&review, KIND, "authorization.k8s.io/v1"))
}

/// Answers a `LocalSubjectAccessReview` sent to `namespace`: kube refuses
/// one whose object names another namespace, attributes of another
/// namespace, and nonresource attributes.
pub fn local_access_review(app: &App, namespace: &str, body: &Value) -> Result<Value, ApiError> {
    const KIND: &str = "LocalSubjectAccessReview";
    let mut review: LocalSubjectAccessReview = decode(body, KIND)?;
    let own = review
        .metadata
        .namespace
        .get_or_insert_with(|| namespace.to_string());
    if own != namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if let Some(attributes) = &review.spec.resource_attributes {
        let theirs = attributes.namespace.as_deref().unwrap_or("");
        if theirs != namespace {
            return Err(invalid(
                "spec.resourceAttributes.namespace",
                &format!("Invalid value: {theirs:?}: must match metadata.namespace"),
            ));
        }
    }
    review.status = Some(status(app, &review.spec, true)?);
    Ok(encode(&review, KIND, "authorization.k8s.io/v1"))
}

/// The authorizer's answer for the user a spec names, after kube's checks.
fn status(
    app: &App,
    spec: &SubjectAccessReviewSpec,
    local: bool,
) -> Result<SubjectAccessReviewStatus, ApiError> {
    let attributes = match (&spec.resource_attributes, &spec.non_resource_attributes) {
        (_, Some(n)) if local => {
            // Go prints the attributes struct with its field names.
            let value = format!(
                "{{\"Path\":{:?},\"Verb\":{:?}}}",
                n.path.as_deref().unwrap_or(""),
                n.verb.as_deref().unwrap_or("")
            );
            return Err(invalid(
                "spec.nonResourceAttributes",
                &format!("Invalid value: {value}: disallowed on this kind of request"),
            ));
        }
        (Some(r), None) => super::reviews::resource_attributes(r),
        (None, Some(n)) => super::reviews::non_resource_attributes(n),
        (Some(_), Some(_)) => {
            return Err(invalid(
                "spec.nonResourceAttributes",
                "Invalid value: null: cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid(
                "spec.resourceAttributes",
                "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
    };
    let user = spec.user.clone().unwrap_or_default();
    let groups = spec.groups.clone().unwrap_or_default();
    if user.is_empty() && groups.is_empty() {
        return Err(invalid(
            "spec.user",
            "Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    let subject = UserInfo {
        username: user,
        uid: spec.uid.clone(),
        groups,
    };
    let decision = super::decide(&app.store, &subject, &attributes);
    Ok(SubjectAccessReviewStatus {
        allowed: decision.allowed,
        reason: Some(decision.reason).filter(|r| !r.is_empty()),
        ..SubjectAccessReviewStatus::default()
    })
}

/// kube's 422 for an access review: its registries name no kind
/// (`.authorization.k8s.io "" is invalid: ...`).
fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        "authorization.k8s.io",
        "",
        "",
        vec![Cause {
            reason: "FieldValueInvalid".into(),
            message: message.into(),
            field: field.into(),
        }],
    )
}

/// Answers a `TokenReview`: who the token names, for the audiences asked
/// (default: the API server's). kube's 400 for an empty token.
pub fn token_review(app: &App, body: &Value) -> Result<Value, ApiError> {
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo as KubeUser};
    let mut review: TokenReview = decode(body, "TokenReview")?;
    let token = review.spec.token.clone().unwrap_or_default();
    if token.is_empty() {
        return Err(ApiError::bad_request(
            "token is required for TokenReview in authentication",
        ));
    }
    let audiences = review
        .spec
        .audiences
        .clone()
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| vec![super::tokens::API_AUDIENCE.to_string()]);
    let found = super::user_of_token(app, &token, &audiences);
    review.status = Some(match found {
        Some((user, audiences)) => TokenReviewStatus {
            authenticated: Some(true),
            audiences: Some(audiences),
            user: Some(KubeUser {
                username: Some(user.username),
                uid: user.uid,
                groups: Some(user.groups),
                extra: None,
            }),
            error: None,
        },
        None => TokenReviewStatus {
            error: Some(refusal(app, &token, &audiences)),
            ..TokenReviewStatus::default()
        },
    });
    let mut out = encode(&review, "TokenReview", "authentication.k8s.io/v1");
    // kube's status.user is a struct, so it is there even when empty.
    if out["status"].get("user").is_none() {
        out["status"]["user"] = json!({});
    }
    Ok(out)
}

/// kube's `status.error` for a token it does not authenticate: a token of this
/// server meant for other audiences is named as such.
fn refusal(app: &App, token: &str, audiences: &[String]) -> String {
    // Go's %q of a []string: ["a" "b"].
    let quoted = |list: &[String]| {
        let items: Vec<String> = list.iter().map(|a| format!("{a:?}")).collect();
        format!("[{}]", items.join(" "))
    };
    match app.service_account_tokens.audiences_of(token) {
        Some(theirs) if !theirs.iter().any(|a| audiences.contains(a)) => format!(
            "[invalid bearer token, token audiences {} is invalid for the target audiences {}]",
            quoted(&theirs),
            quoted(audiences)
        ),
        _ => "invalid bearer token".into(),
    }
}
