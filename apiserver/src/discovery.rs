//! Discovery documents: /version, /api, /apis, /apis/{group}, resource lists.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::registry::{Registry, ResourceInfo};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-gantry",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/`.
pub fn root_paths() -> Value {
    json!({ "paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v2", "/openapi/v3", "/readyz", "/version"] })
}

/// `/api`; kube gives its address with the port.
pub fn core_versions(addr: std::net::SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{ "clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string() }]
    })
}

/// kube's version priority: GA > beta > alpha > other, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32, String) {
    let parse = |s: &str| -> Option<(u8, u32, u32)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u32 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((3, major, 0));
        }
        for (label, rank) in [("beta", 2u8), ("alpha", 1u8)] {
            if let Some(n) = tail.strip_prefix(label) {
                return Some((rank, major, n.parse().ok()?));
            }
        }
        None
    };
    match parse(v) {
        Some((r, a, b)) => (r, a, b, String::new()),
        None => (0, 0, 0, v.to_string()),
    }
}

/// Groups → their versions, preferred first.
fn groups(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<(bool, String)>> = BTreeMap::new();
    for r in registry.all() {
        if r.group.is_empty() {
            continue;
        }
        let e = out.entry(r.group.clone()).or_default();
        if !e.iter().any(|(_, v)| *v == r.version) {
            e.push((r.preferred, r.version.clone()));
        }
    }
    for r in REVIEWS {
        let e = out.entry(r.group.to_string()).or_default();
        if !e.iter().any(|(_, v)| v == r.version) {
            e.push((true, r.version.to_string()));
        }
    }
    out.into_iter()
        .map(|(g, mut vs)| {
            vs.sort_by(|a, b| {
                b.0.cmp(&a.0)
                    .then_with(|| version_priority(&b.1).cmp(&version_priority(&a.1)))
            });
            (g, vs.into_iter().map(|(_, v)| v).collect())
        })
        .collect()
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({ "groupVersion": format!("{name}/{v}"), "version": v }))
        .collect();
    json!({ "name": name, "versions": vs, "preferredVersion": vs[0] })
}

/// `/apis`.
pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> = groups(registry)
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

/// `/apis/{group}`.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let gs = groups(registry);
    let vs = gs.get(name)?;
    let mut g = group_json(name, vs);
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    Some(g)
}

/// Resources that are only ever created and answered, never stored.
const REVIEWS: &[crate::auth::reviews::Review] = crate::auth::reviews::RESOURCES;

/// Discovery entries of the review resources in `group`/`version`: v1
/// `APIResource`s, or aggregated (`v2`) ones.
fn reviews(group: &str, version: &str, v2: bool) -> Vec<Value> {
    REVIEWS
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .map(|r| {
            let singular = r.kind.to_ascii_lowercase();
            if v2 {
                let scope = if r.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                };
                json!({
                    "resource": r.plural, "responseKind": kind_ref(r.group, r.version, r.kind),
                    "scope": scope, "singularResource": singular, "verbs": ["create"],
                })
            } else {
                json!({
                    "name": r.plural, "singularName": singular, "namespaced": r.namespaced,
                    "kind": r.kind, "verbs": ["create"],
                })
            }
        })
        .collect()
}

/// Whether `r` is core's Pod, which has the `eviction` subresource.
fn is_pods(r: &ResourceInfo) -> bool {
    r.group.is_empty() && r.plural == "pods"
}

/// Whether `r` is core's ServiceAccount, which has the `token` subresource.
fn is_service_accounts(r: &ResourceInfo) -> bool {
    r.group.is_empty() && r.plural == "serviceaccounts"
}

/// Custom resources' verbs, in the order kube's apiextensions server lists
/// them.
const CUSTOM_RESOURCE_VERBS: [&str; 8] = [
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "create",
    "update",
    "watch",
];

fn verbs(r: &ResourceInfo) -> [&'static str; 8] {
    if r.crd.is_some() {
        CUSTOM_RESOURCE_VERBS
    } else {
        VERBS
    }
}

/// kube's `storageVersionHash`: the first 8 bytes of the SHA-256 of the
/// storage `group/version/kind`, base64. Clients compare it to notice a
/// storage version change.
pub fn storage_version_hash(r: &ResourceInfo) -> String {
    use base64::Engine;
    use sha2::Digest;
    let gvk = format!("{}/{}/{}", r.storage_group, r.storage_version, r.kind);
    let digest = sha2::Sha256::digest(gvk.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

fn resource_json(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": verbs(r),
        "storageVersionHash": storage_version_hash(r),
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    if r.has_status {
        out.push(json!({
            "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
            "kind": r.kind, "verbs": ["get", "patch", "update"]
        }));
    }
    if r.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced,
            "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]
        }));
    }
    if r.group.is_empty() && r.plural == "namespaces" {
        out.push(json!({
            "name": "namespaces/finalize", "singularName": "", "namespaced": false,
            "kind": "Namespace", "verbs": ["update"]
        }));
    }
    if is_pods(r) {
        out.push(json!({
            "name": "pods/eviction", "singularName": "", "namespaced": true,
            "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]
        }));
        out.push(json!({
            "name": "pods/ephemeralcontainers", "singularName": "", "namespaced": true,
            "kind": "Pod", "verbs": ["get", "patch", "update"]
        }));
    }
    if crate::certificates::is_csr(r) {
        out.push(json!({
            "name": format!("{}/approval", r.plural), "singularName": "", "namespaced": false,
            "kind": r.kind, "verbs": ["get", "patch", "update"]
        }));
    }
    if is_service_accounts(r) {
        out.push(json!({
            "name": "serviceaccounts/token", "singularName": "", "namespaced": true,
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
            "verbs": ["create"]
        }));
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let rs: Vec<_> = registry
        .all()
        .into_iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    let reviews = reviews(group, version, false);
    if rs.is_empty() && reviews.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut resources: Vec<Value> = rs.iter().flat_map(|r| resource_json(r)).collect();
    resources.extend(reviews);
    // kube lists resources and subresources sorted by name.
    resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let mut list = json!({ "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources });
    if group.is_empty() {
        // kube's legacy `/api/v1` list has no apiVersion.
        list.as_object_mut().expect("object").remove("apiVersion");
    }
    Some(list)
}

fn kind_ref(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "version": version, "kind": kind })
}

fn resource_v2(r: &ResourceInfo) -> Value {
    let mut subresources = vec![];
    if r.has_status {
        subresources.push(json!({
            "subresource": "status",
            "responseKind": kind_ref(&r.group, &r.version, &r.kind),
            "verbs": ["get", "patch", "update"],
        }));
    }
    if r.scale.is_some() {
        subresources.push(json!({
            "subresource": "scale",
            "responseKind": kind_ref("autoscaling", "v1", "Scale"),
            "verbs": ["get", "patch", "update"],
        }));
    }
    if r.group.is_empty() && r.plural == "namespaces" {
        subresources.push(json!({
            "subresource": "finalize",
            "responseKind": kind_ref("", "v1", "Namespace"),
            "verbs": ["update"],
        }));
    }
    if is_pods(r) {
        subresources.push(json!({
            "subresource": "eviction",
            "responseKind": kind_ref("policy", "v1", "Eviction"),
            "verbs": ["create"],
        }));
        subresources.push(json!({
            "subresource": "ephemeralcontainers",
            "responseKind": kind_ref("", "v1", "Pod"),
            "verbs": ["get", "patch", "update"],
        }));
    }
    if crate::certificates::is_csr(r) {
        subresources.push(json!({
            "subresource": "approval",
            "responseKind": kind_ref(&r.group, &r.version, &r.kind),
            "verbs": ["get", "patch", "update"],
        }));
    }
    if is_service_accounts(r) {
        subresources.push(json!({
            "subresource": "token",
            "responseKind": kind_ref("authentication.k8s.io", "v1", "TokenRequest"),
            "verbs": ["create"],
        }));
    }
    let mut v = json!({
        "resource": r.plural,
        "responseKind": kind_ref(&r.group, &r.version, &r.kind),
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": verbs(r),
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    if !subresources.is_empty() {
        v["subresources"] = Value::Array(subresources);
    }
    v
}

/// Aggregated discovery (`Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`)
/// for `/api` (`core` true) or `/apis`, as `apidiscovery.k8s.io/{api_version}`.
pub fn aggregated(registry: &Registry, core: bool, api_version: &str) -> Value {
    let all = registry.all();
    let group_names: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        groups(registry).into_iter().collect()
    };
    let items: Vec<Value> = group_names
        .iter()
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let mut resources: Vec<Value> = all
                        .iter()
                        .filter(|r| r.group == *g && r.version == *v)
                        .map(|r| resource_v2(r))
                        .collect();
                    resources.extend(reviews(g, v, true));
                    json!({ "version": v, "resources": resources, "freshness": "Current" })
                })
                .collect();
            // The core group has no name: kube leaves it out.
            let metadata = if g.is_empty() {
                json!({})
            } else {
                json!({ "name": g })
            };
            json!({ "metadata": metadata, "versions": vs })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{api_version}"),
        "metadata": {},
        "items": items,
    })
}

/// The aggregated discovery version the Accept header asks for first, if any.
pub fn wants_aggregated(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        let p = part.replace(' ', "");
        if p.contains("as=APIGroupDiscoveryList") && p.contains("g=apidiscovery.k8s.io") {
            if p.contains("v=v2beta1") {
                return Some("v2beta1");
            }
            if p.contains("v=v2") {
                return Some("v2");
            }
        }
        if p.starts_with("application/json") && !p.contains("as=") {
            return None;
        }
    }
    None
}
