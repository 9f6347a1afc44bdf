//! Keeps the `spec.conversion` of each CRD that has a converter in service
//! pointing at Gantry's webhook server: strategy `Webhook`, the client
//! config of `/convert/<crd>` with the server's CA bundle, review version
//! v1. Written with server-side apply (field manager `gantry-converters`),
//! again whenever the converters or the CA bundle change and every minute, which repairs
//! drift and reaches CRDs created after their converter.
//!
//! A converter taken out of service leaves its CRD as it is: pointing the
//! CRD back at strategy `None` would serve stored objects under versions
//! whose schema they do not follow. Requests for its objects at other
//! versions then fail, saying that no converter is in service, until one is
//! again or the CRD is changed by hand.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::Converters;
use crate::webhook::reach::Reach;

/// Field manager of the CRDs' `spec.conversion`.
pub const FIELD_MANAGER: &str = "gantry-converters";
/// How often the CRDs are written again even if nothing changed.
const RESYNC: Duration = Duration::from_mins(1);

/// The apply patch that points `crd` at its converter.
pub fn conversion_patch(crd: &str, path: &str, reach: &Reach) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": crd},
        "spec": {"conversion": {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": reach.client_config(path),
                "conversionReviewVersions": ["v1"],
            },
        }},
    })
}

/// The patches for the converters in service now, by CRD.
fn desired(converters: &Converters, reach: &Reach) -> BTreeMap<String, Value> {
    converters
        .all()
        .iter()
        .map(|c| {
            let crd = c.spec.crd.clone();
            let patch = conversion_patch(&crd, &c.spec.path(), reach);
            (crd, patch)
        })
        .collect()
}

/// Write each patch; a CRD that does not exist yet is skipped (the next
/// resync reaches it). The CRDs written.
async fn write(client: &Client, patches: &BTreeMap<String, Value>) -> Result<usize, kube::Error> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut written = 0;
    for (crd, patch) in patches {
        match api.patch(crd, &params, &Patch::Apply(patch)).await {
            Ok(_) => written += 1,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::debug!(%crd, "CRD not there yet; its conversion is written when it is");
            }
            Err(e) => return Err(e),
        }
    }
    Ok(written)
}

/// Keep the CRDs in step until `shutdown` completes. Waits for the
/// converter manager's first full list.
pub async fn run_sync(
    client: Client,
    converters: Converters,
    mut reach: Reach,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut changes = converters.subscribe();
    tokio::select! {
        () = &mut shutdown => return,
        () = converters.loaded() => {}
    }
    let mut resync = tokio::time::interval(RESYNC);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = changes.changed() => {}
            () = reach.ca_pem.changed() => {}
            _ = resync.tick() => {}
        }
        let patches = desired(&converters, &reach);
        if patches.is_empty() {
            continue;
        }
        match write(&client, &patches).await {
            Ok(written) => {
                tracing::info!(
                    converters = patches.len(),
                    written,
                    "CRD conversion webhooks in sync"
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not write a CRD's conversion; retrying");
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(Duration::from_secs(2)) => resync.reset_immediately(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crd_points_at_its_converter() {
        let reach = Reach {
            base_url: "https://127.0.0.1:8443".into(),
            ca_pem: "PEM".into(),
            service: None,
        };
        let patch = conversion_patch(
            "myresources.example.gantry.dev",
            "/convert/myresources.example.gantry.dev",
            &reach,
        );
        assert_eq!(
            patch["spec"]["conversion"],
            json!({"strategy": "Webhook", "webhook": {
                "clientConfig": {"url": "https://127.0.0.1:8443/convert/myresources.example.gantry.dev", "caBundle": "UEVN"},
                "conversionReviewVersions": ["v1"],
            }})
        );
    }
}
