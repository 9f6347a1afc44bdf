//! Parsed resource requests: path, verb, query parameters.

use std::sync::Arc;

use bytes::Bytes;
use hyper::{HeaderMap, Method};

use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceInfo;

/// Query parameters, in order.
#[derive(Clone, Debug, Default)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Parses a URL query string.
    pub fn parse(q: Option<&str>) -> Query {
        Query(
            q.map(|q| serde_urlencoded::from_str(q).unwrap_or_default())
                .unwrap_or_default(),
        )
    }

    /// First value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `key` is `true`/`1`.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }

    /// All values of `key`.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// The API verb of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// GET one object.
    Get,
    /// GET a collection.
    List,
    /// GET a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE one object.
    Delete,
    /// DELETE a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb of `method` on an object (`named`) or collection path.
    pub fn of(method: &Method, named: bool, query: &Query) -> Option<Verb> {
        Some(match (method.as_str(), named) {
            ("GET", _) if query.flag("watch") => Verb::Watch,
            ("GET", true) => Verb::Get,
            ("GET", false) => Verb::List,
            ("POST", false) => Verb::Create,
            ("PUT", true) => Verb::Update,
            ("PATCH", true) => Verb::Patch,
            ("DELETE", true) => Verb::Delete,
            ("DELETE", false) => Verb::DeleteCollection,
            _ => return None,
        })
    }

    /// kube's verb name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether the verb mutates.
    pub fn is_write(self) -> bool {
        !matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }
}

/// Path components of a resource request.
#[derive(Debug, PartialEq)]
pub struct ResourcePath {
    /// Namespace, when the path has one.
    pub namespace: Option<String>,
    /// Resource plural.
    pub resource: String,
    /// Object name.
    pub name: Option<String>,
    /// Subresource.
    pub subresource: Option<String>,
}

/// Parses `[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]` as kube does
/// (`namespaces/{ns}/status` and `/finalize` are subresources of the namespace).
pub fn parse_resource_path(rest: &[&str]) -> Option<ResourcePath> {
    let (namespace, rest) =
        if rest.len() > 2 && rest[0] == "namespaces" && !matches!(rest[2], "status" | "finalize") {
            (Some(rest[1].to_string()), &rest[2..])
        } else {
            (None, rest)
        };
    if rest.is_empty() || rest.len() > 3 {
        return None;
    }
    Some(ResourcePath {
        namespace,
        resource: rest[0].to_string(),
        name: rest.get(1).map(ToString::to_string),
        subresource: rest.get(2).map(ToString::to_string),
    })
}

/// A request for a resource, ready for a handler.
pub struct ResourceRequest {
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Name from the path.
    pub name: Option<String>,
    /// Subresource from the path.
    pub subresource: Option<String>,
    /// Query parameters.
    pub query: Query,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    /// The Accept header.
    pub accept: String,
    /// The verb.
    pub verb: Verb,
    /// Who is asking (for admission webhooks).
    pub user: crate::admission::UserInfo,
}

impl ResourceRequest {
    /// `dryRun=All`.
    pub fn dry_run(&self) -> bool {
        self.query.all("dryRun").contains(&"All")
    }

    /// Validates `dryRun` values.
    pub fn check_dry_run(&self) -> ApiResult<()> {
        for v in self.query.all("dryRun") {
            if v != "All" {
                return Err(ApiError::bad_request(format!(
                    "Invalid dryRun value {v:?}: supported values are \"All\""
                )));
            }
        }
        Ok(())
    }

    /// Validates `?fieldManager=` as kube does (length, printable characters).
    pub fn check_field_manager(&self) -> ApiResult<()> {
        let options = match self.verb {
            Verb::Create => "CreateOptions",
            Verb::Update => "UpdateOptions",
            Verb::Patch => "PatchOptions",
            _ => return Ok(()),
        };
        match self.query.get("fieldManager") {
            Some(m) => crate::objects::field_manager_name::validate(m, options),
            None => Ok(()),
        }
    }

    /// The field manager: `?fieldManager=`, else derived from the User-Agent as kube does
    /// (the part before the first `/`).
    pub fn field_manager(&self) -> String {
        if let Some(m) = self.query.get("fieldManager").filter(|m| !m.is_empty()) {
            return m.to_string();
        }
        let ua = self
            .headers
            .get(hyper::header::USER_AGENT)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("unknown");
        ua.split('/')
            .next()
            .unwrap_or(ua)
            .chars()
            .take(128)
            .collect()
    }

    /// The Content-Type, lower-cased, without parameters.
    pub fn content_type(&self) -> String {
        self.headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    }

    /// Storage key of the named object.
    pub fn key(&self) -> String {
        self.info.key(
            self.namespace.as_deref(),
            self.name.as_deref().unwrap_or(""),
        )
    }

    /// The name (handlers for named verbs only).
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// `resource[.group][/subresource]`, for the write counter.
    pub fn counted_resource(&self) -> String {
        let mut s = crate::error::qualified(&self.info.group, &self.info.plural);
        if let Some(sub) = &self.subresource {
            s.push('/');
            s.push_str(sub);
        }
        s
    }

    /// Whether metadata only (`as=PartialObjectMetadata[List]`) was asked for.
    pub fn wants_metadata(&self) -> bool {
        self.accept
            .split(',')
            .next()
            .is_some_and(|first| first.contains("as=PartialObjectMetadata"))
    }

    /// Whether a Table was asked for.
    pub fn wants_table(&self) -> bool {
        self.accept
            .split(',')
            .next()
            .is_some_and(|first| first.contains("as=Table"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        let p = parse_resource_path(&["namespaces", "ns", "configmaps", "x"]).unwrap();
        assert_eq!(
            (
                p.namespace.as_deref(),
                p.resource.as_str(),
                p.name.as_deref()
            ),
            (Some("ns"), "configmaps", Some("x"))
        );
        let p = parse_resource_path(&["namespaces", "ns", "status"]).unwrap();
        assert_eq!(
            (p.namespace, p.resource.as_str(), p.subresource.as_deref()),
            (None, "namespaces", Some("status"))
        );
        let p = parse_resource_path(&["namespaces", "ns"]).unwrap();
        assert_eq!(
            (p.resource.as_str(), p.name.as_deref()),
            ("namespaces", Some("ns"))
        );
        assert!(parse_resource_path(&["a", "b", "c", "d"]).is_none());
    }
}
