//! The converters on the webhook server: `POST /convert/<crd>` with an
//! `apiextensions.k8s.io/v1` `ConversionReview` in and out.
//!
//! Status codes: 200 with the review for every request the server could
//! read, a failed conversion answered by a `Failure` result whose message
//! the API server passes on to its client (also when no converter for the
//! CRD is in service); 400 for a body that is not a `ConversionReview` v1.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::{Converters, review};

async fn convert(
    State(converters): State<Converters>,
    Path(crd): Path<String>,
    body: Bytes,
) -> Response {
    let request = match review::parse_review(&body) {
        Ok(request) => request,
        Err(e) => {
            tracing::warn!(%crd, error = %e, "unreadable conversion review");
            return (StatusCode::BAD_REQUEST, e).into_response();
        }
    };
    let result = converters
        .convert(&crd, &request)
        .await
        .unwrap_or_else(|| Err(format!("no converter for {crd} is in service")));
    axum::Json(review::answer(&request.uid, result)).into_response()
}

/// The converters' routes on the webhook server (`crate::webhook::server`).
pub fn router(converters: Converters) -> Router {
    Router::new()
        .route("/convert/{crd}", post(convert))
        .with_state(converters)
}
