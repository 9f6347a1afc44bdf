//! One conversion through a CRD's webhook, as kube's `webhookConverter.Convert` for
//! one object: a review unless it is at the desired version already, the answer
//! checked, and each error message naming the object's version and kind as kube does
//! (`conversion webhook for GROUP/VERSION, Kind=KIND ...`).

use serde_json::Value;

use super::Webhook;
use super::review::{self, Refused};
use crate::admission::client::PostError;
use crate::app::App;

/// `obj` at `desired` (`group/version`); not sent when it is there already. Errors
/// are the message kube answers with.
pub async fn convert(
    app: &App,
    hook: &Webhook,
    obj: Value,
    desired: &str,
) -> Result<Value, String> {
    let from = api_version(&obj);
    if from == desired {
        return Ok(obj);
    }
    let input = {
        let (group, version) = from.rsplit_once('/').unwrap_or(("", from));
        format!(
            "{group}/{version}, Kind={}",
            obj.get("kind").and_then(Value::as_str).unwrap_or("")
        )
    };
    let Some(review_version) = hook
        .review_versions
        .iter()
        .find(|v| *v == "v1" || *v == "v1beta1")
    else {
        return Err("no supported conversion review versions".into());
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let body = review::request(review_version, &uid, desired, std::slice::from_ref(&obj));
    let answer = app
        .webhooks
        .clients
        .post(
            &app.store,
            &hook.endpoint,
            &hook.ca_bundle,
            super::TIMEOUT,
            serde_json::to_vec(&body).expect("JSON serializes"),
        )
        .await
        .map_err(|e| format!("conversion webhook for {input} failed: {}", post_error(e)))?;
    let mut converted = review::converted(review_version, &uid, &answer)
        .map_err(|e| format!("conversion webhook for {input} failed: {e}"))?;
    if converted.len() != 1 {
        return Err(format!(
            "conversion webhook for {input} returned {} objects, expected 1",
            converted.len()
        ));
    }
    review::check(&obj, converted.remove(0), desired).map_err(|r| match r {
        Refused::GroupVersion { expected, received } => format!(
            "conversion webhook for {input} returned invalid object at index 0: invalid groupVersion (expected {expected}, received {received})"
        ),
        Refused::Kind { expected, received } => format!(
            "conversion webhook for {input} returned invalid object at index 0: invalid kind (expected {expected}, received {received})"
        ),
        Refused::Object(m) => format!("conversion webhook for {input} returned invalid object: {m}"),
        Refused::Metadata(m) => {
            format!("conversion webhook for {input} returned invalid metadata: {m}")
        }
    })
}

fn api_version(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

/// kube's rest client's words for a failed POST.
fn post_error(e: PostError) -> String {
    match e {
        PostError::Setup(m) => m,
        PostError::Timeout { url } => format!(
            "Post {url:?}: net/http: request canceled (Client.Timeout exceeded while awaiting headers)"
        ),
        PostError::Transport { url, message } => format!("Post {url:?}: {message}"),
        PostError::Status { body, .. } => format!(
            "an error on the server ({:?}) has prevented the request from succeeding",
            String::from_utf8_lossy(&body)
        ),
    }
}
