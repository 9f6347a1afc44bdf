//! WATCH: newline-delimited JSON events over a chunked response.
//!
//! Starts either from a snapshot (no resourceVersion, `0`, or `sendInitialEvents`)
//! emitting synthetic ADDED events, or from the retained history after a given
//! resourceVersion (410 when it is older than the history window; a future one is
//! waited for 3 s, then answered "Too large resource version" as kube does). Selectors are
//! applied with transitions: an object that stops matching is sent as DELETED,
//! one that starts matching as ADDED.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::app::{App, present};
use crate::http::request::ResourceRequest;
use crate::registry::ResourceInfo;
use crate::selectors::Selectors;
use crate::status::{ApiError, ApiResult};
use crate::storage::{Event, EventType, Subscription};
use crate::table::{IncludeObject, table};

/// Per-watch settings.
struct Watch {
    info: Arc<ResourceInfo>,
    prefix: String,
    name: Option<String>,
    sel: Selectors,
    bookmarks: bool,
    table: Option<IncludeObject>,
    metadata_only: bool,
    columns_sent: bool,
}

impl Watch {
    fn matches(&self, key: &str, obj: &Value) -> bool {
        key.starts_with(&self.prefix)
            && self
                .name
                .as_deref()
                .is_none_or(|n| obj.pointer("/metadata/name").and_then(Value::as_str) == Some(n))
            && self.sel.matches(obj)
    }

    fn line(&mut self, kind: &str, obj: &Value) -> Bytes {
        let object = match self.table {
            Some(include) if kind != "BOOKMARK" && kind != "ERROR" => {
                let with_cols = !self.columns_sent;
                self.columns_sent = true;
                table(
                    &self.info,
                    std::slice::from_ref(obj),
                    json!({}),
                    include,
                    with_cols,
                )
            }
            _ if self.metadata_only && kind != "ERROR" => {
                crate::table::partial_object_metadata(obj)
            }
            _ => obj.clone(),
        };
        let mut v =
            serde_json::to_vec(&json!({ "type": kind, "object": object })).expect("serializes");
        v.push(b'\n');
        Bytes::from(v)
    }

    /// The line for a stored event, after selector transitions (None: not visible).
    fn event_line(&mut self, e: &Event) -> Option<Bytes> {
        if !e.key.starts_with(&self.prefix) {
            return None;
        }
        let now = self.matches(&e.key, &e.object);
        let before = e.previous.as_ref().is_some_and(|p| self.matches(&e.key, p));
        let kind = match e.kind {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if before || now => "DELETED",
            _ => return None,
        };
        let obj = present(&self.info, &e.object);
        Some(self.line(kind, &obj))
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            meta["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        let obj = json!({ "kind": self.info.kind, "apiVersion": self.info.api_version(), "metadata": meta });
        self.line("BOOKMARK", &obj)
    }
}

/// GET ...?watch=1
pub async fn watch(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    let info = r.info.clone();
    let sel = crate::handlers::read::selectors(&r)?;
    let send_initial = r.query.flag("sendInitialEvents");
    if send_initial && r.query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::Cause::new(
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
                "sendInitialEvents",
            )],
        ));
    }
    let rv_param = r.query.get("resourceVersion").unwrap_or("");
    let timeout = r
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let mut w = Watch {
        prefix: info.ns_prefix(r.namespace.as_deref()),
        // GET .../{name}?watch=1 watches one object (fieldSelector is the usual way).
        name: r.name.clone(),
        sel,
        bookmarks: r.query.flag("allowWatchBookmarks"),
        table: r
            .wants_table()
            .then(|| IncludeObject::parse(r.query.get("includeObject"))),
        metadata_only: r.wants_metadata(),
        columns_sent: false,
        info,
    };
    let mut initial: Vec<Bytes> = vec![];
    let (backlog, live, start_rv) = if rv_param.is_empty() || rv_param == "0" || send_initial {
        let (snapshot, rv, live) = app.store.snapshot_and_subscribe(&w.prefix);
        for (key, obj) in snapshot {
            if w.matches(&key, &obj) {
                let o = present(&w.info, &obj);
                initial.push(w.line("ADDED", &o));
            }
        }
        if send_initial {
            initial.push(w.bookmark(rv, true));
        }
        (vec![], live, rv)
    } else {
        let rv: u64 = rv_param
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))?;
        if let Err(current) = wait_for_rv(app, rv).await {
            let status = crate::status::too_large_resource_version(rv, current);
            initial.push(w.line("ERROR", &status));
            return Ok(stream_response(Body::from(initial.concat())));
        }
        match app.store.subscribe_from(rv) {
            Subscription::Ok { backlog, live } => (backlog, live, rv),
            Subscription::Expired { oldest } => {
                // kube answers with a 200 stream holding one ERROR event.
                let status =
                    ApiError::Expired(format!("too old resource version: {rv} ({oldest})"))
                        .to_status();
                initial.push(w.line("ERROR", &status));
                let body = Body::from(initial.concat());
                return Ok(stream_response(body));
            }
        }
    };
    for e in &backlog {
        if let Some(l) = w.event_line(e) {
            initial.push(l);
        }
    }
    let last_rv = backlog.last().map(|e| e.rv).unwrap_or(start_rv);
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let interval = app.config.bookmark_interval;
    let feed = Feed {
        initial,
        live,
        last_rv,
        timeout,
        bookmark_every: interval,
        stop: app.stop.clone(),
    };
    tokio::spawn(pump(w, feed, tx));
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<Bytes, std::io::Error>(b), rx))
    });
    Ok(stream_response(Body::from_stream(stream)))
}

/// How long a watch waits for a future resourceVersion (kube's cacher: 3 s).
const FRESHNESS_WAIT: Duration = Duration::from_secs(3);

/// Waits until the store reaches `rv`, at most [`FRESHNESS_WAIT`];
/// `Err(current)` when it does not.
async fn wait_for_rv(app: &App, rv: u64) -> Result<(), u64> {
    let mut live = app.store.subscribe();
    let deadline = tokio::time::Instant::now() + FRESHNESS_WAIT;
    loop {
        let current = app.store.rv();
        if current >= rv {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, live.recv()).await {
            Ok(Ok(_) | Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(broadcast::error::RecvError::Closed)) | Err(_) => return Err(current),
        }
    }
}

fn stream_response(body: Body) -> Response {
    Response::builder()
        .status(200)
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("valid response")
}

/// Where a watch's events come from and when it ends.
struct Feed {
    initial: Vec<Bytes>,
    live: broadcast::Receiver<Arc<Event>>,
    last_rv: u64,
    timeout: Option<Duration>,
    bookmark_every: Duration,
    stop: tokio::sync::watch::Receiver<bool>,
}

async fn pump(mut w: Watch, feed: Feed, tx: mpsc::Sender<Bytes>) {
    let Feed {
        initial,
        mut live,
        mut last_rv,
        timeout,
        bookmark_every,
        mut stop,
    } = feed;
    for l in initial {
        if tx.send(l).await.is_err() {
            return;
        }
    }
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut ticker = tokio::time::interval(bookmark_every);
    ticker.tick().await;
    loop {
        let sleep_until = deadline
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(86_400 * 365));
        tokio::select! {
            ev = live.recv() => match ev {
                Ok(e) => {
                    if e.rv <= last_rv {
                        continue;
                    }
                    last_rv = e.rv;
                    if let Some(l) = w.event_line(&e)
                        && tx.send(l).await.is_err()
                    {
                        return;
                    }
                }
                // Lagged or closed: end the watch; clients re-watch.
                Err(_) => return,
            },
            _ = ticker.tick() => {
                if w.bookmarks {
                    let b = w.bookmark(last_rv, false);
                    if tx.send(b).await.is_err() {
                        return;
                    }
                }
            }
            _ = tokio::time::sleep_until(sleep_until) => return,
            _ = tx.closed() => return,
            _ = stop.changed() => return,
        }
    }
}
