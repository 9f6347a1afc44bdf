//! The `CustomResourceDefinition` of a plugin's parent kind, derived from its
//! spec and status types by kube's `CustomResource` derive (OpenAPI v3
//! schema with validation and defaults, the status subresource, printer
//! columns). A plugin project prints it from a small native binary, which
//! `gantry plugin crd` runs and `gantry plugin apply` installs:
//!
//! ```ignore
//! // src/bin/crd.rs
//! fn main() {
//!     gantry_sdk::print_crd::<my_plugin::Greeting>();
//! }
//! ```

use kube_core::CustomResourceExt;

/// The CRD of `T` as JSON.
///
/// # Panics
/// Never: a `CustomResourceDefinition` always serializes.
pub fn crd_json<T: CustomResourceExt>() -> serde_json::Value {
    serde_json::to_value(T::crd()).expect("a CustomResourceDefinition serializes")
}

/// Print the CRD of `T` as JSON on stdout (for `gantry plugin crd`).
///
/// # Panics
/// When stdout is closed, as `println!` does.
pub fn print_crd<T: CustomResourceExt>() {
    println!("{:#}", crd_json::<T>());
}

/// The status fields the host writes beside the plugin's own: flatten it
/// into the status type so that the CRD's schema keeps them (an API server
/// prunes fields a structural schema does not name).
///
/// ```ignore
/// #[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
/// pub struct GreetingStatus {
///     pub message: String,
///     #[serde(flatten)]
///     pub host: gantry_sdk::HostStatus,
/// }
/// ```
#[derive(
    Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    /// The generation of the spec the status was written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The plugin's conditions and the host's `Synced`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<serde_json::Value>,
    /// Written by the host (the plugin version, the last error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "open_object_schema")]
    pub gantry: Option<serde_json::Value>,
}

/// A list of metav1.Condition objects, keyed by `type`.
fn conditions_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {
                "type": {"type": "string"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "reason": {"type": "string"},
                "message": {"type": "string"},
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "observedGeneration": {"type": "integer", "format": "int64"}
            }
        }
    })
}

/// An object whose fields the host chooses.
fn open_object_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}
