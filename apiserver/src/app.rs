//! Shared server state: the resource registry, the store, configuration, the write
//! counter, and the wake-up signal of the background controllers.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::Notify;

use crate::config::Config;
use crate::error::{ApiError, ApiResult};
use crate::registry::{Registry, ResourceInfo};
use crate::storage::{Event, Store, View, Write};

/// Counts of successful mutating requests, by (verb, resource).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteCounts {
    /// (verb, `resource[.group][/subresource]`) -> count.
    pub by_verb_resource: BTreeMap<(String, String), u64>,
}

impl WriteCounts {
    /// Total number of successful writes.
    pub fn total(&self) -> u64 {
        self.by_verb_resource.values().sum()
    }

    /// Count for one verb (`create`, `update`, `patch`, `delete`, `deletecollection`)
    /// and resource (e.g. `configmaps`, `deployments.apps`, `widgets.example.com/status`).
    pub fn get(&self, verb: &str, resource: &str) -> u64 {
        self.by_verb_resource
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// The writes made after `earlier` (a previous snapshot of the same counter).
    #[must_use]
    pub fn since(&self, earlier: &WriteCounts) -> WriteCounts {
        let by_verb_resource = self
            .by_verb_resource
            .iter()
            .map(|(k, n)| {
                (
                    k.clone(),
                    n - earlier
                        .by_verb_resource
                        .get(k)
                        .copied()
                        .unwrap_or(0)
                        .min(*n),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        WriteCounts { by_verb_resource }
    }

    /// Total for one resource across verbs.
    pub fn for_resource(&self, resource: &str) -> u64 {
        self.by_verb_resource
            .iter()
            .filter(|((_, r), _)| r == resource)
            .map(|(_, n)| n)
            .sum()
    }
}

/// The server's shared state.
pub struct App {
    /// Served resources.
    pub registry: Registry,
    /// Issues and verifies service-account tokens.
    pub service_account_tokens: Arc<crate::auth::tokens::Signer>,
    /// Objects.
    pub store: Store,
    /// Configuration.
    pub config: Config,
    /// Successful mutating requests.
    pub writes: Mutex<WriteCounts>,
    /// Wakes the garbage collector / namespace controller after writes.
    pub controllers: Notify,
    /// Becomes true when the server shuts down (open watches end).
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// The current admission webhooks and their HTTPS clients.
    pub webhooks: crate::admission::Webhooks,
    /// The current `ValidatingAdmissionPolicies` and their bindings.
    pub policies: crate::admission::policy::Policies,
    /// The open watches.
    pub watches: Arc<crate::watch::Hub>,
    /// Wakes the bootstrap controllers (kubernetes Service, aggregated roles,
    /// root CA ConfigMaps) after writes that concern them.
    pub bootstrap: Notify,
    /// The TLS identity served (its CA is published and signs certificates).
    pub tls: Option<Arc<crate::tls::Identity>>,
}

impl App {
    /// Records one successful mutating request.
    pub fn count_write(&self, verb: &str, resource: String) {
        let mut w = self
            .writes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *w.by_verb_resource
            .entry((verb.to_string(), resource))
            .or_default() += 1;
    }

    /// Runs a store transaction (off the executor when the store is durable) and wakes
    /// the controllers if anything was written.
    pub async fn commit<T, F>(self: &Arc<Self>, f: F) -> ApiResult<(T, Vec<Arc<Event>>)>
    where
        T: Send + 'static,
        F: FnOnce(&View<'_>) -> ApiResult<(T, Vec<Write>)> + Send + 'static,
    {
        let result = if self.store.is_durable() {
            let app = self.clone();
            tokio::task::spawn_blocking(move || app.store.commit(f))
                .await
                .map_err(|e| ApiError::Internal(format!("storage task failed: {e}")))?
        } else {
            self.store.commit(f)
        };
        let (out, events) = result.map_err(|e| match e {
            // kube passes etcd's error through as a Status without a reason.
            crate::storage::StoreError::TooLarge => {
                ApiError::Rejected(Box::new(serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": e.to_string(), "code": 500,
                })))
            }
            e @ crate::storage::StoreError::Durable(_) => ApiError::Internal(e.to_string()),
        })??;
        if !events.is_empty() {
            self.after_commit(&events);
        }
        Ok((out, events))
    }
}

impl App {
    /// Keeps derived state in step with committed events: CRDs → registry, webhook
    /// configurations → webhooks, policies and bindings → policies; wakes controllers.
    pub fn after_commit(&self, events: &[Arc<Event>]) {
        if events
            .iter()
            .any(|e| crate::admission::Webhooks::is_config_key(&e.key))
        {
            self.webhooks.reload(&self.store);
        }
        if events
            .iter()
            .any(|e| crate::admission::policy::Policies::is_policy_key(&e.key))
        {
            self.policies.reload(&self.store);
        }
        let crd_prefix = format!("{}/{}/", crate::crd::GROUP, crate::crd::PLURAL);
        for e in events {
            if e.key.starts_with(&crd_prefix) {
                let current = (e.kind != crate::storage::EventType::Deleted).then(|| &*e.object);
                crate::crd::sync(&self.registry, current, e.previous.as_deref());
            }
        }
        // The controllers only have work after deletions, on deleting objects, on
        // objects with owners (whose owners may be gone), and on CRDs (APIServices).
        let relevant = events.iter().any(|e| {
            e.kind == crate::storage::EventType::Deleted
                || e.key.starts_with(&crd_prefix)
                || crate::objects::meta::is_deleting(&e.object)
                || e.object
                    .pointer("/metadata/ownerReferences")
                    .is_some_and(|r| !r.is_null())
        });
        if relevant {
            self.controllers.notify_one();
        }
        if crate::bootstrap::concerns(events) {
            self.bootstrap.notify_one();
        }
    }
}

/// A stored object as served at `info`'s version: converted (a CRD's conversion
/// webhook, see [`crate::conversion`]), then [`present`]ed.
pub async fn serve(app: &App, info: &ResourceInfo, obj: &Value) -> ApiResult<Value> {
    if !crate::conversion::uses_webhook(info) {
        return Ok(present(info, obj));
    }
    let obj = crate::conversion::to_version(app, info, obj.clone()).await?;
    Ok(present(info, &obj))
}

/// A list's stored items as served at `info`'s version (each converted, as kube
/// converts a list read from storage).
pub async fn serve_all<T: Borrow<Value> + Sync>(
    app: &App,
    info: &ResourceInfo,
    objs: &[T],
) -> ApiResult<Vec<Value>> {
    if !crate::conversion::uses_webhook(info) {
        return Ok(objs.iter().map(|o| present(info, o.borrow())).collect());
    }
    let objs = objs.iter().map(|o| o.borrow().clone()).collect();
    let objs = crate::conversion::to_versions(app, info, objs).await?;
    Ok(objs.iter().map(|o| present(info, o)).collect())
}

/// The object as served at `info`'s version, once converted: custom resources get the
/// requested `apiVersion` and their schema defaults applied on read.
pub fn present(info: &ResourceInfo, obj: &Value) -> Value {
    if crate::objects::events::is_events_v1(info) {
        return crate::objects::events::from_core(obj);
    }
    if info.group.is_empty() && info.plural == "events" {
        return crate::objects::events::present_core(obj);
    }
    if crate::objects::hpa::is_hpa(info) {
        return crate::objects::hpa::present(info, obj);
    }
    let mut obj = obj.clone();
    if let Some(crd) = &info.crd {
        obj["apiVersion"] = Value::String(info.api_version());
        if let Some(schema) = &crd.schema {
            schema.default(&mut obj);
        }
    }
    obj
}
