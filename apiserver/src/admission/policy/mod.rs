//! `ValidatingAdmissionPolicy`: the API server enforces the
//! `admissionregistration.k8s.io/v1` `ValidatingAdmissionPolicies` and their
//! `ValidatingAdmissionPolicyBindings` in its storage, as kube-apiserver's
//! `ValidatingAdmissionPolicy` admission plugin does (just before the validating
//! webhooks).
//!
//! Read in the order of a request:
//! - [`config`]: policies and bindings are defaulted and validated on write.
//! - [`compiled`]: [`Policies`] holds them parsed and compiled (rebuilt after every
//!   commit that touches one).
//! - [`matching`]: which policies and bindings a request meets.
//! - [`params`]: the parameter objects a binding selects.
//! - [`evaluate`]: one policy, with one binding and one parameter, over a request:
//!   matchConditions, variables, validations, messages, under kube's cost budget.
//! - [`dispatch`]: validation actions (Deny, Warn, Audit), failure policies and
//!   kube's denial.

pub mod compiled;
pub mod config;
pub mod dispatch;
pub mod evaluate;
pub mod matching;
pub mod params;

use std::sync::{Arc, RwLock};

pub use compiled::{Binding, Policy};
pub use dispatch::validate;

use crate::storage::Store;

/// Plural of `ValidatingAdmissionPolicy`.
pub const POLICIES: &str = "validatingadmissionpolicies";
/// Plural of `ValidatingAdmissionPolicyBinding`.
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// A policy with the bindings that name it.
#[derive(Debug)]
pub struct Bound {
    /// The policy.
    pub policy: Policy,
    /// Its bindings, by name.
    pub bindings: Vec<Binding>,
}

/// The current policies, by name, each with its bindings.
#[derive(Default)]
pub struct Policies {
    current: RwLock<Arc<Vec<Bound>>>,
}

impl Policies {
    /// The current snapshot.
    pub fn current(&self) -> Arc<Vec<Bound>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Re-reads every policy and binding from `store`.
    pub fn reload(&self, store: &Store) {
        let group = super::GROUP;
        let (policies, _) = store.list(&format!("{group}/{POLICIES}/"), None);
        let (bindings, _) = store.list(&format!("{group}/{BINDINGS}/"), None);
        let bindings: Vec<Binding> = bindings
            .iter()
            .filter_map(|(_, b)| Binding::parse(b))
            .collect();
        let loaded: Vec<Bound> = policies
            .iter()
            .filter_map(|(_, p)| Policy::parse(p))
            .map(|policy| Bound {
                bindings: bindings
                    .iter()
                    .filter(|b| b.policy == policy.name)
                    .cloned()
                    .collect(),
                policy,
            })
            .collect();
        tracing::debug!(
            policies = loaded.len(),
            "validating admission policies loaded"
        );
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(loaded);
    }

    /// Whether a committed key is a policy's or a binding's.
    pub fn is_policy_key(key: &str) -> bool {
        let group = super::GROUP;
        key.starts_with(&format!("{group}/{POLICIES}/"))
            || key.starts_with(&format!("{group}/{BINDINGS}/"))
    }
}
