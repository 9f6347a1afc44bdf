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
    tls: Option<Arc<crate::tls::Identity>>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// Failures starting the server.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] crate::storage::StoreError),
    /// No token was configured for a listen address beyond loopback.
    #[error("refusing to serve {0} without a token: only loopback may go unauthenticated")]
    NoToken(SocketAddr),
    /// A private file (the token) could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The TLS identity could not be made.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
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
    app.policies.reload(&app.store);
    let apiservices = crate::apiservices::objects(&crate::apiservices::served(&app.registry));
    let _ = app.store.commit(|view| {
        let mut writes = crate::bootstrap::at_start(app, view);
        writes.extend(
            apiservices
                .into_iter()
                .filter(|(key, _)| view.get(key).is_none())
                .map(|(key, obj)| crate::storage::Write::Put(key, obj)),
        );
        Ok::<_, std::convert::Infallible>(((), writes))
    });
}

impl ApiServer {
    /// Starts a server on `config.listen` (port 0: any free port).
    pub async fn start(config: Config) -> Result<ApiServerHandle, StartError> {
        if let Some(warning) = crate::access::exposure_warning(config.listen, config.tls) {
            if config.token.is_none() {
                return Err(StartError::NoToken(config.listen));
            }
            tracing::warn!("{warning}");
            eprintln!("{warning}");
        }
        let data_dir = config.data_dir.clone();
        let history = config.watch_history;
        let store = match data_dir {
            Some(dir) => tokio::task::spawn_blocking(move || Store::open(Some(&dir), history))
                .await
                .expect("store open task")?,
            None => Store::open(None, history)?,
        };
        let tls = match (&config.data_dir, config.tls) {
            (_, false) => None,
            (Some(dir), true) => Some(crate::tls::Identity::load_or_generate(
                &dir.join("tls"),
                config.listen,
            )?),
            (None, true) => Some(crate::tls::Identity::generate(config.listen)?),
        }
        .map(Arc::new);
        let app = Arc::new(App {
            registry: Registry::with_builtins(),
            service_account_tokens: crate::auth::tokens::Signer::new(config.token.as_deref()),
            store,
            config: config.clone(),
            writes: Mutex::new(WriteCounts::default()),
            controllers: tokio::sync::Notify::new(),
            stop: watch::channel(false).1,
            webhooks: crate::admission::Webhooks::default(),
            policies: crate::admission::policy::Policies::default(),
            watches: Arc::new(crate::watch::Hub::new(
                config.max_watches,
                crate::watch::Bounds {
                    events: config.watch_buffer,
                    bytes: config.watch_buffer_bytes,
                    history: config.watch_history as u64,
                },
            )),
            bootstrap: tokio::sync::Notify::new(),
            tls: tls.clone(),
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
        // The hub offers every event after this subscription to the open watches.
        let live = app.store.subscribe();
        app.watches.start_at(app.store.rv());
        let hub = tokio::spawn(crate::watch::run(app.clone(), live, stop_rx.clone()));
        let router = crate::http::router(app.clone());
        if let (Some(dir), Some(token)) = (&config.data_dir, &config.token) {
            // `gantry apiserver --data-dir D` uses it again after a restart.
            crate::private_file::write(&dir.join(crate::config::TOKEN_FILE), token.as_bytes())
                .map_err(|source| StartError::Write {
                    path: dir.join(crate::config::TOKEN_FILE),
                    source,
                })?;
        }
        let server_tls = tls.as_ref().map(|t| t.server_config()).transpose()?;
        let server = tokio::spawn(crate::listener::serve(
            listener,
            server_tls,
            router,
            stop_rx.clone(),
        ));
        // The kubernetes Service needs the bound port: made before serving.
        if app.store.is_durable() {
            let app = app.clone();
            tokio::task::spawn_blocking(move || crate::bootstrap::reconcile(&app))
                .await
                .expect("bootstrap task");
        } else {
            crate::bootstrap::reconcile(&app);
        }
        let controllers = tokio::spawn(crate::bootstrap::run(app.clone(), stop_rx.clone()));
        let gc = tokio::spawn(crate::gc::run(app.clone(), stop_rx));
        Ok(ApiServerHandle {
            app,
            addr,
            tls,
            stop,
            tasks: vec![server, gc, hub, controllers],
        })
    }
}

impl ApiServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https://127.0.0.1:port` (`http://` without TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA that signed the server's certificate (PEM), when serving TLS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_deref().map(|t| t.ca_pem.as_str())
    }

    /// A kubeconfig for this server: its URL, CA and token.
    pub fn kubeconfig_yaml(&self) -> String {
        crate::kubeconfig::kubeconfig_yaml(
            &self.url(),
            self.app.config.token.as_deref(),
            self.ca_pem(),
        )
    }

    /// Writes the kubeconfig to `path`: mode 0600, atomically (it holds the token).
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        crate::private_file::write(path.as_ref(), self.kubeconfig_yaml().as_bytes())
    }

    /// The bearer token clients must send (None: no authentication).
    pub fn token(&self) -> Option<&str> {
        self.app.config.token.as_deref()
    }

    /// A kube-rs client for this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        let mut cfg = kube::Config::new(self.url().parse().expect("valid url"));
        cfg.default_namespace = "default".into();
        cfg.root_cert = self.tls.as_deref().map(|t| vec![t.ca_der.clone()]);
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
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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
