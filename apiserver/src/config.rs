//! Server configuration and the `gantry apiserver` command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Largest accepted request body (kube-apiserver's limit: 3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Concurrent watches served by default; more get 429.
pub const DEFAULT_MAX_WATCHES: usize = 1000;

/// Events a watch may fall behind by before it is closed.
pub const DEFAULT_WATCH_BUFFER: usize = 1000;

/// Bytes (its queued objects as JSON) a watch may fall behind by before it is closed.
pub const DEFAULT_WATCH_BUFFER_BYTES: usize = 32 * 1024 * 1024;

/// The file in the data directory that keeps the token (mode 0600).
pub const TOKEN_FILE: &str = "token";

/// How an [`crate::ApiServer`] runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Durable storage directory; in-memory when None.
    pub data_dir: Option<PathBuf>,
    /// Bearer token every request must carry ([`Default`]: a fresh random one).
    /// None: no authentication, allowed only on a loopback `listen`.
    pub token: Option<String>,
    /// Number of watch events retained; watches from older resourceVersions get 410.
    pub watch_history: usize,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Concurrent watches served; more get 429 Too Many Requests with `Retry-After`.
    pub max_watches: usize,
    /// Events a watch may fall behind by (queued, not yet sent to its client) before
    /// it is closed; its client watches again from its last resourceVersion.
    pub watch_buffer: usize,
    /// Bytes (the queued objects as JSON) a watch may fall behind by before it is closed.
    pub watch_buffer_bytes: usize,
    /// Largest accepted request body; larger ones get 413.
    pub max_body_bytes: usize,
    /// Serve HTTPS with a CA and certificate made at start (the default); plain
    /// HTTP when false. kubectl sends the token only over HTTPS.
    pub tls: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            token: Some(crate::access::new_token()),
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(10),
            max_watches: DEFAULT_MAX_WATCHES,
            watch_buffer: DEFAULT_WATCH_BUFFER,
            watch_buffer_bytes: DEFAULT_WATCH_BUFFER_BYTES,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            tls: true,
        }
    }
}

/// Arguments of `gantry apiserver`.
#[derive(Clone, Debug, clap::Args)]
pub struct ApiServerArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Directory for durable storage (in-memory when omitted).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Where to write a kubeconfig for this server.
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Bearer token required on every request (default: the one kept in the data
    /// directory, else a new random one; written in the kubeconfig).
    #[arg(long)]
    pub token: Option<String>,
    /// Number of watch events retained for watches that resume from a resourceVersion.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
    /// Concurrent watches served; more get 429 Too Many Requests.
    #[arg(long, default_value_t = DEFAULT_MAX_WATCHES)]
    pub max_watches: usize,
}

impl ApiServerArgs {
    /// The token kept in the data directory by an earlier run, else a new one.
    fn kept_token(&self) -> String {
        self.data_dir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join(TOKEN_FILE)).ok())
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .unwrap_or_else(crate::access::new_token)
    }

    /// The server configuration these arguments describe.
    pub fn config(&self) -> Config {
        Config {
            listen: self.listen,
            data_dir: self.data_dir.clone(),
            token: Some(self.token.clone().unwrap_or_else(|| self.kept_token())),
            watch_history: self.watch_history,
            max_watches: self.max_watches,
            ..Config::default()
        }
    }
}
