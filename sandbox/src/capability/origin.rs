//! Origins (scheme, host, port): what an HTTP allow list holds and what
//! every request's URL is matched against, exactly.

use std::fmt;

use reqwest::Url;

/// An `http` or `https` origin with its port made explicit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of an absolute `http(s)` URL; `Err` says why there is none.
    pub fn of(url: &Url) -> Result<Self, String> {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(format!("scheme {scheme:?} is not http or https"));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| "the URL has no host".to_string())?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| "the URL has no port".to_string())?;
        Ok(Self {
            scheme: scheme.to_string(),
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Parse an allow-list entry: `scheme://host[:port]`, nothing else (no
    /// path, query, fragment or credentials).
    pub fn parse_entry(entry: &str) -> Result<Self, String> {
        let url = Url::parse(entry).map_err(|e| format!("{entry:?} is not a URL: {e}"))?;
        let origin = Self::of(&url).map_err(|e| format!("{entry:?}: {e}"))?;
        let bare = url.path() == "/"
            && url.query().is_none()
            && url.fragment().is_none()
            && url.username().is_empty()
            && url.password().is_none()
            && !entry.trim_end_matches('/').ends_with('?');
        if !bare {
            return Err(format!(
                "{entry:?} must be an origin only: scheme://host[:port], without path, query or credentials"
            ));
        }
        Ok(origin)
    }

    /// The origin as a label value and in messages: `https://host:443`.
    pub fn label(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(url: &str) -> Origin {
        Origin::of(&Url::parse(url).unwrap()).unwrap()
    }

    #[test]
    fn scheme_host_and_port_must_all_match() {
        let allowed = Origin::parse_entry("https://api.example.com").unwrap();
        assert_eq!(of("https://API.example.com/v1/x?y=1"), allowed);
        assert_eq!(of("https://api.example.com:443/"), allowed);
        assert_ne!(of("http://api.example.com/"), allowed, "scheme");
        assert_ne!(of("https://api.example.com:8443/"), allowed, "port");
        assert_ne!(of("https://api.example.com.evil.test/"), allowed, "host");
        assert_ne!(of("https://evil.test/@api.example.com"), allowed);
        let loopback = Origin::parse_entry("http://127.0.0.1:8080").unwrap();
        assert_eq!(loopback.label(), "http://127.0.0.1:8080");
        assert_ne!(of("http://127.0.0.1:8081/"), loopback);
    }

    #[test]
    fn entries_are_origins_only() {
        for bad in [
            "api.example.com",
            "ftp://api.example.com",
            "https://api.example.com/v1",
            "https://user:pw@api.example.com",
            "https://api.example.com?x=1",
            "https://api.example.com/#frag",
            "file:///etc/passwd",
        ] {
            assert!(Origin::parse_entry(bad).is_err(), "{bad}");
        }
        assert!(Origin::parse_entry("https://api.example.com/").is_ok());
    }
}
