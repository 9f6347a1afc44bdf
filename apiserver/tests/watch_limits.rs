//! Watches are bounded (docs/security.md): many idle watches on a
//! large store keep memory bounded and the server answering; a watch that falls behind
//! is closed and its client resumes from its last resourceVersion; past the limit of
//! concurrent watches, kube's 429 answer.
//!
//! The tests of this file run one at a time (they measure the memory of the process).

mod common;

use std::time::Duration;

use common::*;
use gantry_apiserver::Config;
use serde_json::{Value, json};

/// One test at a time: the memory test measures the whole process.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

const MIB: u64 = 1024 * 1024;

/// Creates `count` ConfigMaps named `cm-N` in `default`, each holding `size` bytes.
async fn fill(a: std::net::SocketAddr, count: usize, size: usize) {
    let data = "x".repeat(size);
    for i in 0..count {
        let r = req(
            a,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&configmap(&format!("cm-{i}"), json!({ "v": data }))),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_idle_watches_on_a_large_store_keep_memory_bounded() {
    const WATCHES: u64 = 200;
    const OBJECTS: usize = 128;
    const SIZE: usize = 64 * 1024;
    let _serial = SERIAL.lock().await;
    let store_bytes = (OBJECTS * SIZE) as u64; // 8 MiB
    let s = server().await;
    let a = s.addr();
    fill(a, OBJECTS, SIZE).await;
    let before = rss();
    // Watches without a resourceVersion: each gets the whole store as ADDED events.
    // Their clients read the response head and nothing more.
    let mut watches = vec![];
    for _ in 0..WATCHES {
        let w = RawWatch::open(a, "/api/v1/namespaces/default/configmaps?watch=1").await;
        assert_eq!(w.status, 200, "{}", w.head);
        watches.push(w);
    }
    // Let the server fill what the connections will take.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let growth = rss().saturating_sub(before);
    eprintln!(
        "{WATCHES} idle watches on a {} MiB store: RSS grew {} MiB",
        store_bytes / MIB,
        growth / MIB
    );
    // A serialized copy of the store per watch would be 1,600 MiB.
    assert!(
        growth < WATCHES * store_bytes / 8,
        "RSS grew {} MiB for {WATCHES} idle watches on a {} MiB store",
        growth / MIB,
        store_bytes / MIB
    );
    // The server still answers other requests, whole.
    let list = req(a, "GET", "/api/v1/namespaces/default/configmaps", None).await;
    assert_eq!(list.status, 200);
    let items = list.json()["items"].as_array().unwrap().len();
    // Those and the namespace's kube-root-ca.crt.
    assert_eq!(items, OBJECTS + 1, "{}", &list.body[..200]);
    // And an idle watch, once read, gets the whole store.
    let mut w = watches.pop().unwrap();
    let mut names = vec![];
    while names.len() < items {
        let e: Value = w.next().await.expect("an initial event");
        assert_eq!(e["type"], "ADDED", "{e}");
        names.push(
            e["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    assert!(names.contains(&"cm-0".to_string()), "{names:?}");
}

fn name_of(event: &Value) -> String {
    event["object"]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_falls_behind_is_closed_while_a_fast_one_goes_on() {
    const EVENTS: usize = 64;
    const SIZE: usize = 256 * 1024;
    let _serial = SERIAL.lock().await;
    let s = server_with(Config {
        watch_buffer_bytes: usize::try_from(2 * MIB).unwrap(),
        ..Config::default()
    })
    .await;
    let a = s.addr();
    let rv = current_rv(a).await;
    let path =
        |rv: u64| format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}");
    let mut slow = RawWatch::open(a, &path(rv)).await;
    let mut fast = RawWatch::open(a, &path(rv)).await;
    assert_eq!((slow.status, fast.status), (200, 200));
    // 16 MiB of events: more than the slow client's connection holds, and more than
    // the 2 MiB it may fall behind by. The fast client reads each one.
    let data = "x".repeat(SIZE);
    for i in 0..EVENTS {
        let cm = configmap(&format!("cm-{i}"), json!({ "v": data }));
        let r = req(
            a,
            "POST",
            "/api/v1/namespaces/default/configmaps",
            Some(&cm),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
        let e = fast.next().await.expect("the fast watch goes on");
        assert_eq!(
            (e["type"].as_str(), name_of(&e)),
            (Some("ADDED"), format!("cm-{i}"))
        );
    }
    // The slow watch was closed: its client now reads what had been sent, then the
    // end of the response (without the close, this would wait forever).
    let mut got = vec![];
    let read_all = async {
        while let Some(e) = slow.next().await {
            got.push(e);
        }
    };
    tokio::time::timeout(Duration::from_mins(2), read_all)
        .await
        .expect("the slow watch's response ended");
    assert!(
        got.len() < EVENTS,
        "closed before the end: got {}",
        got.len()
    );
    let names: Vec<String> = got.iter().map(name_of).collect();
    let expected: Vec<String> = (0..got.len()).map(|i| format!("cm-{i}")).collect();
    assert_eq!(
        names, expected,
        "what it got is the events in order, without gaps"
    );
    // Resuming from the last resourceVersion it saw, as client-go and kube-rs do, gives
    // the events it missed.
    let last_rv = got.last().map_or(rv, |e| {
        e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    });
    let mut resumed = RawWatch::open(a, &path(last_rv)).await;
    assert_eq!(resumed.status, 200);
    for i in got.len()..EVENTS {
        let e = resumed.next().await.expect("a missed event");
        assert_eq!(name_of(&e), format!("cm-{i}"));
    }
    // The fast watch is still open.
    let r = req(
        a,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/cm-0",
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let e = fast.next().await.expect("still open");
    assert_eq!(
        (e["type"].as_str(), name_of(&e)),
        (Some("DELETED"), "cm-0".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_watches_a_watch_gets_429_until_one_closes() {
    let _serial = SERIAL.lock().await;
    let s = server_with(Config {
        max_watches: 3,
        ..Config::default()
    })
    .await;
    let a = s.addr();
    let path = "/api/v1/namespaces/default/configmaps?watch=1";
    let mut open = vec![];
    for _ in 0..3 {
        let w = RawWatch::open(a, path).await;
        assert_eq!(w.status, 200, "{}", w.head);
        open.push(w);
    }
    // One more is refused as kube-apiserver sheds load: 429, Retry-After, plain text.
    // (timeoutSeconds: were it accepted, it would end.)
    let probe = format!("{path}&timeoutSeconds=1");
    let r = raw(a, "GET", &probe, &[], b"").await;
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.header("Retry-After"), ["1"]);
    assert_eq!(r.header("Content-Type"), ["text/plain; charset=utf-8"]);
    assert_eq!(r.body, "Too many requests, please try again later.\n");
    // Other requests are not limited.
    let list = req(a, "GET", "/api/v1/namespaces/default/configmaps", None).await;
    assert_eq!(list.status, 200, "{}", list.body);
    // A client that goes away frees its place: a watch is accepted again.
    drop(open.pop());
    let mut accepted = None;
    for _ in 0..100 {
        let w = RawWatch::open(a, &probe).await;
        if w.status == 200 {
            accepted = Some(w);
            break;
        }
        assert_eq!(w.status, 429, "{}", w.head);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut w = accepted.expect("a watch is accepted once a client went away");
    // And so does a watch that ends (timeoutSeconds=1): read it to its end.
    while w.next().await.is_some() {}
    let mut again = None;
    for _ in 0..100 {
        let w = RawWatch::open(a, path).await;
        if w.status == 200 {
            again = Some(w);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(again.is_some(), "a watch is accepted once one ended");
    let r = raw(a, "GET", &probe, &[], b"").await;
    assert_eq!(r.status, 429, "at the limit again: {}", r.body);
}
