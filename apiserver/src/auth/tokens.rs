//! Service-account tokens: issued by `TokenRequest`
//! (`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`, as
//! `kubectl create token` sends it) and checked on every request that
//! carries one.
//!
//! A token is a JWT with kube's claims (`sub`, `aud`, `exp`,
//! `kubernetes.io.serviceaccount`). It is signed with HMAC-SHA256 under a
//! key derived from the server's admin token, so tokens outlive a restart
//! exactly when the admin token does (it is kept in the data directory).
//! kube signs with RSA so that others can verify its tokens; nothing but
//! this server verifies these.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::admission::UserInfo;
use crate::error::{ApiError, Cause};

/// The audience and issuer of the tokens the server issues, as a cluster's
/// default `--api-audiences` and `--service-account-issuer`.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// The shortest lifetime a `TokenRequest` may ask for (kube: ten minutes).
const MIN_EXPIRATION_SECONDS: i64 = 600;

/// The lifetime of a token whose request names none (kube: one hour).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;

/// Signs and verifies service-account tokens.
pub struct Signer {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

/// The service account a token names.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceAccountRef {
    /// Name.
    pub name: String,
    /// UID: a token of a deleted and recreated account is refused.
    pub uid: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct KubeClaims {
    namespace: String,
    serviceaccount: ServiceAccountRef,
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    aud: Vec<String>,
    exp: i64,
    iat: i64,
    nbf: i64,
    iss: String,
    jti: String,
    sub: String,
    #[serde(rename = "kubernetes.io")]
    kubernetes: KubeClaims,
}

/// A token's service account, once verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The account's namespace.
    pub namespace: String,
    /// The account.
    pub account: ServiceAccountRef,
}

impl Verified {
    /// The user kube makes of a service account: `system:serviceaccount:NS:NAME`
    /// in the service-account groups.
    pub fn user(&self) -> UserInfo {
        UserInfo {
            username: service_account_username(&self.namespace, &self.account.name),
            uid: Some(self.account.uid.clone()),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{}", self.namespace),
                "system:authenticated".into(),
            ],
        }
    }
}

/// `system:serviceaccount:NS:NAME`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

impl Signer {
    /// A signer whose key is derived from `admin_token`, or random when the
    /// server has none.
    pub fn new(admin_token: Option<&str>) -> Arc<Self> {
        use sha2::Digest;
        let seed = admin_token.map_or_else(crate::access::new_token, str::to_string);
        let key = sha2::Sha256::new()
            .chain_update(b"gantry service-account token key\0")
            .chain_update(seed.as_bytes())
            .finalize();
        Arc::new(Signer {
            encoding: EncodingKey::from_secret(&key),
            decoding: DecodingKey::from_secret(&key),
        })
    }

    /// A token for `account` in `namespace`, valid for `audiences` until
    /// the returned time.
    pub fn issue(
        &self,
        namespace: &str,
        account: &ServiceAccountRef,
        audiences: Vec<String>,
        lifetime_seconds: i64,
    ) -> (String, DateTime<Utc>) {
        let now = Utc::now();
        let expires = now + chrono::Duration::seconds(lifetime_seconds);
        let claims = Claims {
            aud: audiences,
            exp: expires.timestamp(),
            iat: now.timestamp(),
            nbf: now.timestamp(),
            iss: API_AUDIENCE.into(),
            jti: uuid::Uuid::new_v4().to_string(),
            sub: service_account_username(namespace, &account.name),
            kubernetes: KubeClaims {
                namespace: namespace.into(),
                serviceaccount: account.clone(),
            },
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HMAC signing cannot fail");
        (token, expires)
    }

    /// The account `token` names, if the server signed it, it has not
    /// expired and it is meant for this API server (its audiences hold
    /// [`API_AUDIENCE`]). Whether the account still exists is the caller's
    /// check.
    pub fn verify(&self, token: &str) -> Option<Verified> {
        self.verify_for(token, &[API_AUDIENCE.to_string()])
            .map(|(verified, _)| verified)
    }

    /// The audiences of a token this server signed (and not expired), whoever
    /// it is meant for.
    pub fn audiences_of(&self, token: &str) -> Option<Vec<String>> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_aud = false;
        validation.set_issuer(&[API_AUDIENCE]);
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation).ok()?;
        Some(data.claims.aud)
    }

    /// As [`Signer::verify`], for a token meant for any of `audiences`;
    /// also the audiences the token and `audiences` share (a `TokenReview`
    /// answers with them).
    pub fn verify_for(&self, token: &str, audiences: &[String]) -> Option<(Verified, Vec<String>)> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_audience(audiences);
        validation.set_issuer(&[API_AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "aud", "iss", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &validation).ok()?;
        let claims = data.claims;
        let shared = claims
            .aud
            .iter()
            .filter(|a| audiences.contains(a))
            .cloned()
            .collect();
        (claims.sub
            == service_account_username(
                &claims.kubernetes.namespace,
                &claims.kubernetes.serviceaccount.name,
            ))
        .then_some((
            Verified {
                namespace: claims.kubernetes.namespace,
                account: claims.kubernetes.serviceaccount,
            },
            shared,
        ))
    }
}

/// What a `TokenRequest` body asks for: audiences (default: the API
/// server's) and a lifetime (default one hour, at least ten minutes).
pub fn requested(body: &Value, account: &str) -> Result<(Vec<String>, i64), ApiError> {
    let spec = &body["spec"];
    let audiences: Vec<String> = spec["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .filter(|a: &Vec<String>| !a.is_empty())
        .unwrap_or_else(|| vec![API_AUDIENCE.to_string()]);
    let seconds = spec["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if seconds < MIN_EXPIRATION_SECONDS {
        return Err(ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            account,
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {seconds}: may not specify a duration less than 10 minutes"
                ),
                field: "spec.expirationSeconds".into(),
            }],
        ));
    }
    Ok((audiences, seconds))
}

/// Answers a `TokenRequest` for the service account `name` in `namespace`:
/// a token for it, or 404 when it does not exist.
pub fn issue_for(
    app: &crate::app::App,
    namespace: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let info = app
        .registry
        .get("", "v1", "serviceaccounts")
        .expect("service accounts are built in");
    let account = app
        .store
        .get(&info.key(Some(namespace), name))
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
    let uid = account
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (audiences, seconds) = requested(body, name)?;
    let reference = ServiceAccountRef {
        name: name.into(),
        uid: uid.into(),
    };
    let (token, expires) =
        app.service_account_tokens
            .issue(namespace, &reference, audiences.clone(), seconds);
    let mut answer = response(body, namespace, name, &audiences, seconds, &token, expires);
    answer["metadata"]["uid"] = json!(uid);
    Ok(answer)
}

/// The `TokenRequest` answer: the request with kube's defaults filled in
/// and the token in `status` (the caller adds the account's uid).
pub fn response(
    body: &Value,
    namespace: &str,
    account: &str,
    audiences: &[String],
    seconds: i64,
    token: &str,
    expires: DateTime<Utc>,
) -> Value {
    // kube keeps the request's labels and annotations.
    let mut metadata = json!({});
    for key in ["labels", "annotations"] {
        if let Some(map) = body["metadata"].get(key).filter(|m| m.is_object()) {
            metadata[key] = map.clone();
        }
    }
    metadata["name"] = json!(account);
    metadata["namespace"] = json!(namespace);
    metadata["creationTimestamp"] = json!(crate::objects::meta::now_rfc3339());
    json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": metadata,
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": body["spec"].get("boundObjectRef").cloned().unwrap_or(Value::Null),
        },
        "status": {
            "token": token,
            "expirationTimestamp": expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account() -> ServiceAccountRef {
        ServiceAccountRef {
            name: "builder".into(),
            uid: "u-1".into(),
        }
    }

    #[test]
    fn a_token_verifies_under_its_own_key_only() {
        let signer = Signer::new(Some("admin"));
        let (token, _) = signer.issue("ci", &account(), vec![API_AUDIENCE.into()], 600);
        let verified = signer.verify(&token).expect("verifies");
        assert_eq!(verified.namespace, "ci");
        assert_eq!(verified.account, account());
        assert_eq!(verified.user().username, "system:serviceaccount:ci:builder");
        assert!(Signer::new(Some("other")).verify(&token).is_none());
        // The same admin token gives the same key: tokens outlive a restart.
        assert!(Signer::new(Some("admin")).verify(&token).is_some());
    }

    #[test]
    fn expired_foreign_audience_and_tampered_tokens_are_refused() {
        let signer = Signer::new(Some("admin"));
        let (expired, _) = signer.issue("ci", &account(), vec![API_AUDIENCE.into()], -3600);
        assert!(signer.verify(&expired).is_none());
        let (foreign, _) = signer.issue("ci", &account(), vec!["vault".into()], 600);
        assert!(signer.verify(&foreign).is_none());
        let (token, _) = signer.issue("ci", &account(), vec![API_AUDIENCE.into()], 600);
        let mut parts: Vec<&str> = token.split('.').collect();
        let other = signer.issue("kube-system", &account(), vec![API_AUDIENCE.into()], 600);
        let other_claims = other.0.split('.').nth(1).unwrap().to_string();
        parts[1] = &other_claims;
        assert!(signer.verify(&parts.join(".")).is_none());
        assert!(signer.verify("not a token").is_none());
    }

    #[test]
    fn requests_are_defaulted_and_short_lifetimes_refused() {
        let (aud, secs) = requested(&json!({"spec": {}}), "a").unwrap();
        assert_eq!(aud, vec![API_AUDIENCE.to_string()]);
        assert_eq!(secs, 3600);
        let e = requested(&json!({"spec": {"expirationSeconds": 60}}), "a").unwrap_err();
        assert!(e.to_string().contains("less than 10 minutes"), "{e}");
    }
}
