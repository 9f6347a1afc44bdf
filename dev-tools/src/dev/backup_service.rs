//! A stand-in for the backup service of the `backup-job` example, so that
//! the example's finalizer has something to talk to in `gantry dev`: one
//! per process on a free loopback port ([`super::loopback`]), and the
//! example's binding is pointed at it when installed.
//!
//! `GET /v1/backups/NS/NAME` answers `{"backups": N}`; the first `DELETE`
//! of a path answers `202` (in progress), the second `204` (done), later
//! ones `404`. Every request must carry the token the example's Secret
//! holds (the host adds it; the plugin never sees it), else `401`. State
//! lives in memory: a restart of `gantry dev` starts with every parent's
//! backups in place again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The origin the example's `binding.yaml` names (where its
/// `fake_service.py` listens), replaced by the stand-in's.
pub const EXAMPLE_ORIGIN: &str = "http://127.0.0.1:8089";
/// The Secret (in the operator's namespace) whose `token` the host sends.
pub const TOKEN_SECRET: &str = "backup-service-token";
/// The `Authorization` value the stand-in expects.
const TOKEN: &str = "Bearer gantry-dev";
/// Backups each parent has until they are deleted.
const BACKUPS: u64 = 3;

/// Deletes asked for, per `NS/NAME`.
type Deletes = Arc<Mutex<HashMap<String, u32>>>;

/// The Secret holding the stand-in's token, in `namespace`.
pub fn token_secret(namespace: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": TOKEN_SECRET, "namespace": namespace},
        "stringData": {"token": TOKEN},
    })
}

/// `http://127.0.0.1:PORT` of the stand-in, started on first use.
pub fn origin() -> anyhow::Result<String> {
    static ORIGIN: OnceLock<Result<String, String>> = OnceLock::new();
    ORIGIN
        .get_or_init(|| {
            let router = Router::new()
                .route("/v1/backups/{ns}/{name}", axum::routing::any(answer))
                .with_state(Deletes::default());
            super::loopback::serve_forever("gantry-dev-backup-service", router)
                .map(|addr| format!("http://{addr}"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
        .context("serving the stand-in backup service on 127.0.0.1")
}

/// The `backup-job` example's binding with the stand-in's origin where
/// the example names its own.
pub fn point_binding_at_stand_in(binding_yaml: &str) -> anyhow::Result<String> {
    Ok(binding_yaml.replace(EXAMPLE_ORIGIN, &origin()?))
}

async fn answer(
    State(deletes): State<Deletes>,
    method: Method,
    headers: HeaderMap,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(TOKEN)
    {
        return (StatusCode::UNAUTHORIZED, "a valid token is required").into_response();
    }
    let key = format!("{ns}/{name}");
    let mut deletes = deletes.lock().expect("backup service lock");
    let asked = deletes.get(&key).copied().unwrap_or(0);
    if method == Method::DELETE {
        deletes.insert(key, asked + 1);
        return match asked {
            0 => (StatusCode::ACCEPTED, "deleting").into_response(),
            1 => StatusCode::NO_CONTENT.into_response(),
            _ => StatusCode::NOT_FOUND.into_response(),
        };
    }
    if method != Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let backups = if asked >= 2 { 0 } else { BACKUPS };
    axum::Json(json!({"backups": backups})).into_response()
}
