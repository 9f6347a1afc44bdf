//! Server configuration and the `gantry apiserver` command-line arguments.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Largest accepted request body (kube-apiserver's limit: 3 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How an [`crate::ApiServer`] runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Durable storage directory; in-memory when None.
    pub data_dir: Option<PathBuf>,
    /// Bearer token required on every request, when set.
    pub token: Option<String>,
    /// Number of watch events retained; watches from older resourceVersions get 410.
    pub watch_history: usize,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Largest accepted request body; larger ones get 413.
    pub max_body_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            data_dir: None,
            token: None,
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(10),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
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
    /// Bearer token required on every request.
    #[arg(long)]
    pub token: Option<String>,
    /// Number of watch events retained for watches that resume from a resourceVersion.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
}

impl ApiServerArgs {
    /// The server configuration these arguments describe.
    pub fn config(&self) -> Config {
        Config {
            listen: self.listen,
            data_dir: self.data_dir.clone(),
            token: self.token.clone(),
            watch_history: self.watch_history,
            ..Config::default()
        }
    }
}
