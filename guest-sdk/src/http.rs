//! A typed HTTP client over the host's `http` import: outbound requests,
//! for plugins whose binding grants `capabilities.http`.
//!
//! ```no_run
//! use gantry_sdk::http::Request;
//!
//! # fn f() -> Result<(), gantry_sdk::http::Error> {
//! let response = Request::get("http://127.0.0.1:8080/backups?owner=db-1").send()?;
//! if response.is_success() {
//!     let backups: Vec<String> = response.json()?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The host sends only to the origins the binding allows, follows
//! redirects only within them, caps sizes and the number of requests, and
//! bounds every request by the call's deadline; headers the binding fills
//! from Secrets are added by the host and never seen here. In a shadow run
//! (a new version tried beside the one in service) only GET is sent.
//! Natively (unit tests) every request fails with [`Error::NotGranted`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::PluginError;

/// The request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET (the only method a shadow run sends).
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

/// Why a request got no response, as the host reports it (plus
/// [`Error::Decode`] for a body that is not what was expected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The binding grants no HTTP capability.
    NotGranted(String),
    /// The URL, or a redirect's target, is not in the allow list.
    NotAllowed(String),
    /// A shadow run does not send this method.
    ShadowRun(String),
    /// The call used up its `maxRequestsPerCall`.
    TooManyRequests(String),
    /// The request or the response body is over its cap.
    TooLarge(String),
    /// No response within the timeout or the call's deadline.
    Timeout(String),
    /// A bad URL or header.
    InvalidRequest(String),
    /// Connection, TLS or protocol failure.
    Transport(String),
    /// The host could not prepare the request (a Secret it reads).
    Host(String),
    /// The response body could not be decoded.
    Decode(String),
}

impl Error {
    /// Whether the same request may succeed later.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            Self::Timeout(_) | Self::Transport(_) | Self::Host(_) | Self::TooManyRequests(_)
        )
    }

    fn message(&self) -> &str {
        match self {
            Self::NotGranted(m)
            | Self::NotAllowed(m)
            | Self::ShadowRun(m)
            | Self::TooManyRequests(m)
            | Self::TooLarge(m)
            | Self::Timeout(m)
            | Self::InvalidRequest(m)
            | Self::Transport(m)
            | Self::Host(m)
            | Self::Decode(m) => m,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Self::NotGranted(_) => "not granted",
            Self::NotAllowed(_) => "not allowed",
            Self::ShadowRun(_) => "shadow run",
            Self::TooManyRequests(_) => "too many requests",
            Self::TooLarge(_) => "too large",
            Self::Timeout(_) => "timeout",
            Self::InvalidRequest(_) => "invalid request",
            Self::Transport(_) => "transport",
            Self::Host(_) => "host",
            Self::Decode(_) => "decode",
        };
        write!(f, "HTTP {kind}: {}", self.message())
    }
}

impl std::error::Error for Error {}

impl From<Error> for PluginError {
    /// `HttpError`, retryable where the request may succeed later.
    fn from(e: Error) -> Self {
        if e.retryable() {
            PluginError::retryable("HttpError", e.to_string())
        } else {
            PluginError::permanent("HttpError", e.to_string())
        }
    }
}

/// One request, built up and then [`sent`](Request::send).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// An absolute `http://` or `https://` URL.
    pub url: String,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// A request with `method` to `url`, no headers, no body.
    pub fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A GET.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::Get, url)
    }

    /// A POST.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new(Method::Post, url)
    }

    /// A PUT.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new(Method::Put, url)
    }

    /// A DELETE.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new(Method::Delete, url)
    }

    /// Add a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Set the body.
    #[must_use]
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Set a JSON body and `content-type: application/json`.
    ///
    /// # Errors
    /// [`Error::InvalidRequest`] when `value` does not serialize.
    pub fn json(self, value: &impl Serialize) -> Result<Self, Error> {
        let body = serde_json::to_vec(value).map_err(|e| Error::InvalidRequest(e.to_string()))?;
        Ok(self.header("content-type", "application/json").body(body))
    }

    /// Send it and wait for the whole response.
    ///
    /// # Errors
    /// What the host reports (see [`Error`]).
    pub fn send(self) -> Result<Response, Error> {
        #[cfg(target_arch = "wasm32")]
        return crate::guest::http_send(self);
        #[cfg(not(target_arch = "wasm32"))]
        {
            let _ = self;
            Err(Error::NotGranted(
                "outbound HTTP is only available in a component".into(),
            ))
        }
    }
}

/// A response, after any redirects.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body decoded from JSON.
    ///
    /// # Errors
    /// [`Error::Decode`] when it is not JSON of that shape.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body).map_err(|e| Error::Decode(e.to_string()))
    }
}
