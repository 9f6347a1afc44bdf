//! Starting and stopping the server, in-process or as `gantry apiserver`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::app::{App, WriteCounts};
use crate::config::{ApiServerArgs, Config};
use crate::registry::Registry;
use crate::storage::Store;

/// The embedded API server.
pub struct ApiServer;

/// A running server.
pub struct ApiServerHandle {
    app: Arc<App>,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Failures starting the server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::storage::StoreError),
    /// The listen address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

fn bootstrap(app: &App) {
    // CRDs from a durable store become served resources.
    let prefix = format!("{}/{}/", crate::crd::GROUP, crate::crd::PLURAL);
    let (crds, _) = app.store.list(&prefix, None);
    for (_, crd) in crds {
        crate::crd::sync(&app.registry, Some(&crd), None);
    }
    // Webhook configurations from a durable store are called right away.
    app.webhooks.reload(&app.store);
    let _ = app.store.commit(|view| {
        let writes = ["default", "kube-system", "kube-public", "kube-node-lease"]
            .iter()
            .filter(|ns| {
                view.get(&crate::handlers::write::namespace_key(ns))
                    .is_none()
            })
            .map(|ns| {
                let obj = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {
                        "name": ns,
                        "uid": uuid::Uuid::new_v4().to_string(),
                        "creationTimestamp": crate::objects::meta::now_rfc3339(),
                        "labels": { "kubernetes.io/metadata.name": ns },
                    },
                    "spec": { "finalizers": ["kubernetes"] },
                    "status": { "phase": "Active" },
                });
                crate::storage::Write::Put(crate::handlers::write::namespace_key(ns), obj)
            })
            .collect();
        Ok::<_, std::convert::Infallible>(((), writes))
    });
}

impl ApiServer {
    /// Starts a server on `config.listen` (port 0: any free port).
    pub async fn start(config: Config) -> Result<ApiServerHandle, StartError> {
        let data_dir = config.data_dir.clone();
        let history = config.watch_history;
        let store = match data_dir {
            Some(dir) => tokio::task::spawn_blocking(move || Store::open(Some(&dir), history))
                .await
                .expect("store open task")?,
            None => Store::open(None, history)?,
        };
        let app = Arc::new(App {
            registry: Registry::with_builtins(),
            store,
            config: config.clone(),
            writes: Mutex::new(WriteCounts::default()),
            controllers: tokio::sync::Notify::new(),
            stop: watch::channel(false).1,
            webhooks: Default::default(),
        });
        let app = if app.store.is_durable() {
            tokio::task::spawn_blocking(move || {
                bootstrap(&app);
                app
            })
            .await
            .expect("bootstrap task")
        } else {
            bootstrap(&app);
            app
        };
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.listen,
            source,
        })?;
        let (stop, stop_rx) = watch::channel(false);
        let app = Arc::into_inner(app).expect("sole owner");
        let app = Arc::new(App {
            stop: stop_rx.clone(),
            // The bound address (port 0 becomes the port picked), for
            // discovery's serverAddressByClientCIDRs.
            config: Config {
                listen: addr,
                ..app.config
            },
            ..app
        });
        let router = crate::http::router(app.clone());
        let mut srv_stop = stop_rx.clone();
        let server = tokio::spawn(async move {
            let res = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = srv_stop.changed().await;
                })
                .await;
            if let Err(e) = res {
                tracing::error!("apiserver stopped: {e}");
            }
        });
        let gc = tokio::spawn(crate::gc::run(app.clone(), stop_rx));
        Ok(ApiServerHandle {
            app,
            addr,
            stop,
            tasks: vec![server, gc],
        })
    }
}

impl ApiServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig for this server.
    pub fn kubeconfig_yaml(&self) -> String {
        crate::kubeconfig::kubeconfig_yaml(&self.url(), self.app.config.token.as_deref())
    }

    /// Writes the kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path.as_ref(), self.kubeconfig_yaml())
    }

    /// A kube-rs client for this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        let mut cfg = kube::Config::new(self.url().parse().expect("valid url"));
        cfg.default_namespace = "default".into();
        if let Some(t) = &self.app.config.token {
            cfg.auth_info.token = Some(t.clone().into());
        }
        kube::Client::try_from(cfg).expect("kube client")
    }

    /// Successful mutating requests so far.
    pub fn writes(&self) -> WriteCounts {
        self.app
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops serving (open watches end) and waits for the server to finish.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }
}

impl Drop for ApiServerHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// `gantry apiserver`: serves until SIGINT/SIGTERM; prints the address and kubeconfig path.
pub async fn run(args: ApiServerArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let handle = ApiServer::start(args.config()).await?;
    // Signal handlers first: a SIGTERM right after the address is printed is handled.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    // Without --kubeconfig-out: next to the data, or in the temp dir. Written before the
    // address is printed, so whoever reads the address finds the file.
    let path = match (&args.kubeconfig_out, &args.data_dir) {
        (Some(p), _) => p.clone(),
        (None, Some(dir)) => dir.join("kubeconfig"),
        (None, None) => std::env::temp_dir().join(format!(
            "gantry-apiserver-{}.kubeconfig",
            handle.addr().port()
        )),
    };
    handle.write_kubeconfig(&path)?;
    // A closed stdout must not stop the server: ignore print errors.
    let mut out = std::io::stdout();
    let _ = writeln!(out, "gantry apiserver listening on {}", handle.url());
    let _ = writeln!(out, "kubeconfig written to {}", path.display());
    let _ = out.flush();
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
    handle.shutdown().await;
    Ok(())
}
