//! Helpers for tests that run `gantry run` as a process against an API
//! server of either backend.

#![allow(dead_code)] // each test binary uses its own subset

pub mod faults;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use gantry_test_support::{Backend, Cluster, backends};

/// Namespace of the bindings.
pub const NAMESPACE: &str = "gantry-system";

/// A child process that is killed when dropped, so that a failing test
/// leaves no `gantry` running behind it.
pub struct Process(pub Child);

impl std::ops::Deref for Process {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Process {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Start `gantry run` against `kubeconfig` with `args`, stderr to `log`.
/// With `stdout`, its stdout is piped (read it with [`endpoints`]).
pub fn gantry_run(
    kubeconfig: &Path,
    log: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    stdout: bool,
) -> Process {
    let child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["run", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--namespace", NAMESPACE])
        .args(args)
        .envs(env.iter().copied())
        .stdout(if stdout {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("start gantry run");
    Process(child)
}

/// The addresses `gantry run --health-addr 127.0.0.1:0 --metrics-addr
/// 127.0.0.1:0` printed: (health probes, metrics).
pub fn endpoints(child: &mut Child) -> (String, String) {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut lines = BufReader::new(stdout).lines();
    let (mut health, mut metrics) = (None, None);
    while health.is_none() || metrics.is_none() {
        let line = lines.next().expect("gantry printed its endpoints").unwrap();
        let address = |path: &str| {
            line.split("http://")
                .nth(1)
                .and_then(|rest| rest.strip_suffix(path))
                .map(str::to_string)
        };
        health = health.or_else(|| address("/readyz"));
        metrics = metrics.or_else(|| address("/metrics"));
    }
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (health.unwrap(), metrics.unwrap())
}

/// `GET path` on `address` over plain HTTP/1.0: (status, body).
pub fn http_get(address: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("connect");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// An API server of `backend` with a kubeconfig for it, and example
/// `example` (its CRD and binding) installed unless `None`.
pub async fn cluster(backend: Backend, example: Option<&str>) -> (Cluster, kube::Client, PathBuf) {
    let server = Cluster::start(backend).await;
    let client = server.client();
    let kubeconfig = server.kubeconfig().to_path_buf();
    if let Some(example) = example {
        gantry::dev::install_example(&client, example, NAMESPACE)
            .await
            .unwrap();
    }
    (server, client, kubeconfig)
}

/// Poll `check` every 100 ms until it returns a value (60 s at most).
pub async fn wait_for<T>(what: &str, check: impl AsyncFnMut() -> Option<T>) -> T {
    wait_for_within(Duration::from_mins(1), what, check).await
}

/// Poll `check` every 100 ms until it returns a value (`wait` at most).
pub async fn wait_for_within<T>(
    wait: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Send SIGTERM to `child`.
pub fn sigterm(child: &Child) {
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// A Memcached parent named `name` in `default`.
pub fn memcached(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"size": 1}})
}
