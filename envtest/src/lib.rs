//! # gantry-envtest
//!
//! A Gantry plugin in service for a test, as envtest gives a
//! controller-runtime test its API server: [`Env::start`] runs `gantry
//! plugin serve` on a plugin project (the embedded API server in memory,
//! the project's CRDs installed, its binding applied, the operator
//! running) and returns once the binding serves, in about a second when
//! the component is built. The test then creates a parent with a kube
//! [`client`](Env::client) and waits for its children. Dropping the
//! [`Env`] stops it.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use kube::api::{Api, DynamicObject, PostParams};
//!
//! let env = gantry_envtest::Env::builder("path/to/plugin").start()?;
//! let client = env.client().await?;
//! // ... create a parent with `client`, then:
//! let found = gantry_envtest::wait_for(Duration::from_secs(30), async || {
//!     let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(client.clone());
//!     maps.get_opt("world-greeting").await.ok().flatten()
//! })
//! .await?;
//! # Ok(()) }
//! ```
//!
//! The `gantry` binary is found through [`Builder::gantry`], else the
//! `GANTRY` environment variable, else `PATH`.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;

/// Why an environment did not start, or a wait gave up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `gantry` binary: neither given, nor in `GANTRY`, nor on `PATH`.
    #[error(
        "the gantry binary was not found: set GANTRY to its path or put it on PATH (cargo build -p gantry builds it)"
    )]
    GantryNotFound,
    /// The process could not be started, or its output read.
    #[error("running {command}: {source}")]
    Io {
        /// The command line.
        command: String,
        /// What failed.
        source: std::io::Error,
    },
    /// `gantry plugin serve` ended before the binding served.
    #[error("gantry plugin serve failed ({status}):\n{log}")]
    Failed {
        /// Its exit status.
        status: String,
        /// What it wrote on stderr.
        log: String,
    },
    /// The binding did not serve in time.
    #[error("gantry plugin serve was not ready within {0:?}:\n{1}")]
    NotReady(Duration, String),
    /// A client for the environment could not be made.
    #[error("a client for the environment: {0}")]
    Client(String),
    /// [`wait_for`] gave up.
    #[error("nothing came within {0:?}")]
    Timeout(Duration),
}

/// How to start an [`Env`].
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    project: PathBuf,
    gantry: Option<PathBuf>,
    plugin: Option<PathBuf>,
    crds: Vec<PathBuf>,
    simulate: bool,
    timeout: Duration,
}

impl Builder {
    /// Use this `gantry` binary.
    pub fn gantry(mut self, path: impl Into<PathBuf>) -> Self {
        self.gantry = Some(path.into());
        self
    }

    /// Serve this built component instead of building the project.
    pub fn plugin(mut self, path: impl Into<PathBuf>) -> Self {
        self.plugin = Some(path.into());
        self
    }

    /// Install this CRD file instead of the project's (repeatable).
    pub fn crd(mut self, path: impl Into<PathBuf>) -> Self {
        self.crds.push(path.into());
        self
    }

    /// Simulate workloads as `gantry dev` does (Pods become Ready).
    pub fn simulate(mut self) -> Self {
        self.simulate = true;
        self
    }

    /// How long to wait for the binding to serve, the build included
    /// (default two minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Start `gantry plugin serve` and wait until the binding serves.
    pub fn start(self) -> Result<Env, Error> {
        let gantry = match self.gantry {
            Some(path) => path,
            None => find_gantry().ok_or(Error::GantryNotFound)?,
        };
        let log_dir = tempfile::tempdir().map_err(|source| Error::Io {
            command: "a temporary directory".into(),
            source,
        })?;
        let log_path = log_dir.path().join("gantry.log");
        let log = std::fs::File::create(&log_path).map_err(|source| Error::Io {
            command: format!("creating {}", log_path.display()),
            source,
        })?;
        let mut command = Command::new(&gantry);
        command
            .args(["plugin", "serve", "--until-stdin-closes", "--timeout-secs"])
            .arg(self.timeout.as_secs().max(1).to_string())
            .arg(&self.project);
        if let Some(plugin) = &self.plugin {
            command.arg("--plugin").arg(plugin);
        }
        for crd in &self.crds {
            command.arg("--crd").arg(crd);
        }
        if self.simulate {
            command.arg("--simulate");
        }
        let shown = format!("{command:?}");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|source| Error::Io {
                command: shown.clone(),
                source,
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                let value: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                if value["ready"] == true
                    && let Ok(ready) = serde_json::from_value::<Ready>(value)
                {
                    let _ = ready_tx.send(ready);
                    break;
                }
            }
            // Keep reading, so that the server never blocks on a full pipe.
            for _ in lines {}
        });
        let mut env = Env {
            child,
            stdin,
            ready: None,
            log_path,
            _log_dir: log_dir,
        };
        // The server's own timeout ends it first; this is the backstop.
        let deadline = Instant::now() + self.timeout + Duration::from_secs(10);
        loop {
            let exited = match ready_rx.recv_timeout(Duration::from_millis(50)) {
                Ok(ready) => {
                    env.ready = Some(ready);
                    return Ok(env);
                }
                // Its stdout closed without a ready line: it is ending.
                Err(mpsc::RecvTimeoutError::Disconnected) => env.child.wait().ok(),
                Err(mpsc::RecvTimeoutError::Timeout) => env.child.try_wait().ok().flatten(),
            };
            if let Some(status) = exited {
                return Err(Error::Failed {
                    status: status.to_string(),
                    log: env.log(),
                });
            }
            if Instant::now() >= deadline {
                return Err(Error::NotReady(self.timeout, env.log()));
            }
        }
    }
}

/// What `gantry plugin serve` says once the binding serves (the line
/// with `"ready": true`).
#[derive(Debug, Clone, Deserialize)]
struct Ready {
    kubeconfig: PathBuf,
    server: String,
    namespace: String,
    binding: String,
    sha256: String,
}

/// A plugin in service on a fresh embedded API server, until dropped.
#[derive(Debug)]
pub struct Env {
    child: Child,
    stdin: Option<ChildStdin>,
    ready: Option<Ready>,
    log_path: PathBuf,
    _log_dir: tempfile::TempDir,
}

impl Env {
    /// How to start the plugin project at `project` in service.
    pub fn builder(project: impl Into<PathBuf>) -> Builder {
        Builder {
            project: project.into(),
            gantry: None,
            plugin: None,
            crds: Vec::new(),
            simulate: false,
            timeout: Duration::from_mins(2),
        }
    }

    /// The plugin project at `project` in service, with the defaults.
    pub fn start(project: impl Into<PathBuf>) -> Result<Self, Error> {
        Self::builder(project).start()
    }

    fn ready(&self) -> &Ready {
        self.ready.as_ref().expect("an Env is returned once ready")
    }

    /// The kubeconfig of the API server (the admin's).
    pub fn kubeconfig(&self) -> &Path {
        &self.ready().kubeconfig
    }

    /// The API server's URL.
    pub fn server(&self) -> &str {
        &self.ready().server
    }

    /// The operator's namespace, where the binding's ConfigMap is.
    pub fn namespace(&self) -> &str {
        &self.ready().namespace
    }

    /// The binding's name.
    pub fn binding(&self) -> &str {
        &self.ready().binding
    }

    /// The sha256 of the component in service.
    pub fn sha256(&self) -> &str {
        &self.ready().sha256
    }

    /// A kube client for the API server, default namespace `default`.
    pub async fn client(&self) -> Result<kube::Client, Error> {
        let client = |e: &dyn std::fmt::Display| Error::Client(e.to_string());
        let kubeconfig =
            kube::config::Kubeconfig::read_from(self.kubeconfig()).map_err(|e| client(&e))?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| client(&e))?;
        kube::Client::try_from(config).map_err(|e| client(&e))
    }

    /// What the server and the operator logged so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.log_path) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Env {
    /// Close the server's standard input, which stops it; kill it if it
    /// has not stopped within five seconds.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `gantry` from `GANTRY`, else on `PATH`.
fn find_gantry() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GANTRY").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("gantry"))
        .find(|path| path.is_file())
}

/// Call `check` every 100 ms until it returns a value; at most `timeout`.
pub async fn wait_for<T>(
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Result<T, Error> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout(timeout));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
