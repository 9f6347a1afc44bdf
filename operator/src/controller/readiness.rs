//! What `/readyz` reports: the initial bindings (and admission policies)
//! are processed, the webhook server presents the certificate of the
//! shared Secret (with `--webhook-cert-secret`), the watch caches of every
//! binding in service have synced, and this replica's role.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::context::BindingContext;

/// Readiness of the operator, shared with the health endpoint.
#[derive(Default)]
pub struct Readiness {
    loaded: AtomicBool,
    bindings: Mutex<BTreeMap<String, Arc<BindingContext>>>,
    leading: Mutex<Option<watch::Receiver<bool>>>,
    policies: Mutex<Option<crate::policy::Policies>>,
    webhook_certificate: Mutex<Option<watch::Receiver<bool>>>,
}

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness")
            .field("loaded", &self.loaded)
            .finish_non_exhaustive()
    }
}

impl Readiness {
    /// The initial bindings are processed (`true`), or the operator is
    /// stopping (`false`).
    pub fn set_loaded(&self, loaded: bool) {
        self.loaded.store(loaded, Ordering::SeqCst);
    }

    /// The bindings in service now.
    pub fn set_bindings(&self, bindings: impl IntoIterator<Item = (String, Arc<BindingContext>)>) {
        *self.bindings.lock().unwrap() = bindings.into_iter().collect();
    }

    /// With leader election: whether this replica leads.
    pub fn set_leading(&self, leading: Option<watch::Receiver<bool>>) {
        *self.leading.lock().unwrap() = leading;
    }

    /// The admission policies this replica serves: it is not ready before
    /// the policy bindings found at start are loaded.
    pub fn set_policies(&self, policies: crate::policy::Policies) {
        *self.policies.lock().unwrap() = Some(policies);
    }

    /// With `--webhook-cert-secret`: whether the webhook server presents
    /// the Secret's certificate. Until it does, the Service must not send
    /// the API server's calls to this replica.
    pub fn set_webhook_certificate(&self, served: watch::Receiver<bool>) {
        *self.webhook_certificate.lock().unwrap() = Some(served);
    }

    /// `leader`, `follower`, or `standalone` without leader election.
    pub fn role(&self) -> &'static str {
        match &*self.leading.lock().unwrap() {
            None => "standalone",
            Some(rx) if *rx.borrow() => "leader",
            Some(_) => "follower",
        }
    }

    /// The bindings and the admission policies in service now, by name.
    pub fn in_service(&self) -> (Vec<String>, Vec<String>) {
        let bindings = self.bindings.lock().unwrap().keys().cloned().collect();
        let mut policies: Vec<String> = self
            .policies
            .lock()
            .unwrap()
            .as_ref()
            .map(|p| p.all().iter().map(|p| p.config_map.clone()).collect())
            .unwrap_or_default();
        policies.sort();
        (bindings, policies)
    }

    /// Whether the operator is ready, and a line saying why (not).
    pub fn report(&self) -> (bool, String) {
        if !self.loaded.load(Ordering::SeqCst) {
            return (false, "bindings not loaded yet".into());
        }
        if self
            .policies
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|p| !p.is_loaded())
        {
            return (false, "admission policies not loaded yet".into());
        }
        if self
            .webhook_certificate
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|served| !*served.borrow())
        {
            return (
                false,
                "webhook certificate from the Secret not served yet".into(),
            );
        }
        let bindings = self.bindings.lock().unwrap();
        let unsynced: Vec<&str> = bindings
            .iter()
            .filter(|(_, ctx)| !ctx.caches_synced())
            .map(|(name, _)| name.as_str())
            .collect();
        if !unsynced.is_empty() {
            return (
                false,
                format!("caches not synced for bindings: {}", unsynced.join(", ")),
            );
        }
        (
            true,
            format!(
                "ok: {} bindings in service, caches synced, {}",
                bindings.len(),
                self.role()
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_bindings_and_policies_are_loaded_naming_the_role() {
        let readiness = Readiness::default();
        assert_eq!(
            readiness.report(),
            (false, "bindings not loaded yet".to_string())
        );
        readiness.set_loaded(true);
        let policies = crate::policy::Policies::default();
        readiness.set_policies(policies.clone());
        assert_eq!(
            readiness.report(),
            (false, "admission policies not loaded yet".to_string())
        );
        policies.mark_loaded();
        let (served_tx, served) = watch::channel(false);
        readiness.set_webhook_certificate(served);
        assert_eq!(
            readiness.report(),
            (
                false,
                "webhook certificate from the Secret not served yet".to_string()
            )
        );
        served_tx.send_replace(true);
        let (_tx, rx) = watch::channel(false);
        readiness.set_leading(Some(rx));
        assert_eq!(
            readiness.report(),
            (
                true,
                "ok: 0 bindings in service, caches synced, follower".to_string()
            )
        );
    }
}
