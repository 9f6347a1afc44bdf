//! The policies on the webhook server: `POST /policies/<name>` with an
//! `admission.k8s.io/v1` AdmissionReview in and out.
//!
//! Status codes: 200 with the review for every request the server could
//! read, whatever the policy did (a failed policy is answered by its
//! failurePolicy); 400 for a body that is not an AdmissionReview v1; 404
//! for a policy not in service after [`ARRIVAL_WAIT`] (the API server then
//! applies the webhook's own failurePolicy).

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use std::time::Duration;

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
    wait_for_arrival(&policies, &name).await;
    match policies.evaluate(&name, request).await {
        Some(decision) => axum::Json(decision.response.to_review()).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            format!("no policy named {name} is in service"),
        )
            .into_response(),
    }
}

/// How long a call for a policy not in service waits for it. The leader
/// writes a new policy into the webhook configuration as soon as it serves
/// it, and the Service may send the first calls to another replica still
/// loading the same binding: those calls wait rather than fail.
pub const ARRIVAL_WAIT: Duration = Duration::from_secs(3);

async fn wait_for_arrival(policies: &Policies, name: &str) {
    let deadline = tokio::time::Instant::now() + ARRIVAL_WAIT;
    while policies.get(name).is_none() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The policies' routes on the webhook server (`crate::webhook::server`).
pub fn router(policies: Policies) -> Router {
    Router::new()
        .route("/policies/{name}", post(admit))
        .with_state(policies)
}
