//! Plugin sources for tests: a local HTTP file server (with injectable
//! failures) and Debian's `docker-registry` on loopback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Default)]
struct Files {
    contents: Mutex<HashMap<String, Vec<u8>>>,
    hits: Mutex<HashMap<String, usize>>,
    fail_next: AtomicUsize,
    stalled: Mutex<std::collections::HashSet<String>>,
    redirects: Mutex<HashMap<String, String>>,
}

/// An HTTP server on 127.0.0.1 serving bytes put into it.
pub struct FileServer {
    /// Where it listens.
    pub addr: SocketAddr,
    state: Arc<Files>,
    task: tokio::task::JoinHandle<()>,
}

async fn serve_file(State(state): State<Arc<Files>>, Path(path): Path<String>) -> Response {
    *state.hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    let redirect = state.redirects.lock().unwrap().get(&path).cloned();
    if let Some(location) = redirect {
        return (
            StatusCode::FOUND,
            [(axum::http::header::LOCATION, location)],
        )
            .into_response();
    }
    if state.stalled.lock().unwrap().contains(&path) {
        std::future::pending::<()>().await;
    }
    if state
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return (StatusCode::SERVICE_UNAVAILABLE, "try again").into_response();
    }
    match state.contents.lock().unwrap().get(&path) {
        Some(bytes) => (
            [(axum::http::header::CONTENT_TYPE, "application/wasm")],
            bytes.clone(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

impl FileServer {
    /// Start serving (nothing yet).
    pub async fn start() -> FileServer {
        let state = Arc::new(Files::default());
        let router = axum::Router::new()
            .route("/{*path}", axum::routing::get(serve_file))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        FileServer { addr, state, task }
    }

    /// Serve `bytes` at `/path`.
    pub fn put(&self, path: &str, bytes: Vec<u8>) {
        self.state
            .contents
            .lock()
            .unwrap()
            .insert(path.trim_start_matches('/').to_string(), bytes);
    }

    /// The URL of `/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Requests made for `/path` so far.
    pub fn hits(&self, path: &str) -> usize {
        self.state
            .hits
            .lock()
            .unwrap()
            .get(path.trim_start_matches('/'))
            .copied()
            .unwrap_or(0)
    }

    /// Answer `/path` with a redirect to `location`.
    pub fn redirect(&self, path: &str, location: &str) {
        self.state.redirects.lock().unwrap().insert(
            path.trim_start_matches('/').to_string(),
            location.to_string(),
        );
    }

    /// Never answer requests for `/path` (a download that hangs).
    pub fn stall(&self, path: &str) {
        self.state
            .stalled
            .lock()
            .unwrap()
            .insert(path.trim_start_matches('/').to_string());
    }

    /// Answer the next `n` requests with 503.
    pub fn fail_next(&self, n: usize) {
        self.state.fail_next.store(n, Ordering::SeqCst);
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where Debian's docker-registry is: `$GANTRY_DOCKER_REGISTRY`, the copy
/// `scripts/test` unpacks into `/opt/debian-docker-registry`, or an
/// installed package.
pub fn registry_binary() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("GANTRY_DOCKER_REGISTRY").map(PathBuf::from),
        Some(PathBuf::from(
            "/opt/debian-docker-registry/usr/bin/docker-registry",
        )),
        Some(PathBuf::from("/usr/bin/docker-registry")),
    ];
    candidates.into_iter().flatten().find(|p| p.is_file())
}

/// A docker-registry (distribution 2.x) on 127.0.0.1, storing in a temp dir.
pub struct Registry {
    /// `127.0.0.1:<port>`.
    pub host: String,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Start one. `None` (with a loud note) when the binary is missing
    /// here; under CI (`CI` set) a missing binary fails the test instead.
    pub async fn start() -> Option<Registry> {
        let Some(binary) = registry_binary() else {
            let message = "docker-registry is not installed (scripts/test unpacks Debian's package into /opt/debian-docker-registry)";
            assert!(std::env::var_os("CI").is_none(), "{message}");
            eprintln!("SKIPPED: {message}");
            return None;
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: {host}\n  secret: gantry-tests\n",
                dir.path().join("data").display()
            ),
        )
        .expect("registry config");
        let child = Command::new(&binary)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let registry = Registry {
            host,
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(&registry.host)
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "docker-registry did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(registry)
    }

    /// Stop it now (to show that what follows needs no registry).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.kill();
    }
}
