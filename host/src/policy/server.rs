//! The policies on the webhook server: `POST /policies/<name>` with an
//! `admission.k8s.io/v1` AdmissionReview in and out.
//!
//! Status codes: 200 with the review for every request the server could
//! read, whatever the policy did (a failed policy is answered by its
//! failurePolicy); 400 for a body that is not an AdmissionReview v1; 404
//! for a policy not in service (the API server then applies the webhook's
//! own failurePolicy).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::Policies;
use super::review;

async fn admit(
    State(policies): State<Policies>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let request = match review::parse_review(&body) {
        Ok(request) => request,
        Err(e) => {
            tracing::warn!(policy = %name, error = %e, "unreadable admission review");
            return (StatusCode::BAD_REQUEST, e.to_string()).into_response();
        }
    };
    match policies.evaluate(&name, request).await {
        Some(decision) => axum::Json(decision.response.to_review()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no policy named {name} is in service"),
        )
            .into_response(),
    }
}

/// The policies' routes on the webhook server (`crate::webhook::server`).
pub fn router(policies: Policies) -> Router {
    Router::new()
        .route("/policies/{name}", post(admit))
        .with_state(policies)
}
