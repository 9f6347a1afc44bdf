//! WATCH: newline-delimited JSON events over a chunked response.
//!
//! Starts either from a snapshot (no resourceVersion, `0`, or `sendInitialEvents`)
//! emitting synthetic ADDED events, or from the retained history after a given
//! resourceVersion (410 when it is older than the history window; a future one is
//! waited for 3 s, then answered "Too large resource version" as kube does). Selectors are
//! applied with transitions: an object that stops matching is sent as DELETED,
//! one that starts matching as ADDED. The watch itself is served by [`crate::watch`]:
//! past `Config::max_watches` open watches a request gets 429, as kube sheds load.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use tokio::sync::broadcast;

use crate::app::App;
use crate::error::{ApiError, ApiResult};
use crate::http::request::ResourceRequest;
use crate::registry::ResourceInfo;
use crate::table::IncludeObject;
use crate::watch::encode::{Form, Format, error_line};
use crate::watch::filter::Filter;
use crate::watch::stream::{Convert, Options, lines};
use crate::watch::{Start, TooOld};

/// GET ...?watch=1
pub async fn watch(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    // As kube's load shedding, before anything else about the request.
    let Some(slot) = app.watches.slot() else {
        return Ok(crate::http::respond::too_many_requests());
    };
    let selectors = crate::handlers::read::selectors(&r)?;
    let send_initial = r.query.flag("sendInitialEvents");
    if send_initial && r.query.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::error::Cause::new(
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
    let form = if r.wants_table() {
        Form::Table(IncludeObject::parse(r.query.get("includeObject")))
    } else if r.wants_metadata() {
        Form::Metadata
    } else {
        Form::Object
    };
    let filter = Filter {
        prefix: r.info.ns_prefix(r.namespace.as_deref()),
        // GET .../{name}?watch=1 watches one object (fieldSelector is the usual way).
        name: r.name.clone(),
        selectors,
    };
    let start = if rv_param.is_empty() || rv_param == "0" || send_initial {
        Start::Snapshot {
            end_bookmark: send_initial,
        }
    } else {
        let rv: u64 = rv_param
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))?;
        if let Err(current) = wait_for_rv(app, rv).await {
            let status = crate::error::too_large_resource_version(rv, current);
            return Ok(stream_response(Body::from(error_line(&status))));
        }
        Start::After(rv)
    };
    let reg = match app.watches.register(&app.store, filter, start, slot) {
        Ok(reg) => reg,
        Err(TooOld { oldest }) => {
            // kube answers with a 200 stream holding one ERROR event.
            let status =
                ApiError::Expired(format!("too old resource version: {rv_param} ({oldest})"))
                    .to_status();
            return Ok(stream_response(Body::from(error_line(&status))));
        }
    };
    let options = Options {
        format: Format {
            info: r.info.clone(),
            form,
        },
        bookmarks: r.query.flag("allowWatchBookmarks"),
        bookmark_every: app.config.bookmark_interval,
        timeout,
        stop: app.stop.clone(),
        convert: converter(app, &r.info),
    };
    Ok(stream_response(Body::from_stream(lines(reg, options))))
}

/// Converts each event of a watch at a version the CRD's conversion webhook serves.
fn converter(app: &Arc<App>, info: &Arc<ResourceInfo>) -> Option<Convert> {
    if !crate::conversion::uses_webhook(info) {
        return None;
    }
    let (app, info) = (app.clone(), info.clone());
    Some(Arc::new(
        move |obj: serde_json::Value| -> futures::future::BoxFuture<'static, _> {
            let (app, info) = (app.clone(), info.clone());
            Box::pin(async move {
                crate::conversion::to_version(&app, &info, obj)
                    .await
                    .map_err(|e| e.to_status())
            })
        },
    ))
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
