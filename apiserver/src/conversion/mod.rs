//! Custom resources served at a version other than the one they are stored at, as
//! kube-apiserver's CR converter does.
//!
//! Read in the order of a conversion:
//! - [`Webhook`]: a CRD's `spec.conversion` with strategy `Webhook`, parsed once per CRD
//!   version in the registry ([`crate::registry::CrdVersion::conversion`]).
//! - [`review`]: the `ConversionReview` sent and kube's checks of the one received
//!   (uid, result, count, apiVersion and kind, metadata restored from the original).
//! - [`call`]: one HTTPS call with the admission webhooks' client and kube's fixed timeout.
//! - [`validation`]: what kube refuses in a CRD's `spec.conversion`.
//!
//! The handlers convert through [`to_version`] / [`to_versions`] (reads, watches, the
//! answer to a write) and [`to_storage`] (before a write is stored). Strategy `None`
//! only rewrites `apiVersion`; built-in resources pass through unchanged.

pub mod call;
pub mod review;
pub mod validation;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use serde_json::{Value, json};

use crate::admission::config::Endpoint;
use crate::app::App;
use crate::error::{ApiError, ApiResult};
use crate::registry::ResourceInfo;

/// How long kube-apiserver waits for a conversion webhook (fixed; its rest client's
/// timeout, sent as `?timeout=30s`).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// A CRD's conversion webhook (`spec.conversion.webhook`).
#[derive(Clone, Debug, PartialEq)]
pub struct Webhook {
    /// Where reviews go.
    pub endpoint: Endpoint,
    /// PEM trust roots (empty: the system roots).
    pub ca_bundle: Vec<u8>,
    /// `conversionReviewVersions`, in order (the first kube understands is sent).
    pub review_versions: Vec<String>,
}

impl Webhook {
    /// The webhook of a stored CRD; None unless its strategy is `Webhook`.
    pub fn of_crd(crd: &Value) -> Option<Arc<Webhook>> {
        let conversion = crd.pointer("/spec/conversion")?;
        if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
            return None;
        }
        let hook = conversion.get("webhook")?;
        let cc: admreg::WebhookClientConfig =
            serde_json::from_value(hook.get("clientConfig")?.clone()).ok()?;
        let review_versions = hook
            .get("conversionReviewVersions")
            .and_then(Value::as_array)
            .map(|vs| {
                vs.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        Some(Arc::new(Webhook {
            endpoint: crate::admission::config::endpoint(&cc),
            ca_bundle: cc.ca_bundle.map(|b| b.0).unwrap_or_default(),
            review_versions,
        }))
    }
}

/// `obj` at `info`'s version (a get, a watch event, or the answer to a write).
pub async fn to_version(app: &App, info: &ResourceInfo, obj: Value) -> ApiResult<Value> {
    convert(app, info, obj, &info.api_version()).await
}

/// The items of a list at `info`'s version. As kube-apiserver decodes a list read
/// from storage item by item, each item not at the version is its own review (a few
/// at a time here); the first failure, in item order, is the answer.
pub async fn to_versions(
    app: &App,
    info: &ResourceInfo,
    objs: Vec<Value>,
) -> ApiResult<Vec<Value>> {
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(objs)
        .map(|o| to_version(app, info, o))
        .buffered(CONCURRENT_REVIEWS)
        .try_collect()
        .await
}

/// How many reviews of one list are in flight at once.
const CONCURRENT_REVIEWS: usize = 8;

/// `obj` (at `info`'s version) at the storage version, before it is stored.
pub async fn to_storage(app: &App, info: &ResourceInfo, obj: Value) -> ApiResult<Value> {
    convert(app, info, obj, &storage_api_version(info)).await
}

/// `group/version` of the resource's storage version.
pub fn storage_api_version(info: &ResourceInfo) -> String {
    if info.storage_group.is_empty() {
        info.storage_version.clone()
    } else {
        format!("{}/{}", info.storage_group, info.storage_version)
    }
}

/// Whether `info` is served through a conversion webhook (stored objects at another
/// version are converted; a watch then converts each event).
pub fn uses_webhook(info: &ResourceInfo) -> bool {
    info.crd.as_ref().is_some_and(|c| c.conversion.is_some())
}

async fn convert(
    app: &App,
    info: &ResourceInfo,
    mut obj: Value,
    desired: &str,
) -> ApiResult<Value> {
    let Some(crd) = &info.crd else {
        return Ok(obj);
    };
    let Some(hook) = &crd.conversion else {
        obj["apiVersion"] = json!(desired);
        return Ok(obj);
    };
    call::convert(app, hook, obj, desired).await.map_err(failed)
}

/// A failed conversion as kube answers it: 500 with the message and no reason.
fn failed(message: impl Into<String>) -> ApiError {
    let message: String = message.into();
    ApiError::Rejected(Box::new(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "code": 500,
    })))
}
