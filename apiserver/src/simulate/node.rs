//! The simulated Node every Pod runs on: registered Ready, as a kubelet does.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::Ctx;

/// The range Pod IPs are taken from.
pub const POD_CIDR: &str = "10.244.0.0/16";

/// The node's own address (Pods' `hostIP`).
pub const NODE_IP: &str = "127.0.0.1";

/// Creates or updates the Node and marks it Ready; retried until it is done.
pub async fn register(ctx: &Ctx) {
    let mut delay = Duration::from_millis(100);
    while let Err(error) = try_register(ctx).await {
        tracing::warn!(%error, "simulation: registering the node failed; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

async fn try_register(ctx: &Ctx) -> Result<(), kube::Error> {
    let name = &ctx.settings.node;
    let api: Api<Node> = Api::all(ctx.client.clone());
    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "node-role.kubernetes.io/control-plane": "",
                "type": "gantry-simulated",
            },
            "annotations": {"gantry.dev/simulated": "true"},
        },
        "spec": {"podCIDR": POD_CIDR, "podCIDRs": [POD_CIDR]},
    });
    api.patch(
        name,
        &PatchParams::apply(super::FIELD_MANAGER).force(),
        &Patch::Apply(&node),
    )
    .await?;
    let now = super::now();
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "reason": reason, "message": message,
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    };
    let resources =
        json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
    let status = json!({"status": {
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            condition("Ready", "True", "KubeletReady", "kubelet is posting ready status (simulated by gantry)"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": NODE_IP},
            {"type": "Hostname", "address": name},
        ],
        "capacity": resources,
        "allocatable": resources,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "machineID": "gantry-simulated",
            "systemUUID": "gantry-simulated",
            "bootID": "gantry-simulated",
            "kernelVersion": "simulated",
            "osImage": "gantry simulated node",
            "containerRuntimeVersion": "gantry://simulated",
            "kubeletVersion": "v1.33.0-gantry",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }});
    api.patch_status(name, &super::params(), &Patch::Merge(status))
        .await?;
    Ok(())
}
