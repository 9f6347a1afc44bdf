//! The `http` import: one binding's grant (allow list, caps, Secret
//! headers, its own client) and sending one request under it.
//!
//! Redirects are followed here, not by the client, so that every hop is
//! matched against the allow list, counts as a request, gets the Secret
//! headers of its own origin only, and shares the call's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use reqwest::Url;
use tracing::Instrument;

use super::metrics::CapabilityMetrics;
use super::origin::Origin;
use super::secrets::SecretSource;
use super::spec::{HttpSpec, RESERVED_HEADERS};
use crate::contract::generated::reconciler::gantry::plugin::http::{
    Error, Method, Request, Response,
};

/// Most redirects followed for one request.
pub const MAX_REDIRECTS: usize = 5;

/// A header the host fills from a Secret.
struct SecretHeader {
    name: HeaderName,
    secret: String,
    key: String,
    /// Empty: every allowed origin.
    origins: Vec<Origin>,
}

/// What one binding's plugin may send. Built once per binding version and
/// shared by its calls.
pub struct HttpGrant {
    binding: String,
    origins: Vec<Origin>,
    timeout: Duration,
    request_cap: usize,
    response_cap: usize,
    max_requests: u32,
    secret_headers: Vec<SecretHeader>,
    secrets: Arc<dyn SecretSource>,
    client: reqwest::Client,
    metrics: Option<Arc<CapabilityMetrics>>,
}

impl std::fmt::Debug for HttpGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpGrant")
            .field("binding", &self.binding)
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

impl HttpGrant {
    /// The grant of `spec` (already checked) for `binding`.
    pub fn new(
        binding: &str,
        spec: &HttpSpec,
        secrets: Arc<dyn SecretSource>,
        metrics: Option<Arc<CapabilityMetrics>>,
    ) -> anyhow::Result<Self> {
        gantry_kube::tls::install_crypto_provider();
        let origins = spec.origins().map_err(anyhow::Error::msg)?;
        let secret_headers = spec
            .secret_headers
            .iter()
            .map(|h| {
                Ok(SecretHeader {
                    name: HeaderName::from_bytes(h.header.to_ascii_lowercase().as_bytes())?,
                    secret: h.secret.clone(),
                    key: h.key.clone(),
                    origins: h
                        .origins
                        .iter()
                        .map(|o| Origin::parse_entry(o))
                        .collect::<Result<_, _>>()
                        .map_err(anyhow::Error::msg)?,
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let client = reqwest::Client::builder()
            .user_agent(concat!("gantry/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        Ok(Self {
            binding: binding.to_string(),
            origins,
            timeout: spec.timeout(),
            request_cap: spec.request_cap(),
            response_cap: spec.response_cap(),
            max_requests: spec.requests_per_call(),
            secret_headers,
            secrets,
            client,
            metrics,
        })
    }

    fn allowed(&self, url: &Url) -> Result<Origin, Error> {
        let origin = Origin::of(url).map_err(|e| Error::NotAllowed(format!("{url}: {e}")))?;
        if self.origins.contains(&origin) {
            return Ok(origin);
        }
        let allowed: Vec<String> = self.origins.iter().map(Origin::label).collect();
        Err(Error::NotAllowed(format!(
            "{origin} is not in the binding's allow list ({})",
            allowed.join(", ")
        )))
    }

    fn is_secret(&self, name: &HeaderName) -> bool {
        self.secret_headers.iter().any(|h| h.name == *name)
    }

    /// The plugin's headers, checked: no reserved or Secret-filled names.
    fn plugin_headers(&self, headers: &[(String, String)]) -> Result<HeaderMap, Error> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.to_ascii_lowercase().as_bytes())
                .map_err(|_| Error::InvalidRequest(format!("{name:?} is not a header name")))?;
            if RESERVED_HEADERS.contains(&name.as_str()) || self.is_secret(&name) {
                return Err(Error::InvalidRequest(format!(
                    "header {name} is set by the host, not the plugin"
                )));
            }
            let value = HeaderValue::from_str(value).map_err(|_| {
                Error::InvalidRequest(format!("the value of header {name} is not valid"))
            })?;
            map.append(name, value);
        }
        Ok(map)
    }

    /// The Secret headers for `origin`, marked sensitive.
    async fn secret_headers(&self, origin: &Origin, map: &mut HeaderMap) -> Result<(), Error> {
        for header in &self.secret_headers {
            if !header.origins.is_empty() && !header.origins.contains(origin) {
                continue;
            }
            let value = self
                .secrets
                .value(&header.secret, &header.key)
                .await
                .map_err(|e| Error::Host(format!("header {}: {e}", header.name)))?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                Error::Host(format!(
                    "header {}: Secret {} key {} is not a valid header value",
                    header.name, header.secret, header.key
                ))
            })?;
            value.set_sensitive(true);
            map.insert(header.name.clone(), value);
        }
        Ok(())
    }
}

/// What one call has used of its grant.
#[derive(Debug)]
pub struct HttpCall {
    /// Requests sent (redirect hops included).
    pub sent: u32,
    /// When the call's deadline passes.
    pub deadline: Instant,
    /// A shadow run: only GET is sent.
    pub shadow: bool,
    /// A shadow run refused a request (the answer says nothing of the
    /// version).
    pub shadow_refused: bool,
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Head => "HEAD",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Patch => "PATCH",
        Method::Delete => "DELETE",
    }
}

fn error_kind(error: &Error) -> &'static str {
    match error {
        Error::NotGranted(_) => "not_granted",
        Error::NotAllowed(_) => "not_allowed",
        Error::ShadowRun(_) => "shadow_run",
        Error::TooManyRequests(_) => "too_many_requests",
        Error::TooLarge(_) => "too_large",
        Error::Timeout(_) => "timeout",
        Error::InvalidRequest(_) => "invalid_request",
        Error::Transport(_) => "transport",
        Error::Host(_) => "host",
    }
}

/// The method after a redirect with `status`: 303 turns everything but
/// HEAD into GET, 301 and 302 turn POST into GET (as browsers do), 307 and
/// 308 keep it.
fn redirected_method(status: StatusCode, method: Method) -> Method {
    match (status.as_u16(), method) {
        (303, Method::Head) => Method::Head,
        (303, _) | (301 | 302, Method::Post) => Method::Get,
        _ => method,
    }
}

/// Send `request` under `grant` (none: not granted) for a call in `call`.
pub async fn send(
    grant: Option<&HttpGrant>,
    call: &mut HttpCall,
    request: Request,
) -> Result<Response, Error> {
    let Some(grant) = grant else {
        return Err(Error::NotGranted(
            "outbound HTTP is not granted: the binding has no capabilities.http".into(),
        ));
    };
    let method = request.method;
    let result = send_granted(grant, call, request).await;
    if let (Err(error), Some(metrics)) = (&result, &grant.metrics)
        && !matches!(
            error,
            Error::Timeout(_) | Error::Transport(_) | Error::TooLarge(_)
        )
    {
        // Refused before anything was sent; sent ones are counted per hop.
        metrics.http_refused(&grant.binding, method_name(method), error_kind(error));
    }
    result
}

async fn send_granted(
    grant: &HttpGrant,
    call: &mut HttpCall,
    request: Request,
) -> Result<Response, Error> {
    let mut method = request.method;
    if call.shadow && method != Method::Get {
        call.shadow_refused = true;
        return Err(Error::ShadowRun(format!(
            "a shadow run sends GET only; this {} was not sent",
            method_name(method)
        )));
    }
    let mut url = Url::parse(&request.url)
        .map_err(|e| Error::InvalidRequest(format!("{:?} is not a URL: {e}", request.url)))?;
    if request.body.len() > grant.request_cap {
        return Err(Error::TooLarge(format!(
            "the request body of {} bytes is over the cap of {} bytes",
            request.body.len(),
            grant.request_cap
        )));
    }
    let headers = grant.plugin_headers(&request.headers)?;
    let mut body = request.body;
    for hop in 0..=MAX_REDIRECTS {
        let origin = grant.allowed(&url)?;
        if call.sent >= grant.max_requests {
            return Err(Error::TooManyRequests(format!(
                "this call has sent its {} requests (maxRequestsPerCall)",
                grant.max_requests
            )));
        }
        let remaining = call.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(Error::Timeout("the call's deadline has passed".into()));
        }
        let mut hop_headers = headers.clone();
        grant.secret_headers(&origin, &mut hop_headers).await?;
        call.sent += 1;
        let span = tracing::info_span!(
            "http_request",
            binding = %grant.binding,
            method = method_name(method),
            origin = %origin,
            path = url.path(),
            status = tracing::field::Empty,
        );
        let started = Instant::now();
        // A request that would outlast the call is cut by the call's own
        // deadline timer, which ends the call (`Timeout`); a shorter
        // `timeoutMs` is the plugin's to handle.
        let timeout = (grant.timeout < remaining).then_some(grant.timeout);
        let outcome = exchange(grant, method, &url, hop_headers, &body, timeout)
            .instrument(span.clone())
            .await;
        let label = match &outcome {
            Ok(r) => {
                span.record("status", r.status);
                format!("{}xx", r.status / 100)
            }
            Err(e) => error_kind(e).to_string(),
        };
        if let Some(metrics) = &grant.metrics {
            metrics.http_request(
                &grant.binding,
                method_name(method),
                &origin.label(),
                &label,
                started.elapsed(),
            );
        }
        let response = outcome?;
        let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::OK);
        let location = response
            .headers
            .iter()
            .find(|(n, _)| n == "location")
            .map(|(_, v)| v.clone());
        match location {
            Some(location) if status.is_redirection() && status != StatusCode::NOT_MODIFIED => {
                if hop == MAX_REDIRECTS {
                    break;
                }
                url = url.join(&location).map_err(|e| {
                    Error::Transport(format!("redirect to an invalid Location {location:?}: {e}"))
                })?;
                grant.allowed(&url).map_err(|e| match e {
                    Error::NotAllowed(m) => Error::NotAllowed(format!("redirect refused: {m}")),
                    other => other,
                })?;
                method = redirected_method(status, method);
                if call.shadow && method != Method::Get {
                    call.shadow_refused = true;
                    return Err(Error::ShadowRun("a shadow run sends GET only".into()));
                }
                if method == Method::Get || method == Method::Head {
                    body.clear();
                }
            }
            _ => return Ok(response),
        }
    }
    Err(Error::Transport(format!(
        "more than {MAX_REDIRECTS} redirects"
    )))
}

/// One exchange, body read up to the cap, all within `timeout` if any.
async fn exchange(
    grant: &HttpGrant,
    method: Method,
    url: &Url,
    headers: HeaderMap,
    body: &[u8],
    timeout: Option<Duration>,
) -> Result<Response, Error> {
    let method =
        reqwest::Method::from_bytes(method_name(method).as_bytes()).expect("a standard method");
    let request = grant
        .client
        .request(method, url.clone())
        .headers(headers)
        .body(body.to_vec());
    let cap = grant.response_cap;
    let work = async {
        let mut response = request.send().await.map_err(transport)?;
        if response.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_large(cap));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > cap {
                return Err(too_large(cap));
            }
            body.extend_from_slice(&chunk);
        }
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        Ok(Response {
            status: response.status().as_u16(),
            headers,
            body,
        })
    };
    let Some(timeout) = timeout else {
        return work.await;
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Err(Error::Timeout(format!(
                "no response within {} ms (timeoutMs)",
                timeout.as_millis()
            )))
        })
}

fn too_large(cap: usize) -> Error {
    Error::TooLarge(format!("the response body is over the cap of {cap} bytes"))
}

/// The error chain without the URL's query (which may hold a token the
/// plugin put there) and without any header.
#[allow(clippy::needless_pass_by_value)] // used as `map_err(transport)`
fn transport(e: reqwest::Error) -> Error {
    let e = e.without_url();
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    Error::Transport(message)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::capability::secrets::StaticSecrets;

    #[test]
    fn plugins_cannot_set_reserved_or_secret_headers() {
        let spec: HttpSpec = serde_yaml::from_str(
            "allow: [\"http://127.0.0.1:1\"]\nsecretHeaders: [{header: X-Api-Key, secret: s, key: k}]",
        )
        .unwrap();
        let secrets = Arc::new(StaticSecrets(HashMap::new()));
        let grant = HttpGrant::new("b", &spec, secrets, None).unwrap();
        for name in [
            "x-api-key",
            "X-API-KEY",
            "Host",
            "content-length",
            "Connection",
        ] {
            let result = grant.plugin_headers(&[(name.to_string(), "v".to_string())]);
            assert!(
                matches!(result, Err(Error::InvalidRequest(_))),
                "{name}: {result:?}"
            );
        }
        let fine = grant.plugin_headers(&[("accept".into(), "application/json".into())]);
        assert_eq!(fine.unwrap().len(), 1);
    }

    #[test]
    fn redirects_change_the_method_as_browsers_do() {
        let see_other = StatusCode::SEE_OTHER;
        assert_eq!(redirected_method(see_other, Method::Delete), Method::Get);
        assert_eq!(redirected_method(see_other, Method::Head), Method::Head);
        assert_eq!(
            redirected_method(StatusCode::FOUND, Method::Post),
            Method::Get
        );
        assert_eq!(
            redirected_method(StatusCode::FOUND, Method::Delete),
            Method::Delete
        );
        assert_eq!(
            redirected_method(StatusCode::TEMPORARY_REDIRECT, Method::Post),
            Method::Post
        );
    }
}
