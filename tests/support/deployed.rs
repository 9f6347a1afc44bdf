//! The operator deployed as users deploy it: the image `scripts/image`
//! builds, imported into the node's containerd, and `helm install` of
//! deploy/helm/gantry into the shared cluster with a node
//! ([`NodeCluster`]). Only the chart's RBAC: the tests grant the operator
//! nothing, and a Forbidden in its log fails them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use gantry_test_support::NodeCluster;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, ListParams, LogParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::eventually_within;
use crate::tools::{Helm, chart_dir, repo_root, run, run_blocking, test_build_binary};

/// How long a test waits for Pods to start, leaders to change and
/// reconciles to land on the node.
pub const POD_WAIT: Duration = Duration::from_mins(2);

/// The two tags of the gantry image the node has: one to install, one to
/// upgrade to. Both are the same build; a new tag is what `helm upgrade`
/// rolls out.
pub struct Images {
    /// `gantry:<first tag>`.
    pub first: String,
    /// `gantry:<second tag>`.
    pub second: String,
}

/// The node, with the gantry image loaded under both tags (built and
/// loaded once per process).
pub fn node() -> &'static NodeCluster {
    let node = NodeCluster::shared();
    images_on(node);
    node
}

fn images_on(node: &NodeCluster) -> &'static Images {
    static IMAGES: OnceLock<Images> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let tag = |name: &str| {
            let archive = dir.path().join(format!("{name}.tar"));
            run(Command::new(repo_root().join("scripts/image")).args([
                "build",
                "--binary",
                test_build_binary().to_str().expect("UTF-8 path"),
                "--tar",
                archive.to_str().expect("UTF-8 path"),
                "--name",
                &format!("gantry:{name}"),
            ]));
            node.load(&archive).expect("the image loads into the node")
        };
        let first = tag("in-cluster-a");
        let second = tag("in-cluster-b");
        Images { first, second }
    })
}

/// The image tags (after [`node`]).
pub fn images() -> &'static Images {
    images_on(NodeCluster::shared())
}

/// A base64 file of a zstd-compressed component, for the chart's
/// `bindings.NAME.plugin.base64` (`--set-file`): the bytes `plugin apply`
/// would put into the binding's ConfigMap.
pub fn plugin_file(dir: &Path, name: &str, component: &[u8]) -> PathBuf {
    let config_map = gantry::dev::binding_config_map(name, "unused", "", component, true)
        .expect("a binding ConfigMap");
    let data = config_map.binary_data.expect("binaryData");
    let (key, bytes) = data.iter().next().expect("the component");
    assert_eq!(key, "plugin.wasm.zst");
    let base64 = serde_json::to_value(bytes).expect("base64");
    let file = dir.join(format!("{name}.b64"));
    std::fs::write(&file, base64.as_str().expect("a string")).expect("write plugin file");
    file
}

/// One Helm release of the chart in a namespace of its own. Dropped
/// without [`Release::uninstall`] (a failed test), it is uninstalled and
/// its namespaces deleted anyway, so that the next test on the shared node
/// meets neither its cluster-wide objects nor a second operator.
pub struct Release {
    /// The release's name (also its full name, as it contains "gantry").
    pub name: String,
    /// Its namespace, also the bindings namespace.
    pub namespace: String,
    helm: Helm,
    kubeconfig: PathBuf,
    client: Client,
    namespaces: Vec<String>,
    uninstalled: bool,
}

impl Release {
    /// `helm install NAME` of the chart into namespace `namespace` with the
    /// first image tag and `values` (`--set`, `--set-file`... arguments).
    pub async fn install(name: &str, namespace: &str, values: &[String]) -> Release {
        let node = node();
        let release = Release {
            name: name.into(),
            namespace: namespace.into(),
            helm: Helm::new(),
            kubeconfig: node.kubeconfig().to_path_buf(),
            client: node.client().await,
            namespaces: Vec::new(),
            uninstalled: false,
        };
        let image = &images().first;
        let (repository, tag) = image.rsplit_once(':').expect("a tagged image");
        let mut args = vec![
            "install".to_string(),
            name.into(),
            chart_dir().to_str().unwrap().into(),
            "--namespace".into(),
            namespace.into(),
            "--create-namespace".into(),
            "--set".into(),
            format!("image.repository={repository}"),
            "--set".into(),
            format!("image.tag={tag}"),
        ];
        args.extend(values.iter().cloned());
        let out = release.helm_command(&args).await;
        assert!(out.contains("STATUS: deployed"), "{out}");
        release
    }

    /// `helm upgrade NAME --reuse-values ARGS...`.
    pub async fn upgrade(&self, values: &[String]) -> String {
        let mut args = vec![
            "upgrade".to_string(),
            self.name.clone(),
            chart_dir().to_str().unwrap().into(),
            "--namespace".into(),
            self.namespace.clone(),
            "--reuse-values".into(),
        ];
        args.extend(values.iter().cloned());
        self.helm_command(&args).await
    }

    async fn helm_command(&self, args: &[String]) -> String {
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        let kubeconfig = self.kubeconfig.to_str().unwrap();
        args.extend(["--kubeconfig", kubeconfig]);
        run_blocking(self.helm.command(&args)).await
    }

    /// An admin client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The operator's Pods (every shard and replica), oldest first.
    pub async fn pods(&self) -> Vec<Pod> {
        let pods: Api<Pod> = Api::namespaced(self.client(), &self.namespace);
        let selector = format!(
            "app.kubernetes.io/name=gantry,app.kubernetes.io/instance={}",
            self.name
        );
        let mut list = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("list the operator's Pods")
            .items;
        list.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
        list
    }

    /// The operator's Pods that the kubelet reports Ready, once there are
    /// `count` and no others (old ones gone).
    pub async fn ready_pods(&self, count: usize) -> Vec<Pod> {
        eventually_within(
            POD_WAIT,
            &format!("{count} Ready operator Pods"),
            || async {
                let pods = self.pods().await;
                (pods.len() == count && pods.iter().all(pod_ready)).then_some(pods)
            },
        )
        .await
    }

    /// The operator's Deployment.
    pub async fn deployment(&self) -> Deployment {
        Api::<Deployment>::namespaced(self.client(), &self.namespace)
            .get(&self.name)
            .await
            .expect("the operator's Deployment")
    }

    /// The Lease's holder, if any.
    pub async fn leader(&self) -> Option<String> {
        let lease = Api::<Lease>::namespaced(self.client(), &self.namespace)
            .get_opt("gantry-leader")
            .await
            .expect("read the Lease")?;
        lease
            .spec?
            .holder_identity
            .filter(|holder| !holder.is_empty())
    }

    /// Everything the operator's containers logged, current and previous.
    pub async fn logs(&self) -> String {
        let pods: Api<Pod> = Api::namespaced(self.client(), &self.namespace);
        let mut all = String::new();
        for pod in self.pods().await {
            let name = pod.metadata.name.unwrap_or_default();
            for previous in [false, true] {
                let params = LogParams {
                    previous,
                    ..LogParams::default()
                };
                if let Ok(text) = pods.logs(&name, &params).await {
                    all.push_str(&text);
                }
            }
        }
        all
    }

    /// No request of the operator was refused for want of a right: the
    /// chart's RBAC covers what it calls.
    pub async fn assert_no_forbidden(&self) {
        let logs = self.logs().await;
        let forbidden: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("Forbidden") || l.contains("forbidden"))
            .collect();
        assert!(
            forbidden.is_empty(),
            "the operator was refused a right:\n{}",
            forbidden.join("\n")
        );
    }

    /// A namespace of the test's own (its parents), created now and
    /// deleted with the release.
    pub async fn namespace(&mut self, name: &str) {
        gantry::dev::ensure_namespace(&self.client, name)
            .await
            .expect("namespace");
        self.namespaces.push(name.into());
    }

    /// `helm uninstall`, then the namespaces deleted and gone (their Pods
    /// stopped), so the next test finds the node empty.
    pub async fn uninstall(mut self) {
        self.helm_command(&[
            "uninstall".into(),
            self.name.clone(),
            "--namespace".into(),
            self.namespace.clone(),
            "--wait".into(),
        ])
        .await;
        self.uninstalled = true;
        for namespace in self.namespaces.iter().chain([&self.namespace]) {
            delete_namespace(&self.client, namespace).await;
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if self.uninstalled {
            return;
        }
        let kubeconfig = self.kubeconfig.to_str().unwrap();
        let _ = self
            .helm
            .command(&[
                "uninstall",
                &self.name,
                "--namespace",
                &self.namespace,
                "--wait",
                "--kubeconfig",
                kubeconfig,
            ])
            .output();
        let kubectl = NodeCluster::shared().kubectl();
        for namespace in self.namespaces.iter().chain([&self.namespace]) {
            let _ = Command::new(&kubectl)
                .args([
                    "--kubeconfig",
                    kubeconfig,
                    "delete",
                    "namespace",
                    namespace,
                    "--wait",
                ])
                .output();
        }
    }
}

/// Delete `namespace` and wait until it is gone.
pub async fn delete_namespace(client: &Client, namespace: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(namespace, &DeleteParams::default()).await;
    eventually_within(POD_WAIT, &format!("namespace {namespace} gone"), || async {
        matches!(namespaces.get_opt(namespace).await, Ok(None)).then_some(())
    })
    .await;
}

/// Whether the kubelet reports the Pod Ready.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

/// The peak memory of a Pod's cgroup on the node (cgroup v1), in bytes.
pub fn pod_peak_memory(pod: &Pod) -> Option<u64> {
    let uid = pod.metadata.uid.as_deref()?;
    let qos = pod.status.as_ref()?.qos_class.as_deref()?.to_lowercase();
    let base = Path::new("/sys/fs/cgroup/memory/kubepods");
    let dir = match qos.as_str() {
        "guaranteed" => base.join(format!("pod{uid}")),
        other => base.join(other).join(format!("pod{uid}")),
    };
    std::fs::read_to_string(dir.join("memory.max_usage_in_bytes"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A Pod's emptyDir volume `volume`, as the kubelet keeps it on the node.
pub fn empty_dir(node: &NodeCluster, pod: &Pod, volume: &str) -> PathBuf {
    node.dir()
        .join("node/kubelet/pods")
        .join(pod.metadata.uid.as_deref().expect("a uid"))
        .join("volumes/kubernetes.io~empty-dir")
        .join(volume)
}

/// A JSON field of a JSON object, as text, for messages.
pub fn field(object: &Value, pointer: &str) -> String {
    object
        .pointer(pointer)
        .map(Value::to_string)
        .unwrap_or_default()
}
