//! Replay a recording against a fresh embedded server and a fresh real
//! kube-apiserver, side by side, and compare what each answers.
//!
//! The two servers start from the same state: each is new, and the
//! namespaces the recording uses without creating them are created on both
//! first. Requests go in the order they reached the proxy. Values a server
//! chose and a client then sent back (uids, resourceVersions, continue
//! tokens, generated names) are learnt from each answer, by pairing it with
//! the recorded answer, and mapped into later requests on that server.
//!
//! Three things make a sequential replay see what the recorded client saw,
//! where a real server takes its time: after a CRD is written the replay
//! waits until its versions are in discovery; after a namespace is created
//! on the real server it waits for the namespace's `default` ServiceAccount
//! (Pods need it); and a watch of one object by name (`kubectl wait`,
//! `kubectl delete`) is replayed as a wait for the recorded last event
//! type (for DELETED: until a list of that name is empty, since the object
//! may be gone before a watch starts). Other watches are not replayed:
//! their streams depend on timing.
//! Watches are never compared.
//!
//! Protobuf is asked for by kubectl but answered only by the real server;
//! the replay asks both for JSON, so that their bodies can be
//! compared at all.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::compare::{Difference, differences};
use super::exchange::{self, Exchange, Payload, encode_query, query_pairs};
use super::normalize::{GeneratedNames, normalize, server_identity};
use super::pattern::group_key;
use super::report::Report;
use super::upstream::{Outgoing, Reply, Upstream};
use crate::{Backend, Cluster};

/// Namespaces every server has from the start.
const BUILT_IN_NAMESPACES: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How long a replay waits for a server to settle (a CRD served, a
/// ServiceAccount made).
const SETTLE: Duration = Duration::from_mins(1);

/// How long a replayed watch waits for its event: a recorded client may
/// have waited for something the replay does not reproduce.
const WATCH_WAIT: Duration = Duration::from_secs(20);

/// Set, this environment variable has every difference of every exchange
/// printed on stderr (the report shows only the first of each group).
pub const DETAIL: &str = "GANTRY_DIFFERENTIAL_DETAIL";

/// One server during a replay, with what was learnt from its answers.
struct Side {
    backend: Backend,
    upstream: Upstream,
    /// Recorded value → this server's, by kind of value.
    uids: HashMap<String, String>,
    rvs: HashMap<String, String>,
    continues: HashMap<String, String>,
    names: HashMap<String, String>,
    /// This server's generated names → their prefixes.
    generated: GeneratedNames,
    /// This server's port and CA (PEM), blanked in its answers.
    port: u16,
    ca_pem: Option<String>,
}

/// Replay the recording at `path` on fresh servers of both backends and
/// add what they answered to `report`.
pub async fn replay(path: &Path, report: &mut Report) -> anyhow::Result<()> {
    let exchanges = exchange::read(path)?;
    let label = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    let (embedded, real) = tokio::join!(
        Cluster::start_recorded(Backend::Embedded, None),
        Cluster::start_recorded(Backend::Real, None)
    );
    let mut sides = [Side::new(&embedded), Side::new(&real)];
    for namespace in namespaces_used_not_created(&exchanges) {
        for side in &mut sides {
            side.create_namespace(&namespace).await?;
        }
    }
    report.recordings.push(label.clone());
    let detail = std::env::var_os(DETAIL).is_some();
    for exchange in &exchanges {
        if exchange.watch {
            if is_wait(exchange) {
                let [a, b] = &sides;
                tokio::join!(a.wait_watch(exchange), b.wait_watch(exchange));
                report.watches_replayed += 1;
            } else {
                report.watches_skipped += 1;
            }
            continue;
        }
        let [a, b] = &mut sides;
        let (x, y) = tokio::join!(a.exchange(exchange), b.exchange(exchange));
        let outcome = compare(&x?, &y?);
        if detail && !outcome.is_empty() {
            eprintln!("{label}#{} {}:", exchange.seq, group_key(exchange));
            for difference in &outcome {
                eprintln!("    {difference}");
            }
        }
        report.add(
            &group_key(exchange),
            &outcome,
            format!("{label}#{}", exchange.seq),
        );
    }
    drop(sides);
    embedded.shutdown().await;
    real.shutdown().await;
    Ok(())
}

/// Status, media type and normalized body of one answer.
struct Answer {
    status: u16,
    media: String,
    body: Payload,
}

fn compare(embedded: &Answer, real: &Answer) -> Vec<Difference> {
    if embedded.status != real.status {
        return vec![Difference {
            pointer: "status".into(),
            embedded: embedded.status.to_string(),
            real: real.status.to_string(),
        }];
    }
    if embedded.media != real.media {
        return vec![Difference {
            pointer: "content-type".into(),
            embedded: embedded.media.clone(),
            real: real.media.clone(),
        }];
    }
    match (&embedded.body, &real.body) {
        (Payload::Json(a), Payload::Json(b)) => differences(a, b),
        (a, b) if a == b => Vec::new(),
        (a, b) => vec![Difference {
            pointer: String::new(),
            embedded: describe(a),
            real: describe(b),
        }],
    }
}

fn describe(payload: &Payload) -> String {
    match payload {
        Payload::Empty => "empty".into(),
        Payload::Json(v) => super::compare::short(Some(v)),
        Payload::Text(t) => super::compare::short(Some(&Value::String(t.clone()))),
        Payload::Binary(b) => format!("{} bytes", b.len() * 3 / 4),
    }
}

/// Namespaces in paths of the recording that it does not create before
/// using them (and that are not built in).
fn namespaces_used_not_created(exchanges: &[Exchange]) -> Vec<String> {
    let mut created = BTreeSet::new();
    let mut needed = Vec::new();
    for exchange in exchanges {
        if exchange.method == "POST" && exchange.path.ends_with("/api/v1/namespaces") {
            if let Some(name) = exchange
                .body
                .json()
                .and_then(|b| b.pointer("/metadata/name"))
                .and_then(Value::as_str)
            {
                created.insert(name.to_string());
            }
            continue;
        }
        let segments: Vec<&str> = exchange.path.split('/').collect();
        if let Some(i) = segments.iter().position(|s| *s == "namespaces")
            && let Some(ns) = segments.get(i + 1).filter(|ns| !ns.is_empty())
            && (segments.len() > i + 2 || exchange.method != "GET")
            && !BUILT_IN_NAMESPACES.contains(ns)
            && !created.contains(*ns)
            && !needed.iter().any(|n| n == ns)
        {
            needed.push(ns.to_string());
        }
    }
    needed
}

/// A watch of one object by name: kubectl waiting for a condition or a
/// deletion.
fn is_wait(exchange: &Exchange) -> bool {
    exchange
        .query_param("fieldSelector")
        .is_some_and(|s| s.starts_with("metadata.name="))
}

/// `accept` without the protobuf media ranges (JSON when nothing is left).
fn json_only(accept: Option<&str>) -> Option<String> {
    let accept = accept?;
    let kept: Vec<&str> = accept
        .split(',')
        .filter(|range| !range.contains("protobuf"))
        .collect();
    Some(if kept.is_empty() {
        "application/json".into()
    } else {
        kept.join(",")
    })
}

impl Side {
    fn new(cluster: &Cluster) -> Side {
        Side {
            backend: cluster.backend(),
            upstream: Upstream::of(cluster),
            uids: HashMap::new(),
            rvs: HashMap::new(),
            continues: HashMap::new(),
            names: HashMap::new(),
            generated: GeneratedNames::new(),
            port: cluster.server_port(),
            ca_pem: cluster.ca_pem(),
        }
    }

    async fn create_namespace(&mut self, name: &str) -> anyhow::Result<()> {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let request = Outgoing {
            method: "POST".into(),
            path_and_query: "/api/v1/namespaces".into(),
            content_type: Some("application/json".into()),
            accept: Some("application/json".into()),
            body: serde_json::to_vec(&body)?,
            ..Outgoing::default()
        };
        let reply = self.upstream.call(&request).await?;
        anyhow::ensure!(
            reply.status == 201,
            "creating namespace {name} on the {} server: {}",
            self.backend.name(),
            String::from_utf8_lossy(&reply.body)
        );
        self.wait_for_namespace_setup(name).await;
        Ok(())
    }

    /// Send the recorded request, learn from the answer, settle.
    async fn exchange(&mut self, exchange: &Exchange) -> anyhow::Result<Answer> {
        let request = self.request(exchange);
        let reply = self.upstream.call(&request).await?;
        let mut body = Payload::from_bytes(&reply.body);
        if let (Some(recorded), Some(actual)) = (exchange.response_body.json(), body.json()) {
            self.learn(recorded, actual, None);
        }
        self.settle(exchange, &reply, body.json()).await;
        if let Payload::Json(value) = &mut body {
            normalize(value, &self.generated);
            server_identity(value, self.port, self.ca_pem.as_deref());
        }
        Ok(Answer {
            status: reply.status,
            media: reply
                .content_type
                .as_deref()
                .unwrap_or("")
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
            body,
        })
    }

    /// The recorded request, with what this server chose mapped in.
    fn request(&self, exchange: &Exchange) -> Outgoing {
        let path = exchange
            .path
            .split('/')
            .map(|s| self.names.get(s).map_or(s, String::as_str))
            .collect::<Vec<_>>()
            .join("/");
        let query = exchange.query.as_deref().map(|q| {
            let pairs: Vec<(String, String)> = query_pairs(q)
                .into_iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "resourceVersion" => self.rvs.get(&v).cloned().unwrap_or(v),
                        "continue" => self.continues.get(&v).cloned().unwrap_or(v),
                        "fieldSelector" => self.map_names_in(&v),
                        _ => v,
                    };
                    (k, v)
                })
                .collect();
            encode_query(&pairs)
        });
        let body = match &exchange.body {
            Payload::Json(value) => {
                let mut value = value.clone();
                self.map_value(&mut value, None);
                Payload::Json(value)
            }
            Payload::Text(text) => Payload::Text(self.map_names_in(&self.map_uids_in(text))),
            other => other.clone(),
        };
        Outgoing {
            method: exchange.method.clone(),
            path_and_query: match query {
                Some(q) if !q.is_empty() => format!("{path}?{q}"),
                _ => path,
            },
            content_type: exchange.content_type.clone(),
            accept: json_only(exchange.accept.as_deref()),
            user_agent: exchange.user_agent.clone(),
            body: body.to_bytes(),
        }
    }

    fn map_value(&self, value: &mut Value, key: Option<&str>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    self.map_value(v, Some(k));
                }
            }
            Value::Array(items) => {
                for item in items {
                    self.map_value(item, key);
                }
            }
            Value::String(s) => {
                let table = match key {
                    Some("uid") => &self.uids,
                    Some("resourceVersion") => &self.rvs,
                    _ => &self.names,
                };
                if let Some(mapped) = table.get(s.as_str()) {
                    *s = mapped.clone();
                }
            }
            _ => {}
        }
    }

    fn map_uids_in(&self, text: &str) -> String {
        self.uids
            .iter()
            .fold(text.to_string(), |t, (from, to)| t.replace(from, to))
    }

    fn map_names_in(&self, text: &str) -> String {
        self.names
            .iter()
            .fold(text.to_string(), |t, (from, to)| t.replace(from, to))
    }

    /// Pair the recorded answer with this server's and remember which of
    /// this server's values stand for which recorded ones.
    fn learn(&mut self, recorded: &Value, actual: &Value, key: Option<&str>) {
        match (recorded, actual) {
            (Value::Object(r), Value::Object(a)) => {
                if let (Some(Value::String(prefix)), Some(Value::String(name))) =
                    (a.get("generateName"), a.get("name"))
                {
                    self.generated.insert(name.clone(), prefix.clone());
                    if let Some(Value::String(recorded)) = r.get("name") {
                        self.names.insert(recorded.clone(), name.clone());
                    }
                }
                for (k, rv) in r {
                    if let Some(av) = a.get(k) {
                        self.learn(rv, av, Some(k));
                    }
                }
            }
            (Value::Array(r), Value::Array(a)) => {
                // Objects pair by namespace and name; those with generated
                // names, in order, with the unpaired ones of the same prefix.
                let by_name: HashMap<(String, String), &Value> =
                    a.iter().filter_map(|v| Some((object_key(v)?, v))).collect();
                let mut generated: Vec<&Value> = a
                    .iter()
                    .filter(|v| generate_name(v).is_some())
                    .filter(|v| !r.iter().any(|rv| object_key(rv) == object_key(v)))
                    .collect();
                for (i, rv) in r.iter().enumerate() {
                    let paired = match object_key(rv) {
                        Some(k) if by_name.contains_key(&k) => by_name.get(&k).copied(),
                        Some(_) => generate_name(rv).and_then(|prefix| {
                            let at = generated
                                .iter()
                                .position(|v| generate_name(v) == Some(prefix))?;
                            Some(generated.remove(at))
                        }),
                        None => a.get(i),
                    };
                    if let Some(av) = paired {
                        self.learn(rv, av, key);
                    }
                }
            }
            (Value::String(r), Value::String(a)) if !r.is_empty() && !a.is_empty() => {
                let table = match key {
                    Some("uid") => &mut self.uids,
                    Some("resourceVersion") => &mut self.rvs,
                    Some("continue") => &mut self.continues,
                    _ => return,
                };
                table.insert(r.clone(), a.clone());
            }
            _ => {}
        }
    }

    /// Wait for what a real client would have waited for after this
    /// exchange (see the module docs).
    async fn settle(&self, exchange: &Exchange, reply: &Reply, body: Option<&Value>) {
        if !(200..300).contains(&reply.status) {
            return;
        }
        let Some(body) = body else { return };
        let writes = matches!(exchange.method.as_str(), "POST" | "PUT" | "PATCH");
        if writes && body["kind"] == "CustomResourceDefinition" {
            self.wait_for_crd(body).await;
        }
        if exchange.method == "POST"
            && body["kind"] == "Namespace"
            && let Some(name) = body.pointer("/metadata/name").and_then(Value::as_str)
        {
            self.wait_for_namespace_setup(name).await;
        }
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let request = Outgoing {
            method: "GET".into(),
            path_and_query: path.into(),
            accept: Some("application/json".into()),
            ..Outgoing::default()
        };
        let reply = self.upstream.call(&request).await.ok()?;
        (reply.status == 200)
            .then(|| serde_json::from_slice(&reply.body).ok())
            .flatten()
    }

    async fn wait_until<F, Fut>(&self, what: &str, mut done: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = Instant::now() + SETTLE;
        while !done().await {
            if Instant::now() > deadline {
                eprintln!(
                    "replay: the {} server: {what} still not so after {SETTLE:?}",
                    self.backend.name()
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_for_crd(&self, crd: &Value) {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("");
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
        for version in versions.into_iter().flatten() {
            if version["served"] != true {
                continue;
            }
            let name = version["name"].as_str().unwrap_or("");
            let path = format!("/apis/{group}/{name}");
            self.wait_until(&format!("{plural} in {path}"), || async {
                self.get(&path).await.is_some_and(|list| {
                    list["resources"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|r| r["name"] == plural))
                })
            })
            .await;
        }
    }

    /// Wait for what controllers put in a new namespace: its root CA
    /// ConfigMap, and on a real server its default ServiceAccount.
    async fn wait_for_namespace_setup(&self, namespace: &str) {
        let ca = format!("/api/v1/namespaces/{namespace}/configmaps/kube-root-ca.crt");
        self.wait_until(&ca, || async { self.get(&ca).await.is_some() })
            .await;
        if self.backend != Backend::Real {
            return;
        }
        let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/default");
        self.wait_until(&path, || async { self.get(&path).await.is_some() })
            .await;
    }

    /// Replay a watch of one object as a wait for the type of its last
    /// recorded event (or an ERROR, or the end of the stream).
    async fn wait_watch(&self, exchange: &Exchange) {
        let Some(target) = exchange
            .events
            .last()
            .and_then(|e| e["type"].as_str())
            .map(str::to_string)
        else {
            return;
        };
        let mut request = self.request(exchange);
        if target == "DELETED" {
            // Wait until the list of the watched name is empty: the object
            // may be gone before the watch would start.
            let path = exchange.path.clone();
            let selector = exchange.query_param("fieldSelector").unwrap_or_default();
            let query = encode_query(&[("fieldSelector".into(), self.map_names_in(&selector))]);
            let list = format!("{path}?{query}");
            self.wait_until(&format!("{list} empty"), || async {
                self.get(&list)
                    .await
                    .is_some_and(|l| l["items"].as_array().is_some_and(Vec::is_empty))
            })
            .await;
            return;
        }
        request.accept = Some("application/json".into());
        let Ok(response) = self.upstream.send(&request).await else {
            return;
        };
        let mut stream = response.into_body().into_data_stream();
        let mut pending = Vec::new();
        let wait = async {
            while let Some(Ok(chunk)) = stream.next().await {
                pending.extend_from_slice(&chunk);
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let event: Value = serde_json::from_slice(&line).unwrap_or_default();
                    let kind = event["type"].as_str().unwrap_or("");
                    if kind == target || kind == "ERROR" {
                        return;
                    }
                }
            }
        };
        if tokio::time::timeout(WATCH_WAIT, wait).await.is_err() {
            eprintln!(
                "replay: the {} server: no {target} event on {} after {WATCH_WAIT:?}",
                self.backend.name(),
                exchange.path
            );
        }
    }
}

/// The `generateName` of a list item or a Table row.
fn generate_name(value: &Value) -> Option<&str> {
    value
        .get("metadata")
        .or_else(|| value.pointer("/object/metadata"))?
        .get("generateName")?
        .as_str()
        .filter(|g| !g.is_empty())
}

/// `(namespace, name)` of a list item or a Table row.
fn object_key(value: &Value) -> Option<(String, String)> {
    let metadata = value
        .get("metadata")
        .or_else(|| value.pointer("/object/metadata"))?;
    Some((
        metadata["namespace"].as_str().unwrap_or("").to_string(),
        metadata["name"].as_str()?.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side() -> Side {
        Side {
            backend: Backend::Real,
            upstream: Upstream::plain("http://127.0.0.1:1"),
            uids: HashMap::new(),
            rvs: HashMap::new(),
            continues: HashMap::new(),
            names: HashMap::new(),
            generated: GeneratedNames::new(),
            port: 1,
            ca_pem: None,
        }
    }

    fn exchange(value: Value) -> Exchange {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn learnt_values_are_mapped_into_later_requests() {
        let mut side = side();
        let recorded = json!({"items": [
            {"metadata": {"name": "b", "uid": "u-b", "resourceVersion": "7"}},
            {"metadata": {"name": "gen-aaaaa", "generateName": "gen-", "uid": "u-g", "resourceVersion": "8"}},
        ], "metadata": {"resourceVersion": "9", "continue": "c1"}});
        // The other server lists one more object, first: items pair by name.
        let actual = json!({"items": [
            {"metadata": {"name": "a", "uid": "x-a", "resourceVersion": "100"}},
            {"metadata": {"name": "b", "uid": "x-b", "resourceVersion": "101"}},
            {"metadata": {"name": "gen-zzzzz", "generateName": "gen-", "uid": "x-g", "resourceVersion": "102"}},
        ], "metadata": {"resourceVersion": "103", "continue": "c2"}});
        side.learn(&recorded, &actual, None);
        let later = exchange(json!({
            "seq": 1, "method": "PUT", "path": "/api/v1/namespaces/d/configmaps/gen-aaaaa",
            "query": "resourceVersion=9&continue=c1&fieldSelector=metadata.name%3Dgen-aaaaa",
            "accept": "application/vnd.kubernetes.protobuf,application/json",
            "body": {"json": {"metadata": {"name": "gen-aaaaa", "uid": "u-g", "resourceVersion": "8",
                "ownerReferences": [{"uid": "u-b", "name": "b"}]}}},
            "status": 200,
        }));
        let request = side.request(&later);
        assert_eq!(
            request.path_and_query,
            "/api/v1/namespaces/d/configmaps/gen-zzzzz?resourceVersion=103&continue=c2&fieldSelector=metadata.name%3Dgen-zzzzz"
        );
        assert_eq!(request.accept.as_deref(), Some("application/json"));
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(
            body,
            json!({"metadata": {"name": "gen-zzzzz", "uid": "x-g", "resourceVersion": "102",
                "ownerReferences": [{"uid": "x-b", "name": "b"}]}})
        );
        assert_eq!(
            side.generated.get("gen-zzzzz").map(String::as_str),
            Some("gen-")
        );
    }

    #[test]
    fn namespaces_to_create_first() {
        let exchanges: Vec<Exchange> = [
            json!({"seq": 0, "method": "GET", "path": "/api/v1/namespaces/pre/configmaps", "status": 200}),
            json!({"seq": 1, "method": "POST", "path": "/api/v1/namespaces", "status": 201,
                "body": {"json": {"metadata": {"name": "made"}}}}),
            json!({"seq": 2, "method": "POST", "path": "/api/v1/namespaces/made/configmaps", "status": 201}),
            json!({"seq": 3, "method": "GET", "path": "/api/v1/namespaces/default/pods", "status": 200}),
            json!({"seq": 4, "method": "GET", "path": "/api/v1/namespaces/looked-at", "status": 404}),
        ]
        .into_iter()
        .map(exchange)
        .collect();
        assert_eq!(namespaces_used_not_created(&exchanges), ["pre"]);
    }
}
