//! The reconcile contract as plain Rust types (the `reconcile` interface of
//! `wit/gantry.wit`). The host uses the same types, so one definition serves
//! both sides of the boundary.

use std::time::Duration;

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A reconcile plugin: a pure function of its input.
pub trait Reconciler {
    /// Compute the desired state for one parent.
    ///
    /// # Errors
    ///
    /// A [`PluginError`] when the desired state cannot be computed. The host
    /// changes nothing, reports the error on the parent, and calls again with
    /// backoff if the error is `retryable`, else at the next resync or change.
    fn reconcile(request: Request) -> Result<Response, PluginError>;

    /// Check a binding's `config` before the plugin is put into service.
    /// The default accepts anything.
    ///
    /// # Errors
    ///
    /// Why the config is rejected; the host then refuses that binding version.
    fn validate_config(_config: &Value) -> Result<(), String> {
        Ok(())
    }
}

/// Identifies one Kubernetes object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// `group/version`, or `v1` for the core group.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ObjectRef {
    /// The reference to a JSON object, if it has `apiVersion`, `kind` and
    /// `metadata.name`.
    pub fn of(object: &Value) -> Option<Self> {
        Some(Self {
            api_version: object.get("apiVersion")?.as_str()?.to_string(),
            kind: object.get("kind")?.as_str()?.to_string(),
            namespace: object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_string),
            name: object.pointer("/metadata/name")?.as_str()?.to_string(),
        })
    }
}

/// Why the host calls the plugin. Informational only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "type", content = "object")]
pub enum Trigger {
    /// The parent was created or changed.
    ParentChanged,
    /// A child changed or was deleted.
    ChildChanged(ObjectRef),
    /// A related object changed or was deleted.
    RelatedChanged(ObjectRef),
    /// Periodic resync.
    Resync,
    /// A requeue the plugin asked for, or a retry.
    Requeue,
    /// The plugin was replaced by a new version.
    PluginChanged,
}

/// Everything the plugin may base its answer on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// The parent object, `metadata.managedFields` removed.
    pub parent: Value,
    /// Children observed in the cluster (controller-owned by the parent).
    #[serde(default)]
    pub observed: Vec<Value>,
    /// Related objects the binding declares.
    #[serde(default)]
    pub related: Vec<Value>,
    /// The binding's `config` (`null` when absent).
    #[serde(default)]
    pub config: Value,
    /// The parent is being deleted and the binding finalizes.
    #[serde(default)]
    pub finalizing: bool,
    /// Why the host calls.
    pub trigger: Trigger,
}

impl Request {
    /// A request for `parent` with nothing observed, no config, triggered by
    /// a parent change. Handy in plugin unit tests.
    pub fn for_parent(parent: Value) -> Self {
        Self {
            parent,
            observed: Vec::new(),
            related: Vec::new(),
            config: Value::Null,
            finalizing: false,
            trigger: Trigger::ParentChanged,
        }
    }

    /// The parent deserialized into the plugin's own type (e.g. a struct
    /// with `metadata`, `spec` and `status`).
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if the parent does not deserialize into `T`.
    pub fn parent_as<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        T::deserialize(&self.parent)
            .map_err(|e| PluginError::invalid_input(format!("parent does not match its type: {e}")))
    }

    /// The parent's `spec` deserialized; a missing spec reads as `{}`.
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if the spec does not deserialize into `T`.
    pub fn spec<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        let spec = self
            .parent
            .get("spec")
            .cloned()
            .unwrap_or_else(|| Value::Object(serde_json::Map::default()));
        serde_json::from_value(spec)
            .map_err(|e| PluginError::invalid_input(format!("invalid spec: {e}")))
    }

    /// The binding's config deserialized; `null` reads as `{}`.
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if the config does not deserialize into `T`.
    pub fn config_as<T: DeserializeOwned>(&self) -> Result<T, PluginError> {
        let config = match &self.config {
            Value::Null => Value::Object(serde_json::Map::default()),
            other => other.clone(),
        };
        serde_json::from_value(config)
            .map_err(|e| PluginError::invalid_input(format!("invalid config: {e}")))
    }

    /// The parent's `metadata.name`.
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if the parent has no name.
    pub fn parent_name(&self) -> Result<&str, PluginError> {
        self.parent
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| PluginError::invalid_input("parent has no metadata.name"))
    }

    /// The parent's `metadata.namespace`, if namespaced.
    pub fn parent_namespace(&self) -> Option<&str> {
        self.parent
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }

    /// The parent's `metadata.generation` (0 when absent).
    pub fn parent_generation(&self) -> i64 {
        self.parent
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    /// Observed children of the k8s-openapi type `K`, deserialized. Objects
    /// of other kinds are skipped; one of kind `K` that does not deserialize
    /// is an error.
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if an object of kind `K` does not
    /// deserialize into `K`.
    pub fn observed_of<K: Resource + DeserializeOwned>(&self) -> Result<Vec<K>, PluginError> {
        of_kind::<K>(&self.observed)
    }

    /// The observed child of type `K` named `name`, if any.
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if that child does not deserialize into `K`.
    pub fn observed_named<K: Resource + DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<K>, PluginError> {
        named::<K>(&self.observed, name)
    }

    /// Related objects of the k8s-openapi type `K`, deserialized.
    ///
    /// # Errors
    ///
    /// [`PluginError::invalid_input`] if a related object of kind `K` does not
    /// deserialize into `K`.
    pub fn related_of<K: Resource + DeserializeOwned>(&self) -> Result<Vec<K>, PluginError> {
        of_kind::<K>(&self.related)
    }
}

fn is_kind<K: Resource>(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str) == Some(K::API_VERSION)
        && object.get("kind").and_then(Value::as_str) == Some(K::KIND)
}

fn of_kind<K: Resource + DeserializeOwned>(objects: &[Value]) -> Result<Vec<K>, PluginError> {
    objects
        .iter()
        .filter(|o| is_kind::<K>(o))
        .map(|o| {
            K::deserialize(o).map_err(|e| {
                PluginError::invalid_input(format!(
                    "observed {} does not deserialize: {e}",
                    K::KIND
                ))
            })
        })
        .collect()
}

fn named<K: Resource + DeserializeOwned>(
    objects: &[Value],
    name: &str,
) -> Result<Option<K>, PluginError> {
    objects
        .iter()
        .find(|o| {
            is_kind::<K>(o) && o.pointer("/metadata/name").and_then(Value::as_str) == Some(name)
        })
        .map(|o| {
            K::deserialize(o).map_err(|e| {
                PluginError::invalid_input(format!(
                    "observed {} {name} does not deserialize: {e}",
                    K::KIND
                ))
            })
        })
        .transpose()
}

/// Status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `"True"`
    True,
    /// `"False"`
    False,
    /// `"Unknown"`
    Unknown,
}

impl ConditionStatus {
    /// The Kubernetes spelling: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// A condition to merge into the parent's `status.conditions` by type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// CamelCase type, e.g. `Available`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// True, False or Unknown.
    pub status: ConditionStatus,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// Type of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EventType {
    /// A normal, informational event.
    Normal,
    /// Something the user should look at.
    Warning,
}

/// An Event to emit on the parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Normal or Warning.
    #[serde(rename = "type")]
    pub event_type: EventType,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// The desired state of one parent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// Every child the parent should have.
    #[serde(default)]
    pub children: Vec<Value>,
    /// The plugin's part of the parent's status, or `None` to leave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// Conditions to merge by type.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Events to emit on the parent.
    #[serde(default)]
    pub events: Vec<Event>,
    /// Call again after this long even if nothing changes.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "millis")]
    pub requeue_after: Option<Duration>,
    /// Finalization is complete (only meaningful when finalizing).
    #[serde(default)]
    pub finalized: bool,
}

impl Response {
    /// An empty response: no children, status untouched.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a child built from a k8s-openapi type; `apiVersion` and `kind`
    /// are filled in from the type.
    ///
    /// # Errors
    ///
    /// A permanent `SerializeFailed` error if `child` does not serialize.
    pub fn child<K: Resource + Serialize>(mut self, child: &K) -> Result<Self, PluginError> {
        let mut value = serde_json::to_value(child)
            .map_err(|e| PluginError::permanent("SerializeFailed", e.to_string()))?;
        if let Value::Object(map) = &mut value {
            map.insert("apiVersion".into(), K::API_VERSION.into());
            map.insert("kind".into(), K::KIND.into());
        }
        self.children.push(value);
        Ok(self)
    }

    /// Add a child given as JSON (for kinds without a Rust type).
    #[must_use]
    pub fn child_json(mut self, child: Value) -> Self {
        self.children.push(child);
        self
    }

    /// Set the plugin's status from any serializable value.
    ///
    /// # Errors
    ///
    /// A permanent `SerializeFailed` error if `status` does not serialize.
    pub fn status<S: Serialize>(mut self, status: &S) -> Result<Self, PluginError> {
        self.status = Some(
            serde_json::to_value(status)
                .map_err(|e| PluginError::permanent("SerializeFailed", e.to_string()))?,
        );
        Ok(self)
    }

    /// Add a condition.
    #[must_use]
    pub fn condition(
        mut self,
        condition_type: impl Into<String>,
        status: impl Into<ConditionStatus>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.conditions.push(Condition {
            condition_type: condition_type.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        });
        self
    }

    /// Add an Event.
    #[must_use]
    pub fn event(
        mut self,
        event_type: EventType,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        self.events.push(Event {
            event_type,
            reason: reason.into(),
            message: message.into(),
        });
        self
    }

    /// Ask to be called again after `after`.
    #[must_use]
    pub fn requeue_after(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }

    /// Mark finalization complete.
    #[must_use]
    pub fn finalized(mut self) -> Self {
        self.finalized = true;
        self
    }
}

/// A failed reconcile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginError {
    /// Human-readable message.
    pub message: String,
    /// CamelCase reason.
    pub reason: String,
    /// Whether calling again with the same input may succeed.
    pub retryable: bool,
}

impl PluginError {
    /// An error that may go away on retry (e.g. waiting for something).
    pub fn retryable(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: reason.into(),
            retryable: true,
        }
    }

    /// An error that retrying with the same input will not fix.
    pub fn permanent(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            reason: reason.into(),
            retryable: false,
        }
    }

    /// The input (parent, config, observed objects) is not what the plugin
    /// accepts: reason `InvalidInput`, not retryable.
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::permanent("InvalidInput", message)
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for PluginError {}

/// `Option<Duration>` as whole milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    // serde's `with` calls this with a `&Option<_>`.
    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            // Saturates past u64::MAX ms (~584 million years).
            Some(d) => s.serialize_some(&u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;

    use super::*;

    #[test]
    fn child_gets_api_version_and_kind_from_its_type() {
        let mut deployment = Deployment::default();
        deployment.metadata.name = Some("web".into());
        let response = Response::new().child(&deployment).unwrap();
        assert_eq!(response.children[0]["apiVersion"], "apps/v1");
        assert_eq!(response.children[0]["kind"], "Deployment");
        assert_eq!(response.children[0]["metadata"]["name"], "web");
    }

    #[test]
    fn observed_of_filters_by_kind_and_reports_bad_objects() {
        let mut request = Request::for_parent(json!({"metadata": {"name": "p"}}));
        request.observed = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
        ];
        let deployments: Vec<Deployment> = request.observed_of().unwrap();
        assert_eq!(deployments.len(), 1);
        assert_eq!(deployments[0].metadata.name.as_deref(), Some("d"));
        assert!(request.observed_named::<Deployment>("a").unwrap().is_none());

        request
            .observed
            .push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": "bad"}));
        let err = request.observed_of::<Deployment>().unwrap_err();
        assert_eq!(err.reason, "InvalidInput");
    }

    #[test]
    fn spec_and_config_default_to_empty_objects() {
        #[derive(Debug, Deserialize, Default)]
        struct Spec {
            #[serde(default)]
            size: i32,
        }
        let request = Request::for_parent(json!({"metadata": {"name": "p"}}));
        assert_eq!(request.spec::<Spec>().unwrap().size, 0);
        assert_eq!(request.config_as::<Spec>().unwrap().size, 0);
        let bad = Request::for_parent(json!({"metadata": {"name": "p"}, "spec": {"size": "x"}}));
        assert!(
            bad.spec::<Spec>()
                .unwrap_err()
                .message
                .contains("invalid spec")
        );
    }

    #[test]
    fn response_round_trips_through_json() {
        let response = Response::new()
            .condition("Available", true, "Ready", "all good")
            .event(EventType::Warning, "Oops", "something")
            .requeue_after(Duration::from_millis(1500))
            .finalized();
        let text = serde_json::to_string(&response).unwrap();
        assert!(text.contains("\"requeueAfter\":1500"));
        assert_eq!(serde_json::from_str::<Response>(&text).unwrap(), response);
    }
}
