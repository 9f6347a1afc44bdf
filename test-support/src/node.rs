//! A real control plane with a real node (`scripts/real-cluster up --node`),
//! shared by the tests of one process: starting a node costs seconds and the
//! kubelet's fixed paths allow one per machine. Tests that share it keep to
//! their own namespaces and releases, and take [`NodeCluster::exclusive`]
//! while they run so that their timings do not disturb each other.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::real::script;

/// The shared cluster with a node, brought down (and its directory
/// removed) by the script's watcher when the test process exits.
pub struct NodeCluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

static SHARED: OnceLock<NodeCluster> = OnceLock::new();
static EXCLUSIVE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Run `scripts/real-cluster ARGS...`; its stdout.
fn real_cluster(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("bash")
        .arg(script())
        .args(args)
        .env("GANTRY_CLUSTER_OWNER_PID", std::process::id().to_string())
        .env("GANTRY_CLUSTER_REMOVE_WITH_OWNER", "1")
        .output()
        .context("running scripts/real-cluster")?;
    if !output.status.success() {
        bail!(
            "scripts/real-cluster {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

impl NodeCluster {
    /// The process's cluster with a node, started on first use (blocking:
    /// call it from `spawn_blocking` or before the runtime is busy).
    pub fn shared() -> &'static NodeCluster {
        SHARED.get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("gantry-node-")
                .tempdir()
                .expect("temp dir")
                .keep();
            let stdout = real_cluster(&["up", "--node", dir.to_str().expect("UTF-8 path")])
                .expect("a control plane with a node starts");
            let kubeconfig = stdout.lines().last().expect("a kubeconfig").into();
            NodeCluster { dir, kubeconfig }
        })
    }

    /// Held while a test uses the cluster, so that tests run one at a time.
    pub async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
        EXCLUSIVE.lock().await
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Where the cluster keeps its state and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kubectl built with the control plane.
    pub fn kubectl(&self) -> PathBuf {
        crate::real::binaries()
            .expect("the control plane's binaries")
            .join("kubectl")
    }

    /// An admin client.
    pub async fn client(&self) -> kube::Client {
        crate::client_for(&self.kubeconfig)
            .await
            .expect("a client of the node cluster")
    }

    /// Import an OCI image archive into the node's containerd; the image's
    /// name as the kubelet finds it.
    pub fn load(&self, archive: &Path) -> anyhow::Result<String> {
        let name = real_cluster(&[
            "load",
            self.dir.to_str().expect("UTF-8 path"),
            archive.to_str().expect("UTF-8 path"),
        ])?;
        Ok(name.trim().to_string())
    }

    /// The API server's audit events so far (writes, at Metadata level; see
    /// tests/kube/audit-policy.yaml), oldest first.
    pub fn audit_events(&self) -> Vec<Value> {
        let Ok(file) = std::fs::File::open(self.dir.join("audit.log")) else {
            return Vec::new();
        };
        std::io::BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| serde_json::from_str(&line).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::Backend;

    /// What a node changes on the machine: the sysctls the kubelet,
    /// kube-proxy and the bridge plugin set, their iptables chains, the
    /// bridge, mounts, network namespaces and cgroups.
    fn machine_state() -> String {
        let mut state = String::new();
        for key in [
            "vm/overcommit_memory",
            "vm/panic_on_oom",
            "kernel/panic",
            "kernel/panic_on_oops",
            "kernel/keys/root_maxkeys",
            "kernel/keys/root_maxbytes",
            "net/ipv4/ip_forward",
            "net/ipv4/conf/all/route_localnet",
            "net/netfilter/nf_conntrack_max",
        ] {
            let value = std::fs::read_to_string(format!("/proc/sys/{key}")).unwrap_or_default();
            let _ = write!(state, "{key}={value}");
        }
        let run = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        for table in ["filter", "nat", "mangle"] {
            for tool in ["iptables-save", "ip6tables-save"] {
                let rules = run(tool, &["-t", table]);
                state.extend(
                    rules
                        .lines()
                        .filter(|l| l.contains("KUBE-") || l.contains("CNI-"))
                        .map(|l| format!("{tool} {l}\n")),
                );
            }
        }
        state.push_str(&run("ip", &["-br", "link"]));
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        state.extend(
            mounts
                .lines()
                .filter(|l| {
                    l.contains("kubelet") || l.contains("containerd") || l.contains("netns")
                })
                .map(|l| format!("{l}\n")),
        );
        for dir in [
            "/run/netns",
            "/sys/fs/cgroup/memory/kubepods",
            "/var/lib/kubelet",
        ] {
            let _ = writeln!(state, "{dir}: {}", Path::new(dir).exists());
        }
        state
    }

    /// `down` leaves the machine as `up --node` found it, a node without
    /// Pods included.
    #[test]
    fn down_restores_the_machine() {
        if Backend::Node.skip() {
            return;
        }
        // Another process's node may still be coming down (its owner's
        // watcher runs `down` after the owner exits).
        let deadline = std::time::Instant::now() + std::time::Duration::from_mins(2);
        while Path::new("/run/gantry-node").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        let before = machine_state();
        let dir = tempfile::tempdir().expect("temp dir");
        let dir = dir.path().to_str().expect("UTF-8 path");
        real_cluster(&["up", "--node", dir]).expect("a node starts");
        assert_ne!(machine_state(), before, "the node changed nothing");
        real_cluster(&["down", dir]).expect("down");
        assert_eq!(machine_state(), before);
    }
}
