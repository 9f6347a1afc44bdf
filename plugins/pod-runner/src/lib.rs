//! A reconcile plugin that runs one Pod per parent, named after it, with
//! the image and the `privileged` flag of the parent's spec:
//! `spec: {image: busybox, privileged: true}`. It exists to show guardrail
//! policies at work: bound with `guardrailPolicies: [disallow-privileged]`,
//! a parent asking for a privileged Pod gets `Synced=False` and no Pod.

use gantry_sdk::{PluginError, Reconciler, Request, Response, json};
use serde::Deserialize;

/// The parent's spec.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRunnerSpec {
    /// The container image.
    #[serde(default = "default_image")]
    pub image: String,
    /// Run the container privileged.
    #[serde(default)]
    pub privileged: bool,
}

fn default_image() -> String {
    "busybox:1.36".into()
}

/// The plugin.
pub struct PodRunner;

impl Reconciler for PodRunner {
    fn reconcile(request: Request) -> Result<Response, PluginError> {
        if request.finalizing {
            return Ok(Response::new().finalized());
        }
        let spec: PodRunnerSpec = request.spec()?;
        let name = request.parent_name()?;
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": name}},
            "spec": {"containers": [{
                "name": "main", "image": spec.image,
                "securityContext": {"privileged": spec.privileged},
            }]},
        });
        Ok(Response {
            children: vec![pod],
            ..Response::new()
        })
    }
}

gantry_sdk::export_reconciler!(PodRunner);
