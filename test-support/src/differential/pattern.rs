//! The group an exchange is reported under: its verb and its path with
//! namespace and name replaced by placeholders, e.g.
//! `get /api/v1/namespaces/{ns}/configmaps/{name}`.

use super::exchange::Exchange;

/// `VERB PATTERN`, the key of a report group.
pub fn group_key(exchange: &Exchange) -> String {
    format!("{} {}", verb(exchange), path_pattern(&exchange.path))
}

/// Kubernetes' verb for the request: `get`, `list`, `watch`, `create`,
/// `update`, `delete`, `deletecollection`, and for PATCH its kind
/// (`patch-json`, `patch-merge`, `patch-strategic`, `apply`).
pub fn verb(exchange: &Exchange) -> String {
    let named = names_object(&exchange.path);
    let verb = match exchange.method.as_str() {
        "GET" if exchange.watch => "watch",
        "GET" if named || !is_resource_path(&exchange.path) => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "DELETE" if named => "delete",
        "DELETE" => "deletecollection",
        "PATCH" => match exchange.content_type.as_deref().unwrap_or("") {
            t if t.starts_with("application/json-patch+json") => "patch-json",
            t if t.starts_with("application/merge-patch+json") => "patch-merge",
            t if t.starts_with("application/strategic-merge-patch+json") => "patch-strategic",
            t if t.starts_with("application/apply-patch") => "apply",
            _ => "patch",
        },
        other => return other.to_ascii_lowercase(),
    };
    verb.to_string()
}

/// The resource part of an API path (after `/api/v1` or
/// `/apis/GROUP/VERSION`), or None for other paths.
fn resource_segments(path: &str) -> Option<(usize, Vec<&str>)> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let prefix = match *segments.first()? {
        "api" => 2,
        "apis" => 3,
        _ => return None,
    };
    (segments.len() > prefix).then_some((prefix, segments))
}

fn is_resource_path(path: &str) -> bool {
    resource_segments(path).is_some()
}

/// Where the resource part names one object (and maybe a subresource).
fn names_object(path: &str) -> bool {
    let Some((prefix, segments)) = resource_segments(path) else {
        return false;
    };
    let rest = &segments[prefix..];
    match rest {
        ["namespaces", _] | ["namespaces", _, "status" | "finalize"] => true,
        ["namespaces", _, _resource, ..] => rest.len() >= 4,
        _ => rest.len() >= 2,
    }
}

/// The path with namespaces and names replaced by `{ns}` and `{name}`.
pub fn path_pattern(path: &str) -> String {
    let Some((prefix, segments)) = resource_segments(path) else {
        return path.to_string();
    };
    let mut out: Vec<&str> = segments[..prefix].to_vec();
    let rest = &segments[prefix..];
    match rest {
        ["namespaces", _, sub @ ("status" | "finalize")] => {
            out.extend(["namespaces", "{name}", sub]);
        }
        ["namespaces", _ns, resource, more @ ..] => {
            out.extend(["namespaces", "{ns}", resource]);
            if let [_name, sub @ ..] = more {
                out.push("{name}");
                out.extend(sub);
            }
        }
        [resource, more @ ..] => {
            out.push(resource);
            if let [_name, sub @ ..] = more {
                out.push("{name}");
                out.extend(sub);
            }
        }
        [] => {}
    }
    format!("/{}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(method: &str, path: &str, query: Option<&str>) -> Exchange {
        serde_json::from_value(serde_json::json!({
            "seq": 0, "method": method, "path": path, "query": query, "status": 200,
            "watch": super::super::exchange::is_watch(query),
        }))
        .unwrap()
    }

    #[test]
    fn patterns() {
        let cases = [
            (
                "GET",
                "/api/v1/namespaces/a/configmaps/b",
                None,
                "get /api/v1/namespaces/{ns}/configmaps/{name}",
            ),
            (
                "GET",
                "/api/v1/namespaces/a/configmaps",
                None,
                "list /api/v1/namespaces/{ns}/configmaps",
            ),
            (
                "GET",
                "/api/v1/namespaces/a/pods",
                Some("watch=true"),
                "watch /api/v1/namespaces/{ns}/pods",
            ),
            (
                "GET",
                "/api/v1/namespaces/a",
                None,
                "get /api/v1/namespaces/{name}",
            ),
            (
                "PUT",
                "/api/v1/namespaces/a/finalize",
                None,
                "update /api/v1/namespaces/{name}/finalize",
            ),
            ("GET", "/api/v1/namespaces", None, "list /api/v1/namespaces"),
            (
                "DELETE",
                "/apis/example.com/v1/widgets",
                None,
                "deletecollection /apis/example.com/v1/widgets",
            ),
            (
                "PUT",
                "/apis/apps/v1/namespaces/a/deployments/d/scale",
                None,
                "update /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale",
            ),
            ("GET", "/apis/apps/v1", None, "get /apis/apps/v1"),
            ("GET", "/openapi/v3/api/v1", None, "get /openapi/v3/api/v1"),
            (
                "POST",
                "/api/v1/namespaces",
                None,
                "create /api/v1/namespaces",
            ),
        ];
        for (method, path, query, want) in cases {
            assert_eq!(
                group_key(&exchange(method, path, query)),
                want,
                "{method} {path}"
            );
        }
    }
}
