//! The `capabilities` of a reconcile binding: what its plugin may do
//! beyond computing an answer. Everything is off unless granted here.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::origin::Origin;

/// Longest `timeoutMs` of a request, milliseconds.
pub const MAX_HTTP_TIMEOUT_MS: u64 = 60_000;
/// Largest `maxRequestBytes` and `maxResponseBytes`.
pub const MAX_HTTP_BODY_BYTES: usize = 16 << 20;
/// Largest `maxRequestsPerCall`.
pub const MAX_HTTP_REQUESTS_PER_CALL: u32 = 100;

/// `capabilities` as written in `binding.yaml`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapabilitiesSpec {
    /// Outbound HTTP (the `gantry:plugin/http` import); absent: not granted.
    #[serde(default)]
    pub http: Option<HttpSpec>,
}

/// `capabilities.http`: where the plugin may send requests, and how much.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpSpec {
    /// Origins (`scheme://host[:port]`) requests may go to, matched
    /// exactly; redirects are followed only within them.
    pub allow: Vec<String>,
    /// Longest wait for one request's response (also bounded by the call's
    /// remaining deadline), milliseconds; default 5,000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Largest request body, bytes; default 1 MiB.
    #[serde(default)]
    pub max_request_bytes: Option<usize>,
    /// Largest response body, bytes; default 1 MiB.
    #[serde(default)]
    pub max_response_bytes: Option<usize>,
    /// Most requests (redirects included) in one call; default 8.
    #[serde(default)]
    pub max_requests_per_call: Option<u32>,
    /// Headers the host fills from Secrets in the operator's namespace;
    /// the plugin never sees their values.
    #[serde(default)]
    pub secret_headers: Vec<SecretHeaderSpec>,
}

/// One header whose value comes from a Secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretHeaderSpec {
    /// The header, e.g. `Authorization`.
    pub header: String,
    /// The Secret's name, in the operator's namespace.
    pub secret: String,
    /// The key in the Secret's `data`.
    pub key: String,
    /// Origins (of `allow`) the header is sent to; empty: all of them.
    #[serde(default)]
    pub origins: Vec<String>,
}

/// Headers a plugin may never set: the host and the HTTP client own them.
pub const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "te",
    "trailer",
    "keep-alive",
    "proxy-authorization",
];

impl HttpSpec {
    /// The allowed origins, parsed.
    pub fn origins(&self) -> Result<Vec<Origin>, String> {
        self.allow.iter().map(|e| Origin::parse_entry(e)).collect()
    }

    /// Per-request timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(5_000))
    }

    /// Request body cap.
    pub fn request_cap(&self) -> usize {
        self.max_request_bytes.unwrap_or(1 << 20)
    }

    /// Response body cap.
    pub fn response_cap(&self) -> usize {
        self.max_response_bytes.unwrap_or(1 << 20)
    }

    /// Requests per call.
    pub fn requests_per_call(&self) -> u32 {
        self.max_requests_per_call.unwrap_or(8)
    }

    /// Check the values: `Err` is (field under `capabilities.http`, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        let at = |f: &str| format!("capabilities.http.{f}");
        if self.allow.is_empty() {
            return Err((at("allow"), "must name at least one origin".into()));
        }
        let origins = self.origins().map_err(|e| (at("allow"), e))?;
        if self.timeout_ms == Some(0) || self.timeout_ms.is_some_and(|t| t > MAX_HTTP_TIMEOUT_MS) {
            return Err((
                at("timeoutMs"),
                format!("must be between 1 and {MAX_HTTP_TIMEOUT_MS}"),
            ));
        }
        for (name, value) in [
            ("maxRequestBytes", self.max_request_bytes),
            ("maxResponseBytes", self.max_response_bytes),
        ] {
            if value.is_some_and(|v| v > MAX_HTTP_BODY_BYTES) {
                return Err((at(name), format!("must be at most {MAX_HTTP_BODY_BYTES}")));
            }
        }
        if self.max_requests_per_call == Some(0)
            || self
                .max_requests_per_call
                .is_some_and(|n| n > MAX_HTTP_REQUESTS_PER_CALL)
        {
            return Err((
                at("maxRequestsPerCall"),
                format!("must be between 1 and {MAX_HTTP_REQUESTS_PER_CALL}"),
            ));
        }
        for (i, header) in self.secret_headers.iter().enumerate() {
            let at = |f: &str| format!("capabilities.http.secretHeaders[{i}].{f}");
            let name = header.header.to_ascii_lowercase();
            if http::HeaderName::from_bytes(name.as_bytes()).is_err()
                || RESERVED_HEADERS.contains(&name.as_str())
            {
                return Err((
                    at("header"),
                    format!("{:?} is not a header the host may set", header.header),
                ));
            }
            if !gantry_kube::names::is_dns1123_subdomain(&header.secret) {
                return Err((
                    at("secret"),
                    format!("{:?} is not a Secret name", header.secret),
                ));
            }
            if header.key.is_empty() {
                return Err((at("key"), "must not be empty".into()));
            }
            for entry in &header.origins {
                let origin = Origin::parse_entry(entry).map_err(|e| (at("origins"), e))?;
                if !origins.contains(&origin) {
                    return Err((at("origins"), format!("{entry:?} is not in allow")));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> HttpSpec {
        serde_yaml::from_str(text).unwrap()
    }

    #[test]
    fn defaults_and_checks() {
        let spec = parse("allow: [\"http://127.0.0.1:8080\"]");
        assert_eq!(spec.check(), Ok(()));
        assert_eq!(spec.timeout(), Duration::from_secs(5));
        assert_eq!(spec.response_cap(), 1 << 20);
        assert_eq!(spec.requests_per_call(), 8);
        let cases = [
            ("allow: []", "capabilities.http.allow"),
            (
                "allow: [\"https://a.example/x\"]",
                "capabilities.http.allow",
            ),
            ("allow: [\"https://a.example\"]\ntimeoutMs: 0", "timeoutMs"),
            (
                "allow: [\"https://a.example\"]\nmaxResponseBytes: 99999999",
                "maxResponseBytes",
            ),
            (
                "allow: [\"https://a.example\"]\nmaxRequestsPerCall: 0",
                "maxRequestsPerCall",
            ),
            (
                "allow: [\"https://a.example\"]\nsecretHeaders: [{header: Host, secret: s, key: k}]",
                "secretHeaders[0].header",
            ),
            (
                "allow: [\"https://a.example\"]\nsecretHeaders: [{header: Authorization, secret: S_, key: k}]",
                "secretHeaders[0].secret",
            ),
            (
                "allow: [\"https://a.example\"]\nsecretHeaders: [{header: Authorization, secret: s, key: k, origins: [\"https://b.example\"]}]",
                "secretHeaders[0].origins",
            ),
        ];
        for (text, field) in cases {
            let (path, message) = parse(text).check().unwrap_err();
            assert!(path.contains(field), "{field} not in {path}: {message}");
        }
    }
}
