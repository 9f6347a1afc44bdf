//! Admission webhooks: the API server calls the mutating and validating webhooks of
//! `admissionregistration.k8s.io/v1` configurations as kube-apiserver does.
//!
//! Read in the order of a request:
//! - [`config`]: configurations are validated and defaulted on write; [`Webhooks`] holds
//!   the parsed, current set (rebuilt after every commit that touches one).
//! - [`matching`]: which webhooks a request goes to (rules, namespace/object selectors,
//!   matchConditions).
//! - [`review`]: the `AdmissionReview` sent and the checks on the one received.
//! - [`client`]: HTTPS with the webhook's caBundle, service resolution, timeouts.
//! - [`dispatch`]: mutating webhooks in order (with reinvocation), validating webhooks
//!   in parallel, failure policies and kube's error messages.
//!
//! - [`cel`]: the CEL engine (with kube's cost limits) of matchConditions and policies.
//! - [`policy`]: `ValidatingAdmissionPolicies` and their bindings.
//!
//! The write handlers call [`dispatch::mutate`] after decoding and defaulting and
//! [`dispatch::validate`] (policies, then validating webhooks) just before the commit.

pub mod cel;
pub mod client;
pub mod config;
pub mod dispatch;
pub mod matching;
pub mod policy;
pub mod review;

use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

use crate::registry::ResourceInfo;
use crate::storage::Store;

pub use config::{Webhook, WebhookKind};
pub use dispatch::{mutate, validate};

/// API group of webhook configurations.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// Plural of MutatingWebhookConfiguration.
pub const MUTATING: &str = "mutatingwebhookconfigurations";
/// Plural of ValidatingWebhookConfiguration.
pub const VALIDATING: &str = "validatingwebhookconfigurations";

/// Whether `info` is an admission configuration resource: webhook configurations,
/// policies and bindings are never sent to webhooks nor held to policies (kube's
/// `IsExemptAdmissionConfigurationResource`).
pub fn is_configuration(info: &ResourceInfo) -> bool {
    info.group == GROUP
        && matches!(
            info.plural.as_str(),
            MUTATING
                | VALIDATING
                | policy::POLICIES
                | policy::BINDINGS
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}

/// Whether `info` is a webhook configuration (validated by [`config`]).
pub fn is_webhook_configuration(info: &ResourceInfo) -> bool {
    info.group == GROUP && (info.plural == MUTATING || info.plural == VALIDATING)
}

/// An admission operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// POST, or apply creating an object.
    Create,
    /// PUT / PATCH, including subresources.
    Update,
    /// DELETE (and each object of a deletecollection).
    Delete,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// Who made the request (`request.userInfo`).
#[derive(Clone, Debug, PartialEq)]
pub struct UserInfo {
    /// User name.
    pub username: String,
    /// UID (service accounts have one).
    pub uid: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The user of unauthenticated requests (no `--token` configured), as kube names it.
    pub fn anonymous() -> Self {
        UserInfo {
            username: "system:anonymous".into(),
            uid: None,
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// The user of requests authenticated with the server's bearer token: the cluster
    /// admin (kube's static-token users are named in the token file; here there is one).
    pub fn admin() -> Self {
        UserInfo {
            username: "gantry-admin".into(),
            uid: None,
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// `authentication.k8s.io/v1` `UserInfo` JSON.
    pub fn to_json(&self) -> Value {
        let mut user = json!({ "username": self.username, "groups": self.groups });
        if let Some(uid) = &self.uid {
            user["uid"] = json!(uid);
        }
        user
    }
}

/// Everything about a request the webhooks see besides the objects.
#[derive(Clone, Debug)]
pub struct Attributes {
    /// The resource requested.
    pub info: Arc<ResourceInfo>,
    /// Subresource (`status`, `finalize`), if any.
    pub subresource: Option<String>,
    /// Operation.
    pub operation: Operation,
    /// Namespace of the object (None for cluster-scoped resources).
    pub namespace: Option<String>,
    /// Object name (empty on create with generateName).
    pub name: String,
    /// The requesting user.
    pub user: UserInfo,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `CreateOptions` / `UpdateOptions` / `DeleteOptions`.
    pub options: Value,
    /// (group, version, kind) of the object when it is not the resource's kind
    /// (`autoscaling/v1 Scale` for the scale subresource); such objects are sent and
    /// patched as they are, without conversion or re-decoding.
    pub object_kind: Option<(String, String, String)>,
}

/// `request.namespace` as kube sets it: the object's namespace, and for requests on
/// an existing Namespace object the namespace's own name.
pub fn request_namespace(
    info: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    operation: Operation,
) -> Option<String> {
    if info.group.is_empty() && info.plural == "namespaces" {
        return (operation != Operation::Create && !name.is_empty()).then(|| name.to_string());
    }
    namespace.filter(|_| info.namespaced).map(String::from)
}

impl Attributes {
    /// The namespace whose labels `namespaceSelector` tests: the object's namespace,
    /// or for Namespace objects the namespace itself.
    pub fn selector_namespace(&self) -> Option<&str> {
        match &self.namespace {
            Some(ns) if !ns.is_empty() => Some(ns),
            _ if self.info.group.is_empty() && self.info.plural == "namespaces" => Some(&self.name),
            _ => None,
        }
    }
}

/// The current webhooks, by kind, in kube's call order (configurations sorted by
/// name, webhooks in their order), plus the shared HTTPS clients.
#[derive(Default)]
pub struct Webhooks {
    current: RwLock<Arc<Loaded>>,
    /// Pooled HTTPS clients and the service address table.
    pub clients: client::Clients,
}

/// One parsed snapshot of all configurations.
#[derive(Default, Debug)]
pub struct Loaded {
    /// Mutating webhooks in call order.
    pub mutating: Vec<Arc<Webhook>>,
    /// Validating webhooks.
    pub validating: Vec<Arc<Webhook>>,
}

impl Webhooks {
    /// The current snapshot.
    pub fn current(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Re-reads every configuration from `store` (after a commit touching one, and at
    /// start-up).
    pub fn reload(&self, store: &Store) {
        let mut loaded = Loaded::default();
        for (plural, kind) in [
            (MUTATING, WebhookKind::Mutating),
            (VALIDATING, WebhookKind::Validating),
        ] {
            // Keys are `group/plural//name`: the range is in name order, as kube sorts.
            let (objs, _) = store.list(&format!("{GROUP}/{plural}/"), None);
            for (_, obj) in objs {
                let hooks = config::parse(kind, &obj);
                match kind {
                    WebhookKind::Mutating => loaded.mutating.extend(hooks),
                    WebhookKind::Validating => loaded.validating.extend(hooks),
                }
            }
        }
        tracing::debug!(
            mutating = loaded.mutating.len(),
            validating = loaded.validating.len(),
            "admission webhooks loaded"
        );
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(loaded);
    }

    /// Whether a committed key is a webhook configuration's.
    pub fn is_config_key(key: &str) -> bool {
        key.starts_with(&format!("{GROUP}/{MUTATING}/"))
            || key.starts_with(&format!("{GROUP}/{VALIDATING}/"))
    }
}
