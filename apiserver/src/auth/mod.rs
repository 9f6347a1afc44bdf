//! Who sends a request and what they may do.
//!
//! The server's admin token names the cluster admin (group
//! `system:masters`, allowed everything as in kube). A service-account
//! token the server issued ([`tokens`]) names that account, and service
//! accounts are held to RBAC ([`rbac`]) as kube-apiserver holds them, so a
//! permission a workload lacks shows on this server as in a cluster. With
//! no admin token configured (loopback only) other requests are anonymous
//! and unrestricted, as before tokens.

pub mod rbac;
pub mod reviews;
pub mod subject_reviews;
pub mod tokens;

use axum::body::Body;
use hyper::Request;

use crate::admission::UserInfo;
use crate::app::App;
use crate::error::{ApiError, Details};
use crate::storage::Store;
use rbac::{Attributes, Decision};

/// The group kube lets do anything.
const PRIVILEGED_GROUP: &str = "system:masters";

/// The user `req` comes from: the admin for the admin token, a service
/// account for a valid token of one that still exists, else 401 — unless
/// the server has no admin token, or the path is public (`/version`,
/// `/healthz`…), where the request is anonymous.
pub fn authenticate(app: &App, req: &Request<Body>) -> Result<UserInfo, ApiError> {
    let sent = crate::access::bearer_token(req);
    if let Some(sent) = sent {
        if let Some(admin) = &app.config.token
            && crate::access::tokens_equal(sent, admin)
        {
            return Ok(UserInfo::admin());
        }
        if let Some(verified) = app.service_account_tokens.verify(sent)
            && account_exists(app, &verified)
        {
            return Ok(verified.user());
        }
    }
    if app.config.token.is_none() || crate::access::is_public_info(req) {
        Ok(UserInfo::anonymous())
    } else {
        Err(ApiError::Unauthorized)
    }
}

/// The user `token` names for `audiences` (a `TokenReview`), with the
/// audiences it is good for: the admin token is the API server's own
/// (audience-agnostic, as kube's static tokens), a service-account token
/// must name one of `audiences` and an account that still exists.
pub fn user_of_token(
    app: &App,
    token: &str,
    audiences: &[String],
) -> Option<(UserInfo, Vec<String>)> {
    if let Some(admin) = &app.config.token
        && crate::access::tokens_equal(token, admin)
    {
        let api = tokens::API_AUDIENCE.to_string();
        return audiences
            .contains(&api)
            .then(|| (UserInfo::admin(), vec![api]));
    }
    let (verified, shared) = app.service_account_tokens.verify_for(token, audiences)?;
    account_exists(app, &verified).then(|| (verified.user(), shared))
}

/// Whether the account a token names still exists with the same UID (kube
/// refuses tokens of deleted accounts).
fn account_exists(app: &App, verified: &tokens::Verified) -> bool {
    app.registry
        .get("", "v1", "serviceaccounts")
        .and_then(|info| {
            app.store
                .get(&info.key(Some(&verified.namespace), &verified.account.name))
        })
        .is_some_and(|sa| {
            sa.pointer("/metadata/uid").and_then(|u| u.as_str())
                == Some(verified.account.uid.as_str())
        })
}

/// Whether `user` is held to RBAC: service accounts are; the admin and the
/// anonymous user of a server without a token are not.
pub fn is_restricted(user: &UserInfo) -> bool {
    user.username.starts_with("system:serviceaccount:")
}

/// The authorizer's answer for `user`: members of `system:masters` may do
/// anything (with no reason given, as kube's privileged-group authorizer),
/// everyone else what RBAC grants.
pub fn decide(store: &Store, user: &UserInfo, attributes: &Attributes) -> Decision {
    if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    rbac::authorize(store, user, attributes)
}

/// Refuses `attributes` with kube's 403 unless `user` may do it.
pub fn authorize(store: &Store, user: &UserInfo, attributes: &Attributes) -> Result<(), ApiError> {
    if !is_restricted(user) {
        return Ok(());
    }
    let decision = decide(store, user, attributes);
    if decision.allowed {
        return Ok(());
    }
    Err(forbidden(user, attributes, &decision.reason))
}

/// kube's Forbidden Status for a refused request.
fn forbidden(user: &UserInfo, attributes: &Attributes, reason: &str) -> ApiError {
    let suffix = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    let username = &user.username;
    match attributes {
        Attributes::NonResource { verb, path } => ApiError::Forbidden {
            message: format!("forbidden: User {username:?} cannot {verb} path {path:?}{suffix}"),
            details: Details::default(),
        },
        Attributes::Resource {
            verb,
            namespace,
            group,
            resource,
            subresource,
            name,
        } => {
            let combined = rbac::combined_resource(resource, subresource);
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {namespace:?}")
            };
            let why = format!(
                "User {username:?} cannot {verb} resource {combined:?} in API group {group:?} {scope}{suffix}"
            );
            let qualified = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            let message = if name.is_empty() {
                format!("{qualified} is forbidden: {why}")
            } else {
                format!("{qualified} {name:?} is forbidden: {why}")
            };
            ApiError::Forbidden {
                message,
                details: Details::new(group, resource, name),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_read_as_kube_words_them() {
        let user = tokens::Verified {
            namespace: "ci".into(),
            account: tokens::ServiceAccountRef {
                name: "builder".into(),
                uid: "u".into(),
            },
        }
        .user();
        let list = Attributes::Resource {
            verb: "list".into(),
            namespace: "default".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: String::new(),
            name: String::new(),
        };
        assert_eq!(
            forbidden(&user, &list, "").to_string(),
            "deployments.apps is forbidden: User \"system:serviceaccount:ci:builder\" cannot list \
             resource \"deployments\" in API group \"apps\" in the namespace \"default\""
        );
        let node = Attributes::Resource {
            verb: "get".into(),
            namespace: String::new(),
            group: String::new(),
            resource: "nodes".into(),
            subresource: "status".into(),
            name: "n1".into(),
        };
        assert_eq!(
            forbidden(&user, &node, "").to_string(),
            "nodes \"n1\" is forbidden: User \"system:serviceaccount:ci:builder\" cannot get \
             resource \"nodes/status\" in API group \"\" at the cluster scope"
        );
        let path = Attributes::NonResource {
            verb: "get".into(),
            path: "/metrics".into(),
        };
        assert_eq!(
            forbidden(&user, &path, "").to_string(),
            "forbidden: User \"system:serviceaccount:ci:builder\" cannot get path \"/metrics\""
        );
    }
}
