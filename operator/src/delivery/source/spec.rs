//! The `source` field of `binding.yaml`.

use serde::{Deserialize, Serialize};

/// Where the component comes from, as written in `binding.yaml`:
///
/// ```yaml
/// source:
///   url: https://plugins.example.com/memcached-1.2.0.wasm   # or:
///   oci: oci://registry.example.com/plugins/memcached:1.2.0 # or @sha256:<manifest digest>
///   insecure: false   # true: plain http to a host that is not loopback
/// sha256: <component digest>  # required with url; optional with oci
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSpec {
    /// An `https://` (or loopback / insecure `http://`) URL of the raw component.
    #[serde(default)]
    pub url: Option<String>,
    /// An OCI artifact: `oci://host[:port]/repo:tag` or `oci://host/repo@sha256:<hex>`.
    #[serde(default)]
    pub oci: Option<String>,
    /// Allow plain HTTP to a host that is not a loopback address.
    #[serde(default)]
    pub insecure: bool,
}

/// A checked source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    /// Download the raw component over HTTP(S).
    Url {
        /// The URL.
        url: String,
        /// Plain HTTP to a non-loopback host allowed.
        insecure: bool,
    },
    /// Pull a Wasm OCI artifact.
    Oci {
        /// `host/repo:tag` or `host/repo@sha256:…` (without `oci://`).
        reference: String,
        /// Registry speaks plain HTTP (always so for loopback hosts).
        insecure: bool,
    },
}

impl std::fmt::Display for PluginSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginSource::Url { url, .. } => f.write_str(url),
            PluginSource::Oci { reference, .. } => write!(f, "oci://{reference}"),
        }
    }
}

/// Whether `host` (no port, IPv6 without brackets) is a loopback address.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host of a `host[:port]` authority.
pub(crate) fn authority_host(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

impl SourceSpec {
    /// Check the spec. `pinned`: whether `binding.yaml` has `sha256`.
    /// Err is (field, message).
    pub fn check(&self, pinned: bool) -> Result<PluginSource, (String, String)> {
        let err = |field: &str, message: String| Err((format!("source.{field}"), message));
        match (&self.url, &self.oci) {
            (Some(_), Some(_)) | (None, None) => {
                Err(("source".into(), "set exactly one of url and oci".into()))
            }
            (Some(url), None) => {
                let parsed = match reqwest::Url::parse(url) {
                    Ok(u) => u,
                    Err(e) => return err("url", format!("{url:?} is not a URL: {e}")),
                };
                let host = parsed.host_str().unwrap_or_default().to_string();
                match parsed.scheme() {
                    "https" => {}
                    "http" if self.insecure || is_loopback_host(&host) => {}
                    "http" => {
                        return err(
                            "url",
                            format!(
                                "plain http to {host} is refused: use https, or set source.insecure: true"
                            ),
                        );
                    }
                    other => return err("url", format!("scheme {other:?} is not http(s)")),
                }
                if host.is_empty() {
                    return err("url", format!("{url:?} has no host"));
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return err(
                        "url",
                        "credentials in the URL are refused (they would be stored in the ConfigMap)"
                            .into(),
                    );
                }
                if !pinned {
                    return Err((
                        "sha256".into(),
                        "a url source needs a sha256 pin of the component".into(),
                    ));
                }
                Ok(PluginSource::Url {
                    url: url.clone(),
                    insecure: self.insecure,
                })
            }
            (None, Some(oci)) => {
                let Some(reference) = oci.strip_prefix("oci://") else {
                    return err("oci", format!("{oci:?} must start with oci://"));
                };
                let Some((authority, _)) = reference.split_once('/') else {
                    return err(
                        "oci",
                        format!("{oci:?} needs a registry host and a repository"),
                    );
                };
                let explicit_host =
                    authority.contains('.') || authority.contains(':') || authority == "localhost";
                if !explicit_host {
                    return err(
                        "oci",
                        format!(
                            "{oci:?} must name its registry host (like oci://ghcr.io/org/repo:tag)"
                        ),
                    );
                }
                let parsed: oci_client::Reference = match reference.parse() {
                    Ok(r) => r,
                    Err(e) => return err("oci", format!("{oci:?} is not an OCI reference: {e}")),
                };
                let has_tag = reference
                    .rsplit('/')
                    .next()
                    .is_some_and(|last| last.split('@').next().is_some_and(|n| n.contains(':')));
                if parsed.digest().is_none() && !has_tag {
                    return err("oci", format!("{oci:?} needs a :tag or an @sha256: digest"));
                }
                if let Some(digest) = parsed.digest()
                    && !digest.starts_with("sha256:")
                {
                    return err("oci", format!("digest {digest} is not sha256"));
                }
                Ok(PluginSource::Oci {
                    reference: reference.to_string(),
                    insecure: self.insecure || is_loopback_host(authority_host(authority)),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str, insecure: bool) -> SourceSpec {
        SourceSpec {
            url: Some(u.into()),
            oci: None,
            insecure,
        }
    }

    fn oci(r: &str) -> SourceSpec {
        SourceSpec {
            url: None,
            oci: Some(r.into()),
            insecure: false,
        }
    }

    #[test]
    fn urls_need_https_or_loopback_and_a_pin() {
        assert!(url("https://example.com/p.wasm", false).check(true).is_ok());
        assert!(
            url("http://127.0.0.1:8080/p.wasm", false)
                .check(true)
                .is_ok()
        );
        assert!(url("http://[::1]:8080/p.wasm", false).check(true).is_ok());
        assert!(url("http://localhost/p.wasm", false).check(true).is_ok());
        let (field, msg) = url("http://example.com/p.wasm", false)
            .check(true)
            .unwrap_err();
        assert_eq!(field, "source.url");
        assert!(msg.contains("insecure"), "{msg}");
        assert!(url("http://example.com/p.wasm", true).check(true).is_ok());
        assert_eq!(
            url("https://example.com/p.wasm", false)
                .check(false)
                .unwrap_err()
                .0,
            "sha256"
        );
        assert!(url("ftp://example.com/p", false).check(true).is_err());
        assert!(url("https://u:p@example.com/p", false).check(true).is_err());
    }

    #[test]
    fn oci_references_need_a_host_and_a_tag_or_digest() {
        let ok = oci("oci://127.0.0.1:5000/plugins/memcached:v1")
            .check(false)
            .unwrap();
        assert_eq!(
            ok,
            PluginSource::Oci {
                reference: "127.0.0.1:5000/plugins/memcached:v1".into(),
                insecure: true
            }
        );
        let digest = format!("oci://ghcr.io/org/p@sha256:{}", "a".repeat(64));
        assert_eq!(
            oci(&digest).check(false).unwrap(),
            PluginSource::Oci {
                reference: digest.trim_start_matches("oci://").into(),
                insecure: false
            }
        );
        for bad in [
            "ghcr.io/org/p:v1",
            "oci://memcached:v1",
            "oci://library/memcached:v1",
            "oci://ghcr.io/org/p",
            "oci://ghcr.io/org/P:v1",
        ] {
            assert!(oci(bad).check(false).is_err(), "{bad} accepted");
        }
        let both = SourceSpec {
            url: Some("https://a/b".into()),
            oci: Some("oci://a.b/c:d".into()),
            insecure: false,
        };
        assert_eq!(both.check(true).unwrap_err().0, "source");
    }
}
