//! Who may use the server: a bearer token on every request, and no requests from
//! web pages.
//!
//! The server listens on loopback for `gantry dev`, where any web page the user opens
//! can send it requests. The token stops cross-site requests (a page cannot add an
//! `Authorization` header to a cross-origin request without a CORS preflight, which
//! is never granted). The Host and Origin checks stop DNS rebinding (a page whose
//! own name resolves to 127.0.0.1) and cross-site requests when no token is set.

use std::net::{IpAddr, SocketAddr};

use axum::body::Body;
use base64::Engine;
use hyper::Request;
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::error::{ApiError, Details};

/// A fresh random bearer token (256 bits, base64url).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Paths any client may GET without the token, as kube's `system:public-info-viewer`.
pub fn is_public_info(req: &Request<Body>) -> bool {
    let path = req.uri().path().trim_end_matches('/');
    req.method() == hyper::Method::GET
        && (path == "/version"
            || ["/healthz", "/livez", "/readyz"]
                .iter()
                .any(|p| path == *p || path.starts_with(&format!("{p}/"))))
}

/// Refuses requests from web pages (403). Who sent a request is
/// [`crate::auth::authenticate`]'s question.
pub fn check(listen: SocketAddr, req: &Request<Body>) -> Result<(), ApiError> {
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| {
            req.uri()
                .authority()
                .map(axum::http::uri::Authority::as_str)
        });
    if let Some(host) = host
        && !is_local_host(host, listen)
    {
        return Err(forbidden(&format!(
            "Host {host:?} is neither loopback nor the address the server listens on; requests from web pages are refused"
        )));
    }
    if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let host = origin.split_once("://").map_or("", |(_, h)| h);
        if !is_local_host(host, listen) {
            return Err(forbidden(&format!(
                "Origin {origin:?} is not local; requests from web pages are refused"
            )));
        }
    }
    Ok(())
}

fn forbidden(message: &str) -> ApiError {
    ApiError::Forbidden {
        message: format!("forbidden: {message}"),
        details: Details::default(),
    }
}

/// The token of `Authorization: Bearer TOKEN` (scheme case-insensitive, as
/// kube), if the request has one.
pub fn bearer_token(req: &Request<Body>) -> Option<&str> {
    let value = req
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, sent) = value.trim().split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !sent.is_empty()).then_some(sent)
}

/// Whether a token sent equals the expected one, compared in constant time.
pub fn tokens_equal(sent: &str, expected: &str) -> bool {
    bool::from(sent.as_bytes().ct_eq(expected.as_bytes()))
}

/// Whether `host` (a Host header or an Origin's `host[:port]`) names this machine's
/// loopback or the listen address: `localhost`, a loopback IP, the listen IP, or any
/// IP literal when listening on all interfaces. Names other than `localhost` are
/// refused: a web page can make such a name resolve to this machine.
pub fn is_local_host(host: &str, listen: SocketAddr) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, _)) => ip,
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                name
            } else {
                host
            }
        }),
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip == listen.ip() || listen.ip().is_unspecified(),
        Err(_) => false,
    }
}

/// The warning printed when the server listens beyond loopback (None on
/// loopback); `tls` says whether it serves HTTPS.
pub fn exposure_warning(listen: SocketAddr, tls: bool) -> Option<String> {
    (!listen.ip().is_loopback()).then(|| {
        let traffic = if tls {
            ""
        } else {
            ", and traffic (token included) is plain HTTP"
        };
        format!(
            "WARNING: the API server listens on {listen}, which is not loopback: anyone who can \
             reach it and has the token is cluster admin{traffic}. Use --listen 127.0.0.1:PORT \
             unless you mean it."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_hosts() {
        let lo: SocketAddr = "127.0.0.1:6443".parse().unwrap();
        for ok in [
            "127.0.0.1:6443",
            "127.0.0.1",
            "localhost:1",
            "LOCALHOST",
            "[::1]:80",
            "[::1]",
            "127.1.2.3:9",
        ] {
            assert!(is_local_host(ok, lo), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:6443",
            "127.0.0.1.nip.io:6443",
            "10.0.0.1:6443",
            "",
            "[::1",
            "localhost.evil.example",
        ] {
            assert!(!is_local_host(bad, lo), "{bad}");
        }
        let any: SocketAddr = "0.0.0.0:6443".parse().unwrap();
        assert!(is_local_host("192.168.1.5:6443", any));
        assert!(!is_local_host("myhost:6443", any));
        let one: SocketAddr = "192.168.1.5:6443".parse().unwrap();
        assert!(is_local_host("192.168.1.5:6443", one));
        assert!(!is_local_host("192.168.1.6:6443", one));
    }

    #[test]
    fn warning_only_beyond_loopback() {
        assert!(exposure_warning("127.0.0.1:0".parse().unwrap(), true).is_none());
        assert!(exposure_warning("[::1]:0".parse().unwrap(), false).is_none());
        let w = exposure_warning("0.0.0.0:6443".parse().unwrap(), true).unwrap();
        assert!(w.contains("not loopback"), "{w}");
        assert!(!w.contains("plain HTTP"), "HTTPS is not plain: {w}");
        let w = exposure_warning("0.0.0.0:6443".parse().unwrap(), false).unwrap();
        assert!(w.contains("plain HTTP"), "{w}");
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
    }
}
