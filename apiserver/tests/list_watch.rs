//! List (selectors, pagination) and watch (history, selectors, bookmarks, 410).

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

async fn mk(a: std::net::SocketAddr, ns: &str, name: &str, labels: Value) {
    let mut b = configmap(name, json!({}));
    b["metadata"]["labels"] = labels;
    let r = req(
        a,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        Some(&b),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn label_and_field_selectors() {
    let s = server().await;
    let a = s.addr();
    mk(a, "default", "a", json!({"app": "web", "tier": "fe"})).await;
    mk(a, "default", "b", json!({"app": "db"})).await;
    mk(a, "default", "c", json!({})).await;
    mk(a, "kube-system", "d", json!({"app": "web"})).await;
    let q = |sel: &str| {
        format!(
            "/api/v1/namespaces/default/configmaps?labelSelector={}",
            urlencode(sel)
        )
    };
    for (sel, want) in [
        ("app=web", vec!["a"]),
        ("app==web", vec!["a"]),
        ("app!=web", vec!["b", "c", "kube-root-ca.crt"]),
        ("app in (web,db)", vec!["a", "b"]),
        ("app notin (web)", vec!["b", "c", "kube-root-ca.crt"]),
        ("app", vec!["a", "b"]),
        ("!app", vec!["c", "kube-root-ca.crt"]),
        ("app=web,tier=fe", vec!["a"]),
    ] {
        assert_eq!(
            names(&req(a, "GET", &q(sel), None).await.json()),
            want,
            "{sel}"
        );
    }
    let all = req(a, "GET", "/api/v1/configmaps?labelSelector=app%3Dweb", None)
        .await
        .json();
    let mut all_names = names(&all);
    all_names.sort();
    assert_eq!(all_names, vec!["a", "d"]);
    let by_name = req(
        a,
        "GET",
        "/api/v1/configmaps?fieldSelector=metadata.name%3Db",
        None,
    )
    .await
    .json();
    assert_eq!(names(&by_name), vec!["b"]);
    let by_ns = req(
        a,
        "GET",
        "/api/v1/configmaps?fieldSelector=metadata.namespace%21%3Ddefault",
        None,
    )
    .await
    .json();
    // kube-node-lease's, kube-public's and kube-system's root CA, and d.
    assert_eq!(
        names(&by_ns),
        vec![
            "kube-root-ca.crt",
            "kube-root-ca.crt",
            "d",
            "kube-root-ca.crt"
        ]
    );
    let r = req(
        a,
        "GET",
        "/api/v1/configmaps?labelSelector=a%20in%20b",
        None,
    )
    .await;
    assert_status(&r, 400, "BadRequest");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn pagination_with_continue_and_expiry() {
    let s = server_with(gantry_apiserver::Config {
        watch_history: 5,
        ..Default::default()
    })
    .await;
    let a = s.addr();
    for i in 0..5 {
        mk(a, "default", &format!("p{i}"), json!({})).await;
    }
    let p1 = req(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=2",
        None,
    )
    .await
    .json();
    // Every namespace has kube-root-ca.crt, sorted first here.
    assert_eq!(names(&p1), vec!["kube-root-ca.crt", "p0"]);
    assert_eq!(p1["metadata"]["remainingItemCount"], 4);
    let tok = p1["metadata"]["continue"].as_str().unwrap().to_string();
    let p2 = req(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?limit=2&continue={tok}"),
        None,
    )
    .await
    .json();
    assert_eq!(names(&p2), vec!["p1", "p2"]);
    assert_eq!(
        p2["metadata"]["resourceVersion"],
        p1["metadata"]["resourceVersion"]
    );
    // Pages come from the first page's snapshot: later changes do not show.
    req(
        a,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/p4",
        None,
    )
    .await;
    mk(a, "default", "p5", json!({})).await;
    let tok2 = p2["metadata"]["continue"].as_str().unwrap().to_string();
    let p3 = req(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?limit=2&continue={tok2}"),
        None,
    )
    .await
    .json();
    assert_eq!(names(&p3), vec!["p3", "p4"]);
    // resourceVersionMatch=Exact lists a past state too.
    let rv0 = p1["metadata"]["resourceVersion"].as_str().unwrap();
    let old = req(
        a,
        "GET",
        &format!(
            "/api/v1/namespaces/default/configmaps?resourceVersion={rv0}&resourceVersionMatch=Exact"
        ),
        None,
    )
    .await
    .json();
    assert_eq!(
        names(&old),
        vec!["kube-root-ca.crt", "p0", "p1", "p2", "p3", "p4"]
    );
    let now = req(a, "GET", "/api/v1/namespaces/default/configmaps", None)
        .await
        .json();
    assert_eq!(
        names(&now),
        vec!["kube-root-ca.crt", "p0", "p1", "p2", "p3", "p5"]
    );
    assert!(p3["metadata"].get("continue").is_none());
    // kube-rs paginates too.
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let l = api.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(l.items.len(), 3);
    // Push the token's resourceVersion out of the history window: 410 Expired.
    for i in 0..10 {
        mk(a, "kube-system", &format!("x{i}"), json!({})).await;
    }
    let r = req(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?limit=2&continue={tok}"),
        None,
    )
    .await;
    let expired = assert_status(&r, 410, "Expired");
    // kube's inconsistent continue: a fresh token that goes on from the same
    // place in the state of now.
    let fresh = expired["metadata"]["continue"]
        .as_str()
        .expect("a fresh continue token in the Status")
        .to_string();
    assert!(
        expired["message"]
            .as_str()
            .unwrap()
            .contains("use the continue token in this response"),
        "{expired}"
    );
    let rest = req(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?limit=2&continue={fresh}"),
        None,
    )
    .await
    .json();
    assert_eq!(names(&rest), vec!["p1", "p2"]);
    assert_ne!(
        rest["metadata"]["resourceVersion"],
        p1["metadata"]["resourceVersion"]
    );
    let last = rest["metadata"]["continue"].as_str().unwrap();
    let last = req(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?limit=2&continue={last}"),
        None,
    )
    .await
    .json();
    assert_eq!(names(&last), vec!["p3", "p5"], "the state of now");
    let r = req(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=2&continue=garbage",
        None,
    )
    .await;
    assert_status(&r, 400, "BadRequest");
}

async fn next_event(
    stream: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin),
) -> WatchEvent<ConfigMap> {
    tokio::time::timeout(Duration::from_secs(20), stream.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .expect("event ok")
}

fn ev_summary(e: &WatchEvent<ConfigMap>) -> (String, String) {
    match e {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Modified(o) => ("MODIFIED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Deleted(o) => ("DELETED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Bookmark(b) => ("BOOKMARK".into(), b.metadata.resource_version.clone()),
        WatchEvent::Error(e) => ("ERROR".into(), e.message.clone()),
    }
}

#[tokio::test]
async fn watch_from_resource_version_sees_changes_in_order() {
    let s = server().await;
    let a = s.addr();
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    mk(a, "default", "before", json!({})).await;
    let rv = current_rv(a).await;
    let mut w = api
        .watch(&WatchParams::default(), &rv.to_string())
        .await
        .unwrap()
        .boxed();
    mk(a, "default", "x", json!({})).await;
    raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/x",
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"data":{"a":"b"}}"#,
    )
    .await;
    req(a, "DELETE", "/api/v1/namespaces/default/configmaps/x", None).await;
    let got: Vec<_> = [
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
    ]
    .iter()
    .map(ev_summary)
    .collect();
    assert_eq!(
        got,
        vec![
            ("ADDED".into(), "x".into()),
            ("MODIFIED".into(), "x".into()),
            ("DELETED".into(), "x".into())
        ]
    );
    // Replaying from the same RV later gives the same history.
    let mut again = api
        .watch(&WatchParams::default(), &rv.to_string())
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        ev_summary(&next_event(&mut again).await),
        ("ADDED".into(), "x".into())
    );
    // Watch with rv=0: synthetic ADDED for the current state.
    let mut w0 = api
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    assert_eq!(
        ev_summary(&next_event(&mut w0).await),
        ("ADDED".into(), "before".into())
    );
}

#[tokio::test]
async fn watch_all_namespaces_and_selector_transitions() {
    let s = server().await;
    let a = s.addr();
    let api: Api<ConfigMap> = Api::all(s.client());
    let rv = current_rv(a).await;
    let mut w = api
        .watch(&WatchParams::default().labels("app=web"), &rv.to_string())
        .await
        .unwrap()
        .boxed();
    mk(a, "kube-system", "other", json!({"app": "db"})).await;
    mk(a, "kube-system", "m", json!({"app": "web"})).await;
    let p = |body: &'static [u8]| async move {
        raw(
            a,
            "PATCH",
            "/api/v1/namespaces/kube-system/configmaps/m",
            &[("Content-Type", "application/merge-patch+json")],
            body,
        )
        .await
    };
    p(br#"{"metadata":{"labels":{"app":"db"}}}"#).await;
    p(br#"{"metadata":{"labels":{"app":"web"}}}"#).await;
    p(br#"{"data":{"x":"y"}}"#).await;
    let got: Vec<_> = [
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
    ]
    .iter()
    .map(ev_summary)
    .collect();
    assert_eq!(
        got,
        vec![
            ("ADDED".into(), "m".into()),
            ("DELETED".into(), "m".into()),
            ("ADDED".into(), "m".into()),
            ("MODIFIED".into(), "m".into()),
        ]
    );
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn watch_from_compacted_resource_version_is_gone() {
    let s = server_with(gantry_apiserver::Config {
        watch_history: 3,
        ..Default::default()
    })
    .await;
    let a = s.addr();
    let rv = current_rv(a).await;
    for i in 0..6 {
        mk(a, "default", &format!("c{i}"), json!({})).await;
    }
    let r = raw(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
        &[],
        b"",
    )
    .await;
    let line: Value = serde_json::from_str(r.body.lines().next().unwrap()).unwrap();
    assert_eq!(line["type"], "ERROR");
    assert_eq!(line["object"]["code"], 410);
    assert_eq!(line["object"]["reason"], "Expired");
    // kube-rs's watcher recovers by re-listing.
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let mut w = api
        .watch(&WatchParams::default(), &rv.to_string())
        .await
        .unwrap()
        .boxed();
    match next_event(&mut w).await {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {:?}", ev_summary(&other)),
    }
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn watch_timeout_and_bookmarks() {
    let s = server_with(gantry_apiserver::Config {
        bookmark_interval: Duration::from_millis(100),
        ..Default::default()
    })
    .await;
    let a = s.addr();
    // timeoutSeconds ends the stream (the raw client reads to EOF).
    let r = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
        &[],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let rv = current_rv(a).await;
    let mut w = api
        .watch(
            &WatchParams {
                bookmarks: true,
                ..Default::default()
            },
            &rv.to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let e = next_event(&mut w).await;
    assert_eq!(ev_summary(&e), ("BOOKMARK".into(), rv.to_string()));
}

#[tokio::test]
async fn send_initial_events_ends_with_marked_bookmark() {
    let s = server().await;
    let a = s.addr();
    mk(a, "default", "i1", json!({})).await;
    mk(a, "default", "i2", json!({})).await;
    let r = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
        &[],
        b"",
    )
    .await;
    let lines: Vec<Value> = r
        .body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // kube-root-ca.crt, i1, i2.
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "ADDED");
    assert_eq!(lines[2]["type"], "ADDED");
    assert_eq!(lines[3]["type"], "BOOKMARK");
    assert_eq!(
        lines[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // Without resourceVersionMatch=NotOlderThan: 422.
    let r = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true",
        &[],
        b"",
    )
    .await;
    assert_status(&r, 422, "Invalid");

    // kube-rs's watcher in streaming-list mode.
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let stream = watcher(api.clone(), watcher::Config::default().streaming_lists())
        .default_backoff()
        .applied_objects();
    let mut stream = stream.boxed();
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 3 {
        let cm = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.insert(cm.metadata.name.unwrap());
    }
    mk(a, "default", "i3", json!({})).await;
    let cm = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(cm.metadata.name.as_deref(), Some("i3"));
}

#[tokio::test]
async fn kube_runtime_watcher_list_watch() {
    let s = server().await;
    let a = s.addr();
    mk(a, "default", "l1", json!({"l": "1"})).await;
    let api: Api<ConfigMap> = Api::all(s.client());
    let mut stream = watcher(api, watcher::Config::default().labels("l"))
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("l1"));
    mk(a, "kube-public", "l2", json!({"l": "2"})).await;
    let second = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second.metadata.name.as_deref(), Some("l2"));
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let s = server().await;
    let api: Api<ConfigMap> = Api::all(s.client());
    let mut w = api
        .watch(&WatchParams::default().labels("none"), "0")
        .await
        .unwrap()
        .boxed();
    // The stream is open (no ConfigMap has the label: nothing arrives yet).
    tokio::time::timeout(Duration::from_secs(30), s.shutdown())
        .await
        .expect("shutdown completes with a watch open");
    let end = tokio::time::timeout(Duration::from_secs(30), w.next())
        .await
        .expect("watch ended");
    assert!(end.is_none() || end.unwrap().is_err());
}

#[tokio::test]
async fn metadata_only_requests() {
    use kube::core::PartialObjectMeta;
    let s = server().await;
    let a = s.addr();
    mk(a, "default", "meta1", json!({"app": "x"})).await;
    let api: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let m: PartialObjectMeta<ConfigMap> = api.get_metadata("meta1").await.unwrap();
    assert_eq!(m.metadata.labels.unwrap()["app"], "x");
    let l = api
        .list_metadata(&ListParams::default().labels("app=x"))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 1);
    let raw_list = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )],
        b"",
    )
    .await
    .json();
    assert_eq!(raw_list["kind"], "PartialObjectMetadataList");
    assert!(raw_list["items"][0].get("data").is_none());
    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(s.client(), "default");
    let mut stream = watcher(meta_api, watcher::Config::default().labels("app=x"))
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("meta1"));
}

#[tokio::test]
async fn watch_one_object_by_path_or_field_selector() {
    let s = server().await;
    let a = s.addr();
    mk(a, "default", "one", json!({})).await;
    mk(a, "default", "two", json!({})).await;
    for path in [
        "/api/v1/namespaces/default/configmaps/one?watch=1&timeoutSeconds=1",
        "/api/v1/namespaces/default/configmaps?watch=1&fieldSelector=metadata.name%3Done&timeoutSeconds=1",
    ] {
        let r = raw(a, "GET", path, &[], b"").await;
        let names: Vec<String> = r
            .body
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(names, vec!["one"], "{path}");
    }
}

/// kube's cacher waits up to 3 s for a future resourceVersion, then answers
/// with one ERROR event (storage.NewTooLargeResourceVersionError): clients relist.
#[tokio::test]
async fn watch_from_a_future_resource_version_is_too_large() {
    let s = server().await;
    let a = s.addr();
    let rv = current_rv(a).await;
    let watches = [rv + 1000, u64::MAX].map(|future| async move {
        let path =
            format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={future}");
        (future, raw(a, "GET", &path, &[], b"").await)
    });
    for (future, r) in futures::future::join_all(watches).await {
        assert_eq!(r.status, 200, "{}", r.body);
        let lines: Vec<&str> = r.body.lines().collect();
        assert_eq!(lines.len(), 1, "{}", r.body);
        let ev: Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(ev["type"], "ERROR");
        assert_eq!(
            ev["object"],
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("Timeout: Too large resource version: {future}, current: {rv}"),
                "reason": "Timeout",
                "details": {
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                    "retryAfterSeconds": 1
                },
                "code": 504
            })
        );
    }
}

/// A resourceVersion reached within the wait is watched as usual.
#[tokio::test]
async fn watch_from_a_soon_reached_resource_version_waits_for_it() {
    let s = server().await;
    let a = s.addr();
    let rv = current_rv(a).await;
    let path = format!(
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={}&timeoutSeconds=2",
        rv + 1
    );
    let watch = tokio::spawn(async move { raw(a, "GET", &path, &[], b"").await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for name in ["one", "two"] {
        let body = configmap(name, json!({}));
        req(
            a,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&body),
        )
        .await;
    }
    let r = watch.await.unwrap();
    let names: Vec<Value> = r
        .body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["object"]["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, vec![json!("two")], "{}", r.body);
}
