//! The API servers end-to-end tests run against: the embedded one, or a
//! real control plane (etcd, kube-apiserver, kube-controller-manager built
//! from Go modules by `scripts/real-cluster`).
//!
//! `GANTRY_TEST_BACKEND=embedded|real|node|both|all` (default `all`;
//! `both` is embedded and real) chooses. Each test marked [`backends`]
//! becomes two tests, `NAME::embedded` and `NAME::real`; the one whose
//! backend is not chosen passes at once and says so on stderr. The `node`
//! backend is a real control plane with a real node ([`NodeCluster`]), on
//! which the in-cluster suite runs the operator as a Pod.
//!
//! `GANTRY_TEST_RECORD=DIR` puts a recording proxy in front of every
//! embedded server a test starts: the test's kubeconfig and client then
//! point at the proxy, and the exchanges go to `DIR/TEST.jsonl`, for the
//! [`differential`] suite to replay.

pub mod backup_service;
pub mod differential;
mod node;
pub mod raw;
mod real;
mod tls;

use std::path::{Path, PathBuf};

use gantry_apiserver::{ApiServer, ApiServerHandle, Config};

pub use gantry_test_macros::backends;
pub use node::NodeCluster;
pub use real::{Component, RealCluster};
pub use tls::https_connector;

/// Which API server a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded API server, in the test process.
    Embedded,
    /// A real control plane, one per test, on loopback.
    Real,
    /// A real control plane with a real node, shared by the tests of one
    /// process.
    Node,
}

impl Backend {
    /// The name used in test names and `GANTRY_TEST_BACKEND`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Real => "real",
            Backend::Node => "node",
        }
    }

    /// Whether `GANTRY_TEST_BACKEND` chooses this backend. Anything but
    /// `embedded`, `real`, `node`, `both`, `all` or unset is a mistake
    /// worth stopping for.
    pub fn chosen(self) -> bool {
        match std::env::var("GANTRY_TEST_BACKEND").as_deref() {
            Err(_) | Ok("" | "all") => true,
            Ok("both") => self != Backend::Node,
            Ok("embedded") => self == Backend::Embedded,
            Ok("real") => self == Backend::Real,
            Ok("node") => self == Backend::Node,
            Ok(other) => {
                panic!("GANTRY_TEST_BACKEND={other}: expected embedded, real, node, both or all")
            }
        }
    }

    /// True (and a line on stderr) when the test should not run here.
    pub fn skip(self) -> bool {
        let skip = !self.chosen();
        if skip {
            eprintln!(
                "not run on the {} backend: GANTRY_TEST_BACKEND chooses another",
                self.name()
            );
        }
        skip
    }
}

/// One API server, started for one test.
pub struct Cluster {
    backend: Backend,
    client: kube::Client,
    kubeconfig: PathBuf,
    server: Server,
    recording: Option<(PathBuf, differential::proxy::RecordingProxy)>,
    /// Holds the kubeconfig (and, embedded, the store); removed on drop.
    dir: tempfile::TempDir,
}

enum Server {
    Embedded(ApiServerHandle),
    Real(RealCluster),
}

impl Cluster {
    /// Start a fresh API server of `backend`, with an admin kubeconfig.
    pub async fn start(backend: Backend) -> Cluster {
        Cluster::start_with(backend, Config::default()).await
    }

    /// Like [`Cluster::start`]; `config` is used by the embedded backend.
    pub async fn start_with(backend: Backend, config: Config) -> Cluster {
        Cluster::launch(backend, config, recording_from_env(backend)).await
    }

    /// Like [`Cluster::start`], recording every exchange of its kubeconfig
    /// and client into the JSON Lines file `record` when given; unlike it,
    /// `GANTRY_TEST_RECORD` is not read.
    pub async fn start_recorded(backend: Backend, record: Option<PathBuf>) -> Cluster {
        Cluster::launch(backend, Config::default(), record).await
    }

    async fn launch(backend: Backend, config: Config, record: Option<PathBuf>) -> Cluster {
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = dir.path().join("kubeconfig");
        let server = match backend {
            Backend::Embedded => {
                let server = ApiServer::start(config).await.expect("API server starts");
                server.write_kubeconfig(&kubeconfig).expect("kubeconfig");
                Server::Embedded(server)
            }
            Backend::Real => {
                let dir = dir.path().join("cluster");
                let real = tokio::task::spawn_blocking(move || RealCluster::start(&dir))
                    .await
                    .expect("start task")
                    .expect("real control plane starts");
                std::fs::copy(real.kubeconfig(), &kubeconfig).expect("kubeconfig");
                Server::Real(real)
            }
            Backend::Node => panic!("the node backend is shared: use NodeCluster::shared()"),
        };
        let mut cluster = Cluster {
            backend,
            client: client_for(&kubeconfig).await.expect("client"),
            kubeconfig,
            server,
            recording: None,
            dir,
        };
        if let Some(file) = record {
            let recording = differential::exchange::Recording::create(&file).expect("recording");
            let upstream = differential::upstream::Upstream::of(&cluster);
            let proxy = differential::proxy::RecordingProxy::start(upstream, recording)
                .await
                .expect("recording proxy starts");
            let kubeconfig = cluster.dir.path().join("kubeconfig-recorded");
            write_plain_kubeconfig(&kubeconfig, &proxy.url()).expect("kubeconfig");
            cluster.client = client_for(&kubeconfig).await.expect("client");
            cluster.kubeconfig = kubeconfig;
            cluster.recording = Some((file, proxy));
        }
        if let Server::Real(real) = &cluster.server {
            real.wait_for_controllers(&cluster.client).await;
        }
        cluster
    }

    /// The file the exchanges are recorded into, when they are.
    pub fn recording(&self) -> Option<&Path> {
        self.recording.as_ref().map(|(file, _)| file.as_path())
    }

    /// The backend it runs.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A client with admin rights.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The port the server itself listens on (not a recording proxy's).
    pub fn server_port(&self) -> u16 {
        match &self.server {
            Server::Embedded(server) => server.addr().port(),
            Server::Real(real) => real
                .url()
                .rsplit(':')
                .next()
                .and_then(|p| p.trim_end_matches('/').parse().ok())
                .expect("the real server's URL has a port"),
        }
    }

    /// The CA (PEM) that signed the server's certificate.
    pub fn ca_pem(&self) -> Option<String> {
        match &self.server {
            Server::Embedded(server) => server.ca_pem().map(str::to_string),
            Server::Real(real) => std::fs::read_to_string(real.admin_identity().0).ok(),
        }
    }

    /// An admin kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kubeconfig at `to` for service account `namespace/name` (created
    /// if missing): the admin kubeconfig with a token from `TokenRequest`
    /// instead of the admin's credentials (a client certificate would win
    /// over a token on a real server).
    pub async fn service_account_kubeconfig(&self, namespace: &str, name: &str, to: &Path) {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::ServiceAccount;
        use kube::api::{Patch, PatchParams, PostParams};
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(self.client(), namespace);
        let account = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace}});
        accounts
            .patch(name, &PatchParams::apply("test"), &Patch::Apply(&account))
            .await
            .expect("service account");
        let answer: TokenRequest = accounts
            .create_subresource(
                "token",
                name,
                &PostParams::default(),
                &TokenRequest::default(),
            )
            .await
            .expect("token request");
        let token = answer.status.expect("a token").token;
        let mut config: serde_json::Value =
            serde_yaml::from_str(&std::fs::read_to_string(&self.kubeconfig).unwrap()).unwrap();
        for user in config["users"].as_array_mut().expect("users") {
            user["user"] = serde_json::json!({ "token": token });
        }
        std::fs::write(to, serde_yaml::to_string(&config).unwrap()).unwrap();
    }

    /// Successful writes (create, update, patch, delete) the server has
    /// taken from clients other than the control plane's own components.
    pub fn writes(&self) -> u64 {
        match &self.server {
            Server::Embedded(server) => server.writes().total(),
            Server::Real(real) => real.client_writes(),
        }
    }

    /// The embedded server, when that is the backend.
    pub fn embedded(&self) -> Option<&ApiServerHandle> {
        match &self.server {
            Server::Embedded(server) => Some(server),
            Server::Real(_) => None,
        }
    }

    /// The real control plane, when that is the backend.
    pub fn real(&self) -> Option<&RealCluster> {
        match &self.server {
            Server::Embedded(_) => None,
            Server::Real(real) => Some(real),
        }
    }

    /// Stop the server.
    pub async fn shutdown(self) {
        match self.server {
            Server::Embedded(server) => server.shutdown().await,
            Server::Real(real) => {
                tokio::task::spawn_blocking(move || drop(real))
                    .await
                    .expect("stop task");
            }
        }
    }
}

/// Where `GANTRY_TEST_RECORD=DIR` says this test's exchanges go:
/// `DIR/TEST.jsonl` (`TEST` the name of the test's thread, `::` as `.`,
/// with `-2`, `-3`... for further clusters of the same test). Only
/// embedded servers are recorded: the recordings are replayed on both.
// The search for a free file name stops at the first one not taken.
#[allow(clippy::maybe_infinite_iter)]
fn recording_from_env(backend: Backend) -> Option<PathBuf> {
    let dir = std::env::var_os("GANTRY_TEST_RECORD").filter(|d| !d.is_empty())?;
    if backend != Backend::Embedded {
        return None;
    }
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).expect("GANTRY_TEST_RECORD directory");
    let thread = std::thread::current();
    let test: String = thread
        .name()
        .filter(|n| *n != "main")
        .map_or_else(
            || format!("process-{}", std::process::id()),
            |n| n.replace("::", "."),
        )
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    (1..)
        .map(|n| match n {
            1 => dir.join(format!("{test}.jsonl")),
            n => dir.join(format!("{test}-{n}.jsonl")),
        })
        .find(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .is_ok()
        })
}

/// A kubeconfig for a plain-HTTP server without credentials (the
/// recording proxy adds them). JSON is YAML.
fn write_plain_kubeconfig(path: &Path, url: &str) -> std::io::Result<()> {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "recorded", "cluster": {"server": url}}],
        "users": [{"name": "recorded", "user": {}}],
        "contexts": [{"name": "recorded",
            "context": {"cluster": "recorded", "user": "recorded", "namespace": "default"}}],
        "current-context": "recorded",
    });
    std::fs::write(path, doc.to_string())
}

/// A client from the kubeconfig file at `path`.
pub async fn client_for(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
    Ok(kube::Client::try_from(config)?)
}

/// The kubectl binaries to test with: those in `GANTRY_KUBECTL` (a
/// colon-separated list) or else Debian's (unpacked by `scripts/test`),
/// the one built with the real control plane (its version), and the first
/// on PATH. Panics when there is none: the kubectl suites are not to be
/// skipped quietly.
pub fn kubectls() -> Vec<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var("GANTRY_KUBECTL") {
        Ok(list) if !list.is_empty() => list.split(':').map(PathBuf::from).collect(),
        _ => {
            let mut found = vec![PathBuf::from("/opt/debian-kubectl/usr/bin/kubectl")];
            if Backend::Real.chosen() {
                found.push(
                    real::binaries()
                        .expect("the real control plane builds")
                        .join("kubectl"),
                );
            }
            if let Some(path) = std::env::var_os("PATH") {
                found.extend(
                    std::env::split_paths(&path)
                        .map(|dir| dir.join("kubectl"))
                        .filter(|p| p.is_file())
                        .take(1),
                );
            }
            found
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    let kubectls: Vec<PathBuf> = candidates
        .into_iter()
        .filter(|p| p.is_file())
        .filter(|p| seen.insert(p.canonicalize().unwrap_or_else(|_| p.clone())))
        .collect();
    assert!(
        !kubectls.is_empty(),
        "no kubectl found: run scripts/test (it unpacks Debian's) or set GANTRY_KUBECTL"
    );
    kubectls
}

/// A finished command's exit code, stdout and stderr, for assertion messages.
pub fn output_text(output: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}
