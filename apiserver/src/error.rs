//! `metav1.Status` errors: every failed request is answered with one of these.

use serde_json::{Value, json};

/// One entry of `status.details.causes`.
#[derive(Clone, Debug, PartialEq)]
pub struct Cause {
    /// Machine-readable reason, e.g. `FieldValueInvalid`, `FieldManagerConflict`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// The field the cause is about, e.g. `metadata.name`.
    pub field: String,
}

impl Cause {
    /// A cause with the given reason, message and field.
    pub fn new(reason: &str, message: impl Into<String>, field: impl Into<String>) -> Self {
        Cause {
            reason: reason.into(),
            message: message.into(),
            field: field.into(),
        }
    }

    fn to_json(&self) -> Value {
        let mut v = json!({ "reason": self.reason, "message": self.message });
        if !self.field.is_empty() {
            v["field"] = json!(self.field);
        }
        v
    }
}

/// `status.details`: what the error is about.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Details {
    /// Object name.
    pub name: String,
    /// API group.
    pub group: String,
    /// Kind (or resource plural, as kube uses for NotFound/AlreadyExists/Conflict).
    pub kind: String,
    /// Field-level causes.
    pub causes: Vec<Cause>,
}

impl Details {
    /// Details naming an object of a resource.
    pub fn new(group: &str, kind: &str, name: &str) -> Self {
        Details {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            causes: vec![],
        }
    }
}

/// A request failure, rendered as a `metav1.Status` with its HTTP code.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ApiError {
    /// 404 `NotFound`.
    #[error("{message}")]
    NotFound {
        /// Message.
        message: String,
        /// Details.
        details: Option<Details>,
    },
    /// 409 `AlreadyExists`.
    #[error("{message}")]
    AlreadyExists {
        /// Message.
        message: String,
        /// Details.
        details: Details,
    },
    /// 409 Conflict (stale resourceVersion, failed precondition, apply conflict).
    #[error("{message}")]
    Conflict {
        /// Message.
        message: String,
        /// Details.
        details: Details,
    },
    /// 422 Invalid, with field causes.
    #[error("{message}")]
    Invalid {
        /// Message.
        message: String,
        /// Details.
        details: Details,
    },
    /// 403 Forbidden (e.g. creating in a terminating namespace).
    #[error("{message}")]
    Forbidden {
        /// Message.
        message: String,
        /// Details.
        details: Details,
    },
    /// 410 Expired (too old resourceVersion or continue token).
    #[error("{0}")]
    Expired(String),
    /// 410 Expired for a `continue` token older than the history: the Status
    /// carries a fresh token that continues at the latest state (kube's
    /// inconsistent continue).
    #[error(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    )]
    InconsistentContinue(String),
    /// 400 `BadRequest`.
    #[error("{message}")]
    BadRequest {
        /// Message.
        message: String,
        /// Details (e.g. unknown field causes under fieldValidation=Strict).
        details: Option<Details>,
    },
    /// 415 `UnsupportedMediaType`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 405 `MethodNotAllowed`.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 413 `RequestEntityTooLarge`.
    #[error("{0}")]
    TooLarge(String),
    /// 401 Unauthorized.
    #[error("Unauthorized")]
    Unauthorized,
    /// 406 `NotAcceptable`.
    #[error("{0}")]
    NotAcceptable(String),
    /// 500 `InternalError` (storage failure and the like).
    #[error("{0}")]
    Internal(String),
    /// A complete `metav1.Status` to return as is (an admission webhook's denial);
    /// its `code` is the HTTP status (400..=599).
    #[error("{}", .0.get("message").and_then(Value::as_str).unwrap_or(""))]
    Rejected(Box<Value>),
}

/// Shorthand for results of request handling.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// A plain 400 `BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::BadRequest {
            message: message.into(),
            details: None,
        }
    }

    /// `{resource}[.{group}] "{name}" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        ApiError::NotFound {
            message: format!("{} \"{name}\" not found", qualified(group, plural)),
            details: Some(Details::new(group, plural, name)),
        }
    }

    /// `{resource} "{name}" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        ApiError::AlreadyExists {
            message: format!("{} \"{name}\" already exists", qualified(group, plural)),
            details: Details::new(group, plural, name),
        }
    }

    /// Conflict with kube's `Operation cannot be fulfilled on ...` message.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        ApiError::Conflict {
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, plural)
            ),
            details: Details::new(group, plural, name),
        }
    }

    /// The optimistic-concurrency conflict.
    pub fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `{Kind}[.group] "{name}" is invalid: cause; cause`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let msgs: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if msgs.len() == 1 {
            msgs[0].clone()
        } else {
            format!("[{}]", msgs.join(", "))
        };
        ApiError::Invalid {
            message: format!("{qk} \"{name}\" is invalid: {joined}"),
            details: Details {
                name: name.into(),
                group: group.into(),
                kind: kind.into(),
                causes,
            },
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::NotFound { .. } => 404,
            ApiError::AlreadyExists { .. } | ApiError::Conflict { .. } => 409,
            ApiError::Invalid { .. } => 422,
            ApiError::Forbidden { .. } => 403,
            ApiError::Expired(_) | ApiError::InconsistentContinue(_) => 410,
            ApiError::BadRequest { .. } => 400,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::TooLarge(_) => 413,
            ApiError::Unauthorized => 401,
            ApiError::NotAcceptable(_) => 406,
            ApiError::Internal(_) => 500,
            ApiError::Rejected(s) => s
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (400..=599).contains(c))
                .unwrap_or(400),
        }
    }

    /// The Status `reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            ApiError::NotFound { .. } => "NotFound",
            ApiError::AlreadyExists { .. } => "AlreadyExists",
            ApiError::Conflict { .. } => "Conflict",
            ApiError::Invalid { .. } => "Invalid",
            ApiError::Forbidden { .. } => "Forbidden",
            ApiError::Expired(_) | ApiError::InconsistentContinue(_) => "Expired",
            ApiError::BadRequest { .. } => "BadRequest",
            ApiError::UnsupportedMediaType(_) => "UnsupportedMediaType",
            ApiError::MethodNotAllowed(_) => "MethodNotAllowed",
            ApiError::TooLarge(_) => "RequestEntityTooLarge",
            ApiError::Unauthorized => "Unauthorized",
            ApiError::NotAcceptable(_) => "NotAcceptable",
            ApiError::Internal(_) => "InternalError",
            ApiError::Rejected(_) => "",
        }
    }

    fn details(&self) -> Option<&Details> {
        match self {
            ApiError::NotFound { details, .. } | ApiError::BadRequest { details, .. } => {
                details.as_ref()
            }
            ApiError::AlreadyExists { details, .. }
            | ApiError::Conflict { details, .. }
            | ApiError::Invalid { details, .. }
            | ApiError::Forbidden { details, .. } => Some(details),
            _ => None,
        }
    }

    /// The `metav1.Status` object.
    pub fn to_status(&self) -> Value {
        if let ApiError::Rejected(s) = self {
            return (**s).clone();
        }
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if let Some(d) = self.details() {
            let mut dj = serde_json::Map::new();
            if !d.name.is_empty() {
                dj.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                dj.insert("group".into(), json!(d.group));
            }
            if !d.kind.is_empty() {
                dj.insert("kind".into(), json!(d.kind));
            }
            if !d.causes.is_empty() {
                dj.insert(
                    "causes".into(),
                    Value::Array(d.causes.iter().map(Cause::to_json).collect()),
                );
            }
            s["details"] = Value::Object(dj);
        }
        if let ApiError::InconsistentContinue(token) = self {
            s["metadata"] = json!({ "continue": token });
        }
        if let ApiError::Internal(message) = self {
            // kube's NewInternalError: the error is also the one cause.
            let cause = message
                .strip_prefix("Internal error occurred: ")
                .unwrap_or(message);
            s["details"] = json!({ "causes": [{ "message": cause }] });
        }
        s
    }
}

/// kube's `storage.NewTooLargeResourceVersionError`: a 504 Timeout with cause
/// `ResourceVersionTooLarge` (clients relist on it), retry after 1 s.
pub fn too_large_resource_version(requested: u64, current: u64) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("Timeout: Too large resource version: {requested}, current: {current}"),
        "reason": "Timeout",
        "details": {
            "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
            "retryAfterSeconds": 1,
        },
        "code": 504,
    })
}

/// `plural` or `plural.group`, as kube prints a `GroupResource`.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

/// A success Status (returned by deletes that remove the object immediately).
pub fn success_status(group: &str, kind: &str, name: &str, uid: &str) -> Value {
    let mut details = json!({ "name": name, "kind": kind, "uid": uid });
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}
