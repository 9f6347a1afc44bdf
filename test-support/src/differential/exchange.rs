//! One recorded HTTP exchange, as a line of a JSON Lines file.

use std::fmt::Write as _; // `write!` to a `String` cannot fail.
use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::Context;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A body: JSON when it parses as JSON, else text, else base64 bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Payload {
    /// No body.
    #[default]
    Empty,
    /// A JSON document.
    Json(Value),
    /// UTF-8 text that is not JSON (YAML, plain text).
    Text(String),
    /// Anything else (protobuf), base64.
    Binary(String),
}

impl Payload {
    /// Classify `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Payload {
        if bytes.is_empty() {
            return Payload::Empty;
        }
        if let Ok(value) = serde_json::from_slice(bytes) {
            return Payload::Json(value);
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Payload::Text(text.to_string()),
            Err(_) => Payload::Binary(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    /// The bytes to send.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Payload::Empty => Vec::new(),
            Payload::Json(value) => serde_json::to_vec(value).expect("JSON serializes"),
            Payload::Text(text) => text.clone().into_bytes(),
            Payload::Binary(b64) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default(),
        }
    }

    /// The JSON document, if it is one.
    pub fn json(&self) -> Option<&Value> {
        match self {
            Payload::Json(value) => Some(value),
            _ => None,
        }
    }
}

/// A request and the answer it got.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exchange {
    /// Order of arrival at the proxy: replay sends requests in this order.
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// URL query, without `?`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Request `Content-Type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Request `Accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<String>,
    /// Request `User-Agent` (for the reader: which client sent it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// Request body.
    #[serde(default)]
    pub body: Payload,
    /// A watch: the response is a stream, of which `events` holds the start.
    #[serde(default)]
    pub watch: bool,
    /// Response status code.
    pub status: u16,
    /// Response `Content-Type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_content_type: Option<String>,
    /// Response body (empty for watches).
    #[serde(default)]
    pub response_body: Payload,
    /// The first events of a watch, as sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Value>,
}

impl Exchange {
    /// The value of query parameter `name`, percent-decoded.
    pub fn query_param(&self, name: &str) -> Option<String> {
        query_pairs(self.query.as_deref()?)
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }
}

/// Whether a query asks for a watch.
pub fn is_watch(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        query_pairs(q)
            .iter()
            .any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    })
}

/// The decoded `key=value` pairs of a query.
pub fn query_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Encode `key=value` pairs as a query.
pub fn encode_query(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(s.get(i + 1..i + 3).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Append-only JSON Lines file of exchanges.
pub struct Recording {
    file: std::sync::Mutex<std::fs::File>,
}

impl Recording {
    /// Create (or truncate) the file at `path`.
    pub fn create(path: &Path) -> anyhow::Result<Recording> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::File::create(path).with_context(|| format!("{}", path.display()))?;
        Ok(Recording {
            file: std::sync::Mutex::new(file),
        })
    }

    /// Append one exchange.
    pub fn append(&self, exchange: &Exchange) {
        let mut line = serde_json::to_vec(exchange).expect("exchange serializes");
        line.push(b'\n');
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = file.write_all(&line) {
            eprintln!("recording: {e}");
        }
    }
}

/// The exchanges of a JSON Lines file, in order of arrival.
pub fn read(path: &Path) -> anyhow::Result<Vec<Exchange>> {
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let mut exchanges = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        exchanges.push(
            serde_json::from_str(&line)
                .with_context(|| format!("{} line {}", path.display(), n + 1))?,
        );
    }
    exchanges.sort_by_key(|e: &Exchange| e.seq);
    Ok(exchanges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_round_trip() {
        let q = "fieldSelector=metadata.name%3Dw1&watch=true&labelSelector=a+in+(b)";
        let pairs = query_pairs(q);
        assert_eq!(
            pairs[0],
            ("fieldSelector".into(), "metadata.name=w1".into())
        );
        assert_eq!(pairs[2].1, "a in (b)");
        assert!(is_watch(Some(q)));
        assert_eq!(query_pairs(&encode_query(&pairs)), pairs);
    }

    #[test]
    fn payloads_classify() {
        assert_eq!(Payload::from_bytes(b""), Payload::Empty);
        assert!(matches!(
            Payload::from_bytes(b"{\"a\":1}"),
            Payload::Json(_)
        ));
        assert!(matches!(Payload::from_bytes(b"a: 1\n"), Payload::Text(_)));
        let binary = Payload::from_bytes(&[0x6b, 0x38, 0xff, 0x00]);
        assert_eq!(binary.to_bytes(), vec![0x6b, 0x38, 0xff, 0x00]);
    }
}
