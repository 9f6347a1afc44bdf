//! One conversion through a CRD's webhook, as kube's `webhookConverter.Convert`: the
//! objects not yet at the desired version go in one review, the answer is checked,
//! and each error message names the webhook's input as kube does
//! (`conversion webhook for GROUP/VERSION, Kind=KIND ...`).

use serde_json::Value;

use super::Webhook;
use super::review::{self, Refused};
use crate::admission::client::PostError;
use crate::app::App;

/// `objects` at `desired` (`group/version`); those already there are not sent.
/// `list`: the objects are a list's items (kube's messages then name an index).
/// Errors are the message kube answers with.
pub async fn convert(
    app: &App,
    hook: &Webhook,
    kind: &str,
    mut objects: Vec<Value>,
    desired: &str,
    list: bool,
) -> Result<Vec<Value>, String> {
    let todo: Vec<usize> = (0..objects.len())
        .filter(|&i| api_version(&objects[i]) != desired)
        .collect();
    let Some(&first) = todo.first() else {
        return Ok(objects);
    };
    let input = {
        let (group, version) = api_version(&objects[first])
            .rsplit_once('/')
            .map_or(("", api_version(&objects[first])), |(g, v)| (g, v));
        let kind = if list {
            format!("{kind}List")
        } else {
            kind.to_string()
        };
        format!("{group}/{version}, Kind={kind}")
    };
    let Some(review_version) = hook
        .review_versions
        .iter()
        .find(|v| *v == "v1" || *v == "v1beta1")
    else {
        return Err("no supported conversion review versions".into());
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let sent: Vec<Value> = todo.iter().map(|&i| objects[i].clone()).collect();
    let body = review::request(review_version, &uid, desired, &sent);
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
    let converted = review::converted(review_version, &uid, &answer)
        .map_err(|e| format!("conversion webhook for {input} failed: {e}"))?;
    if converted.len() != sent.len() {
        return Err(format!(
            "conversion webhook for {input} returned {} objects, expected {}",
            converted.len(),
            sent.len()
        ));
    }
    for (n, (i, c)) in todo.into_iter().zip(converted).enumerate() {
        let checked = review::check(&objects[i], c, desired);
        objects[i] = checked.map_err(|r| refused(&input, list, n, r))?;
    }
    Ok(objects)
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

/// The message of a refused object: kube words single objects and list items apart
/// (and counts list items from 1 in some of them, as it increments first).
fn refused(input: &str, list: bool, n: usize, r: Refused) -> String {
    let at = if list {
        format!("returned invalid converted object at index {}", n + 1)
    } else {
        "returned invalid object at index 0".to_string()
    };
    match r {
        Refused::GroupVersion { expected, received } => format!(
            "conversion webhook for {input} {at}: invalid groupVersion (expected {expected}, received {received})"
        ),
        Refused::Kind { expected, received } => format!(
            "conversion webhook for {input} {at}: invalid kind (expected {expected}, received {received})"
        ),
        Refused::Object(m) if list => format!("conversion webhook for {input} {at}: {m}"),
        Refused::Object(m) => {
            format!("conversion webhook for {input} returned invalid object: {m}")
        }
        Refused::Metadata(m) if list => format!(
            "conversion webhook for {input} returned invalid metadata in object at index {}: {m}",
            n + 1
        ),
        Refused::Metadata(m) => {
            format!("conversion webhook for {input} returned invalid metadata: {m}")
        }
    }
}
