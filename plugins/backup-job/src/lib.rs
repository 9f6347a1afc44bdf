//! `BackupJob`: a finalizer that asks a backup service over HTTP to delete a
//! parent's remote backups, and lets the parent go only when they are gone.
//!
//! The service (see `fake_service.py` beside this crate for one to run by
//! hand) answers, for the backups of `NAMESPACE/NAME`:
//!
//! - `GET /v1/backups/NAMESPACE/NAME`: `{"backups": N}`;
//! - `DELETE /v1/backups/NAMESPACE/NAME`: `202` while the deletion is in
//!   progress, `200` or `204` when it is done, `404` when there is nothing
//!   (left) to delete.
//!
//! While the `BackupJob` lives, the plugin reports the count in
//! `status.remoteBackups`. When it is deleted, the plugin sends the DELETE,
//! again on every call: it is idempotent, and the service decides. `202`
//! asks to be called again after `pollMs`; done or nothing there lets the
//! parent go; anything else is a retryable error (the host retries with
//! backoff). A service that hangs is cut off by the call's deadline.
//!
//! Config: `service` (the service's origin, which the binding must allow)
//! and `pollMs` (default 2000).

use std::time::Duration;

use gantry_sdk::http::Request as HttpRequest;
use gantry_sdk::{
    ConditionStatus, PluginError, Reconciler, Request, Response, Value, json, metrics,
};
use serde::Deserialize;

/// The binding's config.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The backup service's origin, e.g. `http://127.0.0.1:8089`.
    pub service: String,
    /// Delay between polls while a deletion is in progress, milliseconds.
    #[serde(default = "default_poll")]
    pub poll_ms: u64,
}

fn default_poll() -> u64 {
    2000
}

/// What the service's GET answers.
#[derive(Debug, Deserialize)]
struct Listing {
    backups: u64,
}

/// What to do with the service's answer to a DELETE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Still deleting: ask again later.
    InProgress,
    /// Nothing is left: let the parent go.
    Done,
    /// The service failed; retry with backoff.
    Failed,
}

/// The meaning of a DELETE's status code.
pub fn deletion(status: u16) -> Deletion {
    match status {
        202 => Deletion::InProgress,
        200 | 204 | 404 => Deletion::Done,
        _ => Deletion::Failed,
    }
}

/// The URL of the parent's backups.
pub fn backups_url(service: &str, namespace: &str, name: &str) -> String {
    format!(
        "{}/v1/backups/{namespace}/{name}",
        service.trim_end_matches('/')
    )
}

/// The plugin.
pub struct BackupJob;

impl BackupJob {
    fn finalize(config: &Config, url: &str) -> Result<Response, PluginError> {
        let response = HttpRequest::delete(url).send()?;
        let outcome = deletion(response.status);
        let label = match outcome {
            Deletion::InProgress => "in_progress",
            Deletion::Done => "done",
            Deletion::Failed => "failed",
        };
        metrics::counter_add("backup_deletion_polls", &[("outcome", label)], 1.0);
        match outcome {
            Deletion::InProgress => Ok(Response::new()
                .condition(
                    "Ready",
                    ConditionStatus::False,
                    "DeletingBackups",
                    "the backup service is deleting the remote backups",
                )
                .requeue_after(Duration::from_millis(config.poll_ms))),
            Deletion::Done => Ok(Response::new().finalized()),
            Deletion::Failed => Err(PluginError::retryable(
                "BackupServiceError",
                format!(
                    "the backup service answered {} to the deletion: {}",
                    response.status,
                    response.text().chars().take(200).collect::<String>()
                ),
            )),
        }
    }
}

impl Reconciler for BackupJob {
    fn reconcile(request: Request) -> Result<Response, PluginError> {
        let config: Config = request.config_as()?;
        let name = request.parent_name()?;
        let namespace = request.parent_namespace().unwrap_or("default");
        let url = backups_url(&config.service, namespace, name);
        if request.finalizing {
            return Self::finalize(&config, &url);
        }
        let response = HttpRequest::get(&url).send()?;
        if !response.is_success() {
            return Err(PluginError::retryable(
                "BackupServiceError",
                format!(
                    "the backup service answered {} to the listing",
                    response.status
                ),
            ));
        }
        let listing: Listing = response.json()?;
        Ok(Response::new()
            .status(&json!({"remoteBackups": listing.backups}))?
            .condition(
                "Ready",
                ConditionStatus::True,
                "BackupsListed",
                format!("{} remote backups", listing.backups),
            ))
    }

    fn validate_config(config: &Value) -> Result<(), String> {
        let config: Config =
            serde_json::from_value(config.clone()).map_err(|e| format!("config: {e}"))?;
        if !(config.service.starts_with("http://") || config.service.starts_with("https://")) {
            return Err(format!(
                "config.service {:?} is not an http(s) origin",
                config.service
            ));
        }
        Ok(())
    }
}

gantry_sdk::export_reconciler!(BackupJob);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_decides_when_the_parent_may_go() {
        assert_eq!(deletion(202), Deletion::InProgress);
        for done in [200, 204, 404] {
            assert_eq!(deletion(done), Deletion::Done, "{done}");
        }
        for failed in [400, 409, 500, 503] {
            assert_eq!(deletion(failed), Deletion::Failed, "{failed}");
        }
        assert_eq!(
            backups_url("http://127.0.0.1:8089/", "default", "db"),
            "http://127.0.0.1:8089/v1/backups/default/db"
        );
    }

    #[test]
    fn config_names_an_http_origin() {
        assert!(BackupJob::validate_config(&json!({"service": "http://127.0.0.1:1"})).is_ok());
        assert!(BackupJob::validate_config(&json!({"service": "ftp://x"})).is_err());
        assert!(BackupJob::validate_config(&json!({})).is_err());
    }
}
