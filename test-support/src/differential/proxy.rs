//! A recording proxy: clients speak plain HTTP to it, it forwards to an
//! [`Upstream`] and appends every exchange to a [`Recording`].
//!
//! Whole responses are read before they are passed on (they are small);
//! watch streams are passed on as they come, and only their first
//! [`WATCH_EVENTS`] events are kept, written when the stream ends or the
//! client goes away.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;

use super::exchange::{Exchange, Payload, Recording, is_watch};
use super::upstream::{Outgoing, Upstream, content_type};

/// Watch events kept per watch.
pub const WATCH_EVENTS: usize = 50;

/// A running proxy; it stops when dropped.
pub struct RecordingProxy {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct Shared {
    upstream: Upstream,
    recording: Arc<Recording>,
    seq: Arc<AtomicU64>,
}

impl RecordingProxy {
    /// Listen on a free loopback port, forwarding to `upstream`.
    pub async fn start(upstream: Upstream, recording: Recording) -> anyhow::Result<RecordingProxy> {
        let shared = Shared {
            upstream,
            recording: Arc::new(recording),
            seq: Arc::new(AtomicU64::new(0)),
        };
        let app = axum::Router::new().fallback(forward).with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(RecordingProxy { addr, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn header(request: &Request, name: &str) -> Option<String> {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

async fn forward(State(shared): State<Shared>, request: Request) -> Response {
    let seq = shared.seq.fetch_add(1, Ordering::Relaxed);
    let mut exchange = Exchange {
        seq,
        method: request.method().to_string(),
        path: request.uri().path().to_string(),
        query: request.uri().query().map(str::to_string),
        content_type: header(&request, "content-type"),
        accept: header(&request, "accept"),
        user_agent: header(&request, "user-agent"),
        body: Payload::Empty,
        watch: is_watch(request.uri().query()),
        status: 0,
        response_content_type: None,
        response_body: Payload::Empty,
        events: Vec::new(),
    };
    let outgoing = Outgoing {
        method: exchange.method.clone(),
        path_and_query: request
            .uri()
            .path_and_query()
            .map_or("/".into(), ToString::to_string),
        content_type: exchange.content_type.clone(),
        accept: exchange.accept.clone(),
        user_agent: exchange.user_agent.clone(),
        body: match request.into_body().collect().await {
            Ok(body) => body.to_bytes().to_vec(),
            Err(e) => return (http::StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        },
    };
    exchange.body = Payload::from_bytes(&outgoing.body);
    let response = match shared.upstream.send(&outgoing).await {
        Ok(response) => response,
        Err(e) => {
            return (http::StatusCode::BAD_GATEWAY, format!("upstream: {e:#}")).into_response();
        }
    };
    exchange.status = response.status().as_u16();
    exchange.response_content_type = content_type(response.headers());
    let (mut parts, body) = response.into_parts();
    parts.headers.remove("content-length");
    parts.headers.remove("transfer-encoding");
    if exchange.watch && exchange.status == 200 {
        let stream = watch_tee(body, exchange, shared.recording.clone());
        return Response::from_parts(parts, Body::from_stream(stream));
    }
    let bytes = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => return (http::StatusCode::BAD_GATEWAY, format!("upstream: {e}")).into_response(),
    };
    exchange.response_body = Payload::from_bytes(&bytes);
    shared.recording.append(&exchange);
    Response::from_parts(parts, Body::from(bytes))
}

/// Pass a watch stream on, keeping its first events; the exchange is
/// written when the stream is dropped (it ended, or the client left).
fn watch_tee(
    body: hyper::body::Incoming,
    exchange: Exchange,
    recording: Arc<Recording>,
) -> impl futures::Stream<Item = Result<bytes::Bytes, hyper::Error>> {
    struct Tee {
        exchange: Exchange,
        pending: Vec<u8>,
        recording: Arc<Recording>,
    }
    impl Drop for Tee {
        fn drop(&mut self) {
            self.recording.append(&self.exchange);
        }
    }
    let mut tee = Tee {
        exchange,
        pending: Vec::new(),
        recording,
    };
    body.into_data_stream().map(move |chunk| {
        if let Ok(bytes) = &chunk
            && tee.exchange.events.len() < WATCH_EVENTS
        {
            tee.pending.extend_from_slice(bytes);
            while let Some(end) = tee.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = tee.pending.drain(..=end).collect();
                if let Ok(event) = serde_json::from_slice(&line)
                    && tee.exchange.events.len() < WATCH_EVENTS
                {
                    tee.exchange.events.push(event);
                }
            }
        }
        chunk
    })
}
