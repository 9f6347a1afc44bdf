//! Components too large for a ConfigMap, served to the operator over HTTP
//! on 127.0.0.1 and bound by URL with a sha256 pin: the examples' (the Go
//! ones), and what `gantry plugin apply` publishes under `gantry dev` (the
//! plugin store, see [`crate::publish::place`]).
//!
//! One server per process ([`super::loopback`]); it serves
//! `GET /sha256/<hex>` from memory, and `PUT /sha256/<hex>` keeps a
//! component whose sha256 is `<hex>`. Nothing else is taken: a binding
//! pins the digest it fetches, so an upload cannot change what a binding
//! runs. What was uploaded is gone when `gantry dev` stops; the operator's
//! plugin cache, keyed by digest, still has every version it loaded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::IntoResponse;

type Served = Mutex<HashMap<String, Arc<Vec<u8>>>>;

fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(Served::default)
}

async fn component(Path(hex): Path<String>) -> impl IntoResponse {
    let bytes = served()
        .lock()
        .expect("served components lock")
        .get(&hex)
        .cloned();
    match bytes {
        Some(bytes) => (StatusCode::OK, bytes.as_ref().clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn upload(Path(hex): Path<String>, body: axum::body::Bytes) -> StatusCode {
    if gantry_sandbox::runtime::digest(&body) != hex {
        return StatusCode::BAD_REQUEST;
    }
    served()
        .lock()
        .expect("served components lock")
        .insert(hex, Arc::new(body.to_vec()));
    StatusCode::CREATED
}

fn start() -> Result<SocketAddr, String> {
    let router = axum::Router::new()
        .route("/sha256/{hex}", axum::routing::get(component).put(upload))
        .layer(axum::extract::DefaultBodyLimit::max(
            gantry_operator::delivery::envelope::MAX_PLUGIN_BYTES,
        ));
    super::loopback::serve_forever("gantry-dev-components", router)
}

fn address() -> anyhow::Result<SocketAddr> {
    static ADDRESS: OnceLock<Result<SocketAddr, String>> = OnceLock::new();
    ADDRESS
        .get_or_init(start)
        .clone()
        .map_err(anyhow::Error::msg)
        .context("serving example components on 127.0.0.1")
}

/// `http://127.0.0.1:PORT`, where the store takes and serves components.
pub fn store() -> anyhow::Result<String> {
    Ok(format!("http://{}", address()?))
}

/// Serve `component` and return the binding lines that fetch it: its
/// `sha256` and a `source.url` on 127.0.0.1.
pub fn serve(component: Vec<u8>) -> anyhow::Result<String> {
    let address = address()?;
    let hex = gantry_sandbox::runtime::digest(&component);
    served()
        .lock()
        .expect("served components lock")
        .insert(hex.clone(), Arc::new(component));
    Ok(format!(
        "sha256: {hex}\nsource: {{url: \"http://{address}/sha256/{hex}\"}}\n"
    ))
}
