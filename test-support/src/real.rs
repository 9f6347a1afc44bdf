//! A real control plane for one test, run by `scripts/real-cluster`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::Value;

/// One process of the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// etcd.
    Etcd,
    /// kube-apiserver.
    ApiServer,
    /// kube-controller-manager.
    ControllerManager,
}

impl Component {
    fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
            Component::ControllerManager => "kube-controller-manager",
        }
    }
}

/// etcd, kube-apiserver and kube-controller-manager on loopback, stopped
/// when dropped.
pub struct RealCluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
}

/// Whether process `pid` runs: a zombie (killed, its parent gone, nobody
/// reaping it) does not.
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

pub(crate) fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/real-cluster")
}

/// Run `scripts/real-cluster COMMAND [DIR]`; its stdout.
fn run_script(command: &str, dir: Option<&Path>) -> anyhow::Result<String> {
    let output = Command::new("bash")
        .arg(script())
        .arg(command)
        .args(dir)
        .env("GANTRY_CLUSTER_OWNER_PID", std::process::id().to_string())
        .output()
        .context("running scripts/real-cluster")?;
    if !output.status.success() {
        bail!(
            "scripts/real-cluster {command} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The directory of the control plane's binaries, built first if they are
/// not cached yet.
pub fn binaries() -> anyhow::Result<PathBuf> {
    Ok(run_script("build", None)?.trim().into())
}

impl RealCluster {
    /// Start a control plane keeping its state in `dir` (built first if
    /// the binaries are not cached yet).
    pub fn start(dir: &Path) -> anyhow::Result<RealCluster> {
        let stdout = run_script("up", Some(dir))?;
        let kubeconfig = stdout
            .lines()
            .last()
            .context("scripts/real-cluster printed no kubeconfig")?
            .into();
        Ok(RealCluster {
            dir: dir.to_path_buf(),
            kubeconfig,
        })
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Where the cluster keeps its state and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The kube-apiserver's `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        let port = std::fs::read_to_string(self.dir.join("ports/apiserver")).unwrap_or_default();
        format!("https://127.0.0.1:{}", port.trim())
    }

    /// The admin's credentials as files: (CA, client certificate, key).
    pub fn admin_identity(&self) -> (PathBuf, PathBuf, PathBuf) {
        let pki = self.dir.join("pki");
        (
            pki.join("ca.crt"),
            pki.join("admin.crt"),
            pki.join("admin.key"),
        )
    }

    /// SIGKILL `component`.
    pub fn kill(&self, component: Component) {
        let pid = std::fs::read_to_string(self.dir.join(format!("{}.pid", component.name())))
            .expect("component was started");
        let status = Command::new("kill")
            .args(["-KILL", pid.trim()])
            .status()
            .expect("kill");
        assert!(status.success(), "{} was not running", component.name());
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid.trim()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Start again whatever is not running (same ports, data and keys).
    pub fn restart(&self) -> anyhow::Result<()> {
        run_script("up", Some(&self.dir)).map(drop)
    }

    /// Successful writes taken from clients other than the control plane's
    /// own components, counted from the audit log (writes only, Metadata
    /// level; see tests/kube/audit-policy.yaml).
    pub fn client_writes(&self) -> u64 {
        let Ok(file) = std::fs::File::open(self.dir.join("audit.log")) else {
            return 0;
        };
        std::io::BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
            .filter(|event| {
                let user = event.pointer("/user/username").and_then(Value::as_str);
                let code = event
                    .pointer("/responseStatus/code")
                    .and_then(Value::as_u64);
                event["stage"] == "ResponseComplete"
                    && matches!(code, Some(200..300))
                    && !user.is_some_and(|u| u.starts_with("system:"))
            })
            .count() as u64
    }

    /// Wait until the controller manager has done what it does at start:
    /// the `default` namespace's ServiceAccount (Pods cannot be created
    /// before) and root CA ConfigMap, the rules of the aggregated `admin`
    /// role.
    pub(crate) async fn wait_for_controllers(&self, client: &kube::Client) {
        self.wait_for_default_service_account(client).await;
        let config_maps = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(
            client.clone(),
            "default",
        );
        let roles = kube::Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(client.clone());
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            let ca = matches!(config_maps.get_opt("kube-root-ca.crt").await, Ok(Some(_)));
            let admin = matches!(roles.get_opt("admin").await,
                Ok(Some(role)) if role.rules.as_ref().is_some_and(|r| !r.is_empty()));
            if ca && admin {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no kube-root-ca.crt or aggregated admin role after 60 s; see {}",
                self.dir.join("kube-controller-manager.log").display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_for_default_service_account(&self, client: &kube::Client) {
        let api = kube::Api::<ServiceAccount>::namespaced(client.clone(), "default");
        let deadline = Instant::now() + Duration::from_mins(1);
        while !matches!(api.get_opt("default").await, Ok(Some(_))) {
            assert!(
                Instant::now() < deadline,
                "no default ServiceAccount after 60 s; see {}",
                self.dir.join("kube-controller-manager.log").display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        if let Err(e) = run_script("down", Some(&self.dir)) {
            eprintln!("{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;
    use crate::Backend;

    fn etcd_port(dir: &Path) -> u16 {
        let port = std::fs::read_to_string(dir.join("ports/etcd-client")).expect("etcd port");
        port.trim().parse().expect("a port number")
    }

    /// A port taken between the pick and etcd's bind moves a first start to
    /// new ports; a restart keeps its ports and fails instead.
    #[test]
    fn a_taken_port_moves_a_first_start_but_not_a_restart() {
        if Backend::Real.skip() {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let taken = TcpListener::bind("127.0.0.1:0").expect("listener");
        let taken_port = taken.local_addr().expect("address").port();
        std::fs::create_dir_all(dir.path().join("ports")).expect("ports dir");
        std::fs::write(dir.path().join("ports/etcd-client"), taken_port.to_string())
            .expect("write port");

        let cluster = RealCluster::start(dir.path()).expect("starts on new ports");
        let port = etcd_port(dir.path());
        assert_ne!(port, taken_port);

        cluster.kill(Component::Etcd);
        // The killed etcd's connections may hold the port for a moment.
        let deadline = Instant::now() + Duration::from_secs(30);
        let _squatter = loop {
            match TcpListener::bind(("127.0.0.1", port)) {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("etcd's port {port} not free yet: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("etcd's port {port} stays taken: {e}"),
            }
        };
        let error = cluster.restart().expect_err("etcd's port is taken");
        assert!(
            format!("{error:#}").contains("address already in use"),
            "{error:#}"
        );
        assert_eq!(etcd_port(dir.path()), port, "a restart keeps its ports");
    }
}
