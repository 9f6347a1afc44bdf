//! Keeps one ValidatingWebhookConfiguration and one
//! MutatingWebhookConfiguration (both named `gantry-policies` by default)
//! in step with the policies in service: one webhook per policy, pointing
//! at `<base url>/policies/<name>` with the server's CA bundle. Policies
//! marked `mutating` go to the mutating configuration, the others to the
//! validating one. A configuration with no webhooks left is deleted.
//!
//! Written with server-side apply (field manager `gantry-policies`), again
//! whenever the policies or the CA bundle change and every minute, which
//! repairs drift.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::spec::{Mode, PolicySpec};
use super::{LoadedPolicy, Policies};
use crate::webhook::reach::Reach;

/// Field manager of the configurations.
pub const FIELD_MANAGER: &str = "gantry-policies";
/// How often the configurations are written again even if nothing changed.
const RESYNC: Duration = Duration::from_mins(1);

/// What the configurations say besides the policies.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Name of both configurations.
    pub name: String,
    /// How the API server reaches the webhook server.
    pub reach: Reach,
    /// Namespaces never sent to any policy (Gantry's own, so that a
    /// failing policy cannot block its repair).
    pub exclude_namespaces: Vec<String>,
}

/// The webhook of one policy.
fn webhook(spec: &PolicySpec, options: &SyncOptions) -> Value {
    let mut namespace_selector = spec.namespace_selector.as_ref().map_or_else(
        || json!({}),
        |s| serde_json::to_value(s).expect("a selector serializes"),
    );
    if !options.exclude_namespaces.is_empty() {
        let expressions = namespace_selector
            .as_object_mut()
            .expect("a selector is an object")
            .entry("matchExpressions")
            .or_insert_with(|| json!([]));
        if let Some(list) = expressions.as_array_mut() {
            list.push(json!({
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": options.exclude_namespaces,
            }));
        }
    }
    // A policy in monitor mode never blocks, not even when unreachable.
    let failure_policy = match spec.mode {
        Mode::Monitor => "Ignore",
        Mode::Enforce => spec.failure_policy.as_str(),
    };
    let mut webhook = json!({
        "name": spec.webhook_name(),
        "clientConfig": options.reach.client_config(&spec.path()),
        "rules": spec.rules,
        "namespaceSelector": namespace_selector,
        "objectSelector": spec.object_selector.clone().map_or_else(|| json!({}), |s| serde_json::to_value(s).expect("a selector serializes")),
        "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": spec.timeout_seconds,
        "admissionReviewVersions": ["v1"],
    });
    if spec.mutating {
        webhook["reinvocationPolicy"] = "Never".into();
    }
    webhook
}

/// The validating and the mutating configuration for `policies`.
pub fn desired(policies: &[Arc<LoadedPolicy>], options: &SyncOptions) -> (Value, Value) {
    let (mutating, validating): (Vec<_>, Vec<_>) = policies.iter().partition(|p| p.spec.mutating);
    let configuration = |kind: &str, list: Vec<&Arc<LoadedPolicy>>| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": options.name, "labels": {"app.kubernetes.io/managed-by": "gantry"}},
            "webhooks": list.into_iter().map(|p| webhook(&p.spec, options)).collect::<Vec<_>>(),
        })
    };
    (
        configuration("ValidatingWebhookConfiguration", validating),
        configuration("MutatingWebhookConfiguration", mutating),
    )
}

async fn write<K>(api: Api<K>, name: &str, object: &Value) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let empty = object["webhooks"].as_array().is_none_or(Vec::is_empty);
    if empty {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    } else {
        api.patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map(|_| ())
    }
}

/// Write both configurations for the policies in service now.
pub async fn sync_once(
    client: &Client,
    policies: &Policies,
    options: &SyncOptions,
) -> Result<(), kube::Error> {
    let (validating, mutating) = desired(&policies.all(), options);
    write(
        Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        &options.name,
        &validating,
    )
    .await?;
    write(
        Api::<MutatingWebhookConfiguration>::all(client.clone()),
        &options.name,
        &mutating,
    )
    .await
}

/// Keep the configurations in sync until `shutdown` completes. Waits for
/// the policy manager's first full list, so that a restart does not drop
/// the webhooks for a moment.
pub async fn run_sync(
    client: Client,
    policies: Policies,
    mut options: SyncOptions,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut changes = policies.subscribe();
    tokio::select! {
        () = &mut shutdown => return,
        () = policies.loaded() => {}
    }
    let mut written: Option<(Value, Value)> = None;
    let mut resync = tokio::time::interval_at(tokio::time::Instant::now() + RESYNC, RESYNC);
    loop {
        let wanted = desired(&policies.all(), &options);
        if written.as_ref() != Some(&wanted) {
            match sync_once(&client, &policies, &options).await {
                Ok(()) => {
                    tracing::info!(name = %options.name, policies = policies.all().len(), "webhook configurations in sync");
                    written = Some(wanted);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not write the webhook configurations; retrying");
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    }
                }
            }
        }
        tokio::select! {
            () = &mut shutdown => return,
            _ = changes.changed() => {}
            () = options.reach.ca_pem.changed() => {}
            _ = resync.tick() => written = None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::spec::parse_spec;
    use crate::webhook::reach::ServiceRef;

    fn options() -> SyncOptions {
        SyncOptions {
            name: "gantry-policies".into(),
            reach: Reach {
                base_url: "https://127.0.0.1:8443/".into(),
                ca_pem: "PEM".into(),
                service: None,
            },
            exclude_namespaces: vec!["gantry-system".into()],
        }
    }

    #[test]
    fn services_as_client_config() {
        let service: ServiceRef = "gantry-system/gantry-webhook:8443".parse().unwrap();
        assert_eq!(service.dns_names()[0], "gantry-webhook.gantry-system.svc");
        assert!("gantry-webhook".parse::<ServiceRef>().is_err());
        assert!("a/b:http".parse::<ServiceRef>().is_err());
        let spec = parse_spec(
            "name: cap\nrules:\n- {apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}\n",
        )
        .unwrap();
        let mut options = options();
        options.reach.service = Some(service);
        assert_eq!(
            webhook(&spec, &options)["clientConfig"],
            json!({"service": {"namespace": "gantry-system", "name": "gantry-webhook", "path": "/policies/cap", "port": 8443}, "caBundle": "UEVN"})
        );
    }

    #[test]
    fn one_webhook_per_policy_in_the_right_configuration() {
        let spec = parse_spec(
            "name: cap\nrules:\n- {apiGroups: [apps], apiVersions: [v1], resources: [deployments], operations: [CREATE]}\nnamespaceSelector: {matchLabels: {team: a}}\ntimeoutSeconds: 5\nfailurePolicy: Ignore\n",
        )
        .unwrap();
        let rendered = webhook(&spec, &options());
        assert_eq!(
            rendered,
            json!({
                "name": "cap.policies.gantry.dev",
                "clientConfig": {"url": "https://127.0.0.1:8443/policies/cap", "caBundle": "UEVN"},
                "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["CREATE"]}],
                "namespaceSelector": {"matchLabels": {"team": "a"}, "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["gantry-system"]}]},
                "objectSelector": {},
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": 5,
                "admissionReviewVersions": ["v1"],
            })
        );
        let monitor = parse_spec(
            "name: m\nmode: monitor\nmutating: true\nrules:\n- {apiGroups: [''], apiVersions: [v1], resources: [pods], operations: ['*']}\n",
        )
        .unwrap();
        let rendered = webhook(&monitor, &options());
        assert_eq!(rendered["failurePolicy"], "Ignore");
        assert_eq!(rendered["reinvocationPolicy"], "Never");
    }
}
