//! What every cluster has from its first second, made as kube-apiserver and
//! kube-controller-manager make it: the system namespaces and the RBAC
//! bootstrap policy at start ([`at_start`]), then, kept up to date by
//! [`run`] after writes: the `default/kubernetes` Service with its
//! `Endpoints` and `EndpointSlice`, the rules of aggregated `ClusterRoles`, and
//! the `kube-root-ca.crt` ConfigMap of every namespace; and, as
//! kube-controller-manager's csrsigning controller, the certificates of
//! approved requests ([`crate::certificates::signer`]).
//!
//! These writes are the control plane's own: they are not requests, so
//! they are not counted and do not go through admission.

pub mod aggregation;
pub mod kubernetes_service;
pub mod namespaces;
pub mod policy;
pub mod root_ca;
pub mod system_object;

use std::sync::Arc;

use crate::app::App;
use crate::storage::{Event, View, Write};

/// The field manager of what kube-apiserver writes itself.
pub const APISERVER: &str = "kube-apiserver";

/// The namespaces and policy objects missing from the store, as creates.
pub fn at_start(app: &App, view: &View<'_>) -> Vec<Write> {
    namespaces::objects(&app.registry)
        .into_iter()
        .chain(policy::objects(&app.registry))
        .filter(|(key, _)| view.get(key).is_none())
        .map(|(key, obj)| Write::Put(key, obj))
        .collect()
}

/// One pass of the controllers: the writes that bring the kubernetes
/// Service, aggregated roles and root CA ConfigMaps up to date.
pub fn plan(app: &App, view: &View<'_>) -> Vec<Write> {
    let mut writes = kubernetes_service::plan(&app.registry, view, app.config.listen);
    writes.extend(aggregation::plan(&app.registry, view));
    if let Some(tls) = &app.tls {
        writes.extend(root_ca::plan(&app.registry, view, &tls.ca_pem));
        writes.extend(crate::certificates::signer::plan(&app.registry, view, tls));
    }
    writes
}

/// Whether committed `events` may leave work for the controllers: changes to
/// namespaces, `ClusterRoles`, or the objects they keep.
pub fn concerns(events: &[Arc<Event>]) -> bool {
    events.iter().any(|e| {
        let mut parts = e.key.splitn(4, '/');
        let (group, plural, _, name) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        matches!(
            (group, plural),
            ("", "namespaces")
                | (crate::auth::rbac::GROUP, "clusterroles")
                | (crate::certificates::GROUP, "certificatesigningrequests")
        ) || (plural == "configmaps" && name == root_ca::NAME)
            || name == kubernetes_service::NAME
    })
}

/// Runs one pass now (so a server that has started serves the objects).
pub fn reconcile(app: &App) {
    let result = app
        .store
        .commit(|view| Ok::<_, std::convert::Infallible>(((), plan(app, view))));
    if let Ok(Ok(((), events))) = result {
        app.after_commit(&events);
    }
}

/// Runs the controllers after every write that concerns them, until `stop`.
pub async fn run(app: Arc<App>, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            () = app.bootstrap.notified() => {}
            _ = stop.changed() => return,
        }
        // A pass that writes wakes the next one; writes settle in a few passes.
        let pass = app.clone();
        if let Err(e) = app.commit(move |view| Ok(((), plan(&pass, view)))).await {
            tracing::warn!("bootstrap controllers' pass failed: {e}");
        }
    }
}
