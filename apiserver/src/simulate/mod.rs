//! Simulated workloads: what kube's controllers and a kubelet would make of the
//! workload objects in the embedded server, as KWOK does for a cluster without
//! machines. No container runs; the objects and their status look as in a healthy
//! cluster, so `kubectl rollout status`, `kubectl wait` and operators that report
//! readiness from their children's status behave as they would there.
//!
//! A client of the server like any other (kube-runtime controllers over a
//! [`kube::Client`]), one module per concept:
//! - [`node`]: the one Node, `gantry-dev`, Ready.
//! - [`pods`]: scheduler and kubelet: Pods are bound to the node, then Pending,
//!   then Running and Ready after [`Settings::pod_ready_after`]; Pods that do not
//!   restart (`restartPolicy` Never or `OnFailure`) succeed after as long again.
//! - [`replicasets`], [`deployments`], [`statefulsets`], [`daemonsets`], [`jobs`]:
//!   the workload controllers: children with owner references, scaling, rollouts
//!   and status as kube's controllers write it.
//! - [`autoscalers`]: kube's horizontal pod autoscaler, from a utilization set
//!   by hand in an annotation of each HPA (no metrics server runs here).
//! - [`disruption`]: the status of `PodDisruptionBudgets`, as kube's disruption
//!   controller computes it, so evictions honour budgets.
//! - [`template`]: Pods from pod templates, and template hashes.
//!
//! Deletion is the server's garbage collector's ([`crate::gc`]): every object made
//! here has a controller owner reference.
//!
//! Children are read with a list at each reconcile, not from a cache, so a
//! reconcile always sees what the previous one created (kube's controllers keep
//! "expectations" for that instead).

pub mod autoscalers;
pub mod conditions;
pub mod daemonsets;
pub mod deployments;
pub mod disruption;
pub mod jobs;
pub mod node;
pub mod pods;
pub mod replicasets;
pub mod statefulsets;
pub mod template;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Field manager of every write the simulation makes.
pub const FIELD_MANAGER: &str = "gantry-simulate";

/// Name of the simulated Node.
pub const NODE_NAME: &str = "gantry-dev";

/// How the simulation behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The Node every Pod is scheduled to.
    pub node: String,
    /// How long a Pod stays Pending (`ContainerCreating`) before it is Running and
    /// Ready; also how long a Pod that does not restart runs before it succeeds.
    pub pod_ready_after: Duration,
    /// How often each `HorizontalPodAutoscaler` is looked at again besides its
    /// own changes (kube's `--horizontal-pod-autoscaler-sync-period`).
    pub autoscaler_sync: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            node: NODE_NAME.to_string(),
            pod_ready_after: Duration::from_millis(500),
            autoscaler_sync: Duration::from_secs(15),
        }
    }
}

/// A running simulation; dropping it (or [`Simulation::stop`]) stops it.
#[must_use = "the simulation stops when this is dropped"]
pub struct Simulation {
    task: tokio::task::JoinHandle<()>,
}

impl Simulation {
    /// Starts simulating workloads on the server `client` talks to. Only for the
    /// embedded server: on a real cluster it would fight kube's own controllers.
    pub fn start(client: Client, settings: Settings) -> Self {
        Self {
            task: tokio::spawn(run(client, settings)),
        }
    }

    /// Stops the simulation.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Simulation {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs every simulated controller until the future is dropped.
pub async fn run(client: Client, settings: Settings) {
    let ctx = Arc::new(Ctx {
        client,
        settings,
        clocks: Mutex::default(),
    });
    node::register(&ctx).await;
    tokio::join!(
        pods::run(ctx.clone()),
        replicasets::run(ctx.clone()),
        deployments::run(ctx.clone()),
        statefulsets::run(ctx.clone()),
        daemonsets::run(ctx.clone()),
        jobs::run(ctx.clone()),
        disruption::run(ctx.clone()),
        autoscalers::run(ctx.clone()),
    );
}

/// What every reconcile gets.
pub struct Ctx {
    client: Client,
    settings: Settings,
    /// When each Pod (by uid) entered the stage it is in, for its next transition.
    clocks: Mutex<HashMap<String, (&'static str, Instant)>>,
}

impl Ctx {
    /// How long the Pod `uid` has been in `stage` (zero the first time it is asked).
    fn in_stage(&self, uid: &str, stage: &'static str) -> Duration {
        let mut clocks = self
            .clocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = clocks
            .entry(uid.to_string())
            .or_insert((stage, Instant::now()));
        if entry.0 != stage {
            *entry = (stage, Instant::now());
        }
        entry.1.elapsed()
    }

    /// Forgets the Pod `uid`: it makes no more transitions.
    fn forget(&self, uid: &str) {
        self.clocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(uid);
    }
}

/// Failures of one reconcile; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request to the API server failed.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// An object lacks a field the simulation needs (name, namespace, uid, spec).
    #[error("object has no {0}")]
    Missing(&'static str),
}

/// The result of one reconcile.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs `reconcile` for every object of `K` in all namespaces, and again when an
/// object of `Child` it controls changes.
async fn control<K, Child, F, Fut>(ctx: Arc<Ctx>, reconcile: F)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
    K: 'static,
    Child: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send,
    Child: Sync + 'static,
    F: FnMut(Arc<K>, Arc<Ctx>) -> Fut,
    Fut: std::future::Future<Output = Result<Action>> + Send + 'static,
{
    Controller::new(
        Api::<K>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .owns(
        Api::<Child>::all(ctx.client.clone()),
        watcher::Config::default(),
    )
    .run(reconcile, retry, ctx)
    .for_each(|_| async {})
    .await;
}

// The signature is kube-runtime's error policy.
#[allow(clippy::needless_pass_by_value)]
/// A failed reconcile is tried again soon (a conflict with another writer, most
/// often; or a webhook that refused a Pod).
fn retry<K: Resource<DynamicType = ()>>(obj: Arc<K>, error: &Error, _ctx: Arc<Ctx>) -> Action {
    tracing::debug!(
        kind = %K::kind(&()),
        name = obj.meta().name.as_deref().unwrap_or_default(),
        %error,
        "simulation: reconcile failed; retrying"
    );
    Action::requeue(Duration::from_millis(500))
}

/// Namespace, name and uid of a namespaced object.
fn identity(meta: &ObjectMeta) -> Result<(&str, &str, &str)> {
    Ok((
        meta.namespace
            .as_deref()
            .ok_or(Error::Missing("namespace"))?,
        meta.name.as_deref().ok_or(Error::Missing("name"))?,
        meta.uid.as_deref().ok_or(Error::Missing("uid"))?,
    ))
}

/// The controller owner reference to `owner` that its children carry.
fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Result<OwnerReference> {
    owner.controller_owner_ref(&()).ok_or(Error::Missing("uid"))
}

/// Whether `meta`'s controller is the object with `uid`.
fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The objects of `K` in `namespace` that the object with `uid` controls, not
/// being deleted.
async fn children<K>(ctx: &Ctx, namespace: &str, uid: &str) -> Result<Vec<K>>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    Ok(api
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|c| controlled_by(c.meta(), uid) && c.meta().deletion_timestamp.is_none())
        .collect())
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    }
}

/// Merge-patches `status` into the status of `obj` through `/status`, unless
/// `obj` already has it (condition timestamps aside). Fields that are `null` in
/// `status` are removed (kube omits zero counts).
async fn write_status<K>(ctx: &Ctx, obj: &K, status: Value) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let live = serde_json::to_value(obj)
        .ok()
        .and_then(|mut o| o.get_mut("status").map(Value::take))
        .unwrap_or(Value::Null);
    if same_status(&live, &status) {
        return Ok(());
    }
    let (namespace, name, _) = identity(obj.meta())?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch_status(name, &params(), &Patch::Merge(json!({ "status": status })))
        .await?;
    Ok(())
}

/// Whether the `live` status already is `wanted` (its `null`s absent, condition
/// timestamps not compared).
fn same_status(live: &Value, wanted: &Value) -> bool {
    fn normalized(v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(k, v)| !v.is_null() && !k.ends_with("Time"))
                    .map(|(k, v)| (k.clone(), normalized(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
            other => other.clone(),
        }
    }
    let mut live = normalized(live);
    // Fields the simulation does not write are not compared.
    if let (Value::Object(live), Value::Object(written)) = (&mut live, wanted) {
        live.retain(|k, _| written.contains_key(k));
    }
    live == normalized(wanted)
}

/// A count as kube writes it: absent when zero.
fn count(n: i32) -> Value {
    if n == 0 { Value::Null } else { json!(n) }
}

/// Creates `obj` in `namespace`; the created object.
async fn create<K>(ctx: &Ctx, namespace: &str, obj: &K) -> Result<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    Ok(api.create(&params, obj).await?)
}

/// Merge-patches `patch` into the object `name` in `namespace`.
async fn patch<K>(ctx: &Ctx, namespace: &str, name: &str, patch: Value) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch(name, &params(), &Patch::Merge(patch)).await?;
    Ok(())
}

/// Deletes the object `name` in `namespace` (already gone is fine).
async fn delete<K>(ctx: &Ctx, namespace: &str, name: &str) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Now, as the timestamps of status are written.
fn now() -> String {
    crate::objects::meta::now_rfc3339()
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_compare_without_nulls_and_timestamps() {
        let live = json!({"replicas": 2, "conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ], "other": 1});
        let wanted = json!({"replicas": 2, "readyReplicas": null, "conditions": [
            {"type": "Available", "status": "True", "lastTransitionTime": "2026-02-01T00:00:00Z"}
        ]});
        assert!(same_status(&live, &wanted));
        assert!(!same_status(&live, &json!({"replicas": 3})));
        assert!(!same_status(&json!({}), &json!({"replicas": 1})));
        assert!(!same_status(
            &json!({"replicas": 1, "unavailableReplicas": 1}),
            &json!({"replicas": 1, "unavailableReplicas": null})
        ));
    }
}
