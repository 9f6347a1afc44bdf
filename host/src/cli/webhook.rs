//! The webhook side of `gantry run` and `gantry dev`: the policy and
//! converter managers (always: guardrails need the policies), the HTTPS
//! webhook server, and the sync of the webhook configurations and of the
//! CRDs' conversion (by flags).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tokio::sync::watch;

use gantry_operator::conversion::{self, Converters};
use gantry_operator::policy::sync::{SyncOptions, run_sync};
use gantry_operator::policy::{Policies, manager};
use gantry_operator::webhook::reach::{CaBundle, Reach, ServiceRef};
use gantry_operator::webhook::reload::ReloadingCert;
use gantry_operator::webhook::renewal::Lifetimes;
use gantry_operator::webhook::rotator::{self, SecretRef};
use gantry_operator::webhook::{server, tls};
use gantry_sandbox::runtime::Runtime;

/// What the webhook server serves.
#[derive(Clone, Debug, Default)]
pub(super) struct Served {
    /// The admission policies in service.
    pub policies: Policies,
    /// The converters in service.
    pub converters: Converters,
}

/// Webhook flags shared by `run` and `dev`.
#[derive(Debug, Args)]
pub(super) struct WebhookArgs {
    /// Serve the admission policies over HTTPS on this address, or "off"
    /// (default: off for `run`, a free loopback port for `dev`).
    #[arg(long)]
    webhook_listen: Option<String>,
    /// PEM certificate chain of the webhook server (with --webhook-key);
    /// without both (or --webhook-cert-secret), a CA and a certificate are
    /// generated at start, for this process alone.
    #[arg(long, requires = "webhook_key")]
    webhook_cert: Option<PathBuf>,
    /// PEM private key of the webhook server.
    #[arg(long, requires = "webhook_cert")]
    webhook_key: Option<PathBuf>,
    /// PEM CA bundle that verifies --webhook-cert (default: the chain's
    /// last certificate).
    #[arg(long, requires = "webhook_cert")]
    webhook_ca: Option<PathBuf>,
    /// Keep the webhook server's CA and certificate in this Secret
    /// (`namespace/name`, type kubernetes.io/tls), shared by every replica:
    /// created when missing, renewed before it expires, served as it
    /// changes; its ca.crt is the caBundle that
    /// --sync-webhook-configurations writes.
    #[arg(long, conflicts_with_all = ["webhook_cert", "webhook_key", "webhook_ca"])]
    webhook_cert_secret: Option<SecretRef>,
    /// Validity of the serving certificates made for --webhook-cert-secret,
    /// in seconds (for tests; default 90 days).
    #[arg(long, hide = true, requires = "webhook_cert_secret")]
    webhook_cert_lifetime_secs: Option<u64>,
    /// Validity of the CAs made for --webhook-cert-secret, in seconds (for
    /// tests; default ten years).
    #[arg(long, hide = true, requires = "webhook_cert_secret")]
    webhook_ca_lifetime_secs: Option<u64>,
    /// Write the CA bundle (PEM) here, for webhook configurations kept by
    /// other means.
    #[arg(long)]
    webhook_ca_out: Option<PathBuf>,
    /// Base URL under which the API server reaches the webhook server,
    /// e.g. <https://gantry-webhook.gantry-system.svc:8443> (default:
    /// https://<listen address>, with 0.0.0.0 read as 127.0.0.1).
    #[arg(long, conflicts_with = "webhook_service")]
    webhook_url: Option<String>,
    /// The Service in front of the webhook server, `namespace/name[:port]`
    /// (port 443 by default): the webhook configurations point at it
    /// instead of a URL, and a generated certificate covers
    /// `name.namespace.svc`.
    #[arg(long)]
    webhook_service: Option<ServiceRef>,
    /// Extra DNS names or IPs of the generated certificate (the host of
    /// --webhook-url, 127.0.0.1 and localhost are always in).
    #[arg(long)]
    webhook_host: Vec<String>,
    /// Keep a Validating and a Mutating `WebhookConfiguration` in sync with
    /// the policy bindings, and the `spec.conversion` of each CRD that has a
    /// converter binding (always on for `dev`).
    #[arg(long)]
    sync_webhook_configurations: bool,
    /// Name of the two webhook configurations.
    #[arg(long, default_value = "gantry-policies")]
    webhook_configuration_name: String,
    /// After SIGTERM, keep answering webhook calls this long (unready, the
    /// Lease already released) when they come through --webhook-service:
    /// the Service's endpoints need a moment to drop a stopping Pod, and
    /// calls sent to it meanwhile would be refused.
    #[arg(long, default_value_t = 5)]
    webhook_drain_secs: u64,
}

impl WebhookArgs {
    /// Name of the two webhook configurations.
    #[cfg(feature = "dev-tools")]
    pub(super) fn configuration_name(&self) -> &str {
        &self.webhook_configuration_name
    }

    /// How long the webhooks keep answering after SIGTERM: only behind a
    /// Service, whose endpoints lag behind a stopping Pod.
    pub(super) fn drain(&self) -> std::time::Duration {
        match self.webhook_service {
            Some(_) => std::time::Duration::from_secs(self.webhook_drain_secs),
            None => std::time::Duration::ZERO,
        }
    }

    /// The lifetimes of certificates made for --webhook-cert-secret.
    fn lifetimes(&self) -> anyhow::Result<Lifetimes> {
        let defaults = Lifetimes::default();
        let secs = |flag: Option<u64>, default: Duration| flag.map_or(default, Duration::from_secs);
        Lifetimes::new(
            secs(self.webhook_ca_lifetime_secs, defaults.ca),
            secs(self.webhook_cert_lifetime_secs, defaults.serving),
        )
        .map_err(anyhow::Error::msg)
    }

    /// The DNS names and IPs a generated certificate names, for a server
    /// listening on `addr`.
    fn hosts(&self, addr: SocketAddr) -> Vec<String> {
        let mut hosts = Vec::new();
        if let Some(service) = &self.webhook_service {
            hosts.extend(service.dns_names());
        }
        hosts.extend(self.webhook_host.iter().cloned());
        hosts.extend(self.webhook_url.as_deref().and_then(url_host));
        if !addr.ip().is_unspecified() {
            hosts.push(addr.ip().to_string());
        }
        hosts.extend(["127.0.0.1".to_string(), "localhost".to_string()]);
        let mut seen = std::collections::HashSet::new();
        hosts.retain(|h| seen.insert(h.clone()));
        hosts
    }
}

/// A future that completes when `rx` says so; one per task.
async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next()?;
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.rsplit_once(':').map_or(authority, |(h, _)| h)
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// Start the policy and converter managers over the bindings in
/// `namespace` (remote components fetched as `sources` say), putting what
/// they load into `served`; and as `args` (and `local`, for `gantry dev`)
/// say the webhook server and the syncs. All stop when `shutdown`
/// completes. With --webhook-cert-secret: whether the Secret's certificate
/// is served yet (readiness waits for it).
#[allow(clippy::too_many_arguments)] // each is a separate setting of the operator
pub(super) async fn start_webhooks(
    client: &kube::Client,
    runtime: &Runtime,
    namespace: &str,
    sources: gantry_operator::delivery::source::FetchSettings,
    args: &WebhookArgs,
    local: bool,
    served: &Served,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Option<watch::Receiver<bool>>> {
    let policies = served.policies.clone();
    let converters = served.converters.clone();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    {
        let (client, runtime, policies, namespace, sources) = (
            client.clone(),
            runtime.clone(),
            policies.clone(),
            namespace.to_string(),
            sources.clone(),
        );
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move {
            if let Err(e) =
                manager::run_policy_manager(client, runtime, &namespace, policies, sources, stop)
                    .await
            {
                tracing::error!(error = %e, "the policy manager stopped");
            }
        });
    }
    {
        let (client, runtime, converters, namespace) = (
            client.clone(),
            runtime.clone(),
            converters.clone(),
            namespace.to_string(),
        );
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move {
            if let Err(e) = conversion::manager::run_converter_manager(
                client, runtime, &namespace, converters, sources, stop,
            )
            .await
            {
                tracing::error!(error = %e, "the converter manager stopped");
            }
        });
    }

    let listen = args
        .webhook_listen
        .clone()
        .or_else(|| local.then(|| "127.0.0.1:0".to_string()))
        .filter(|l| l != "off");
    let sync = args.sync_webhook_configurations || local;
    let Some(listen) = listen else {
        anyhow::ensure!(
            !sync,
            "--sync-webhook-configurations needs the webhook server: add --webhook-listen"
        );
        anyhow::ensure!(
            args.webhook_cert_secret.is_none(),
            "--webhook-cert-secret needs the webhook server: add --webhook-listen"
        );
        return Ok(None);
    };
    let addr: SocketAddr = listen
        .parse()
        .with_context(|| format!("--webhook-listen {listen:?}"))?;
    let (tls_config, ca_bundle, certificate_served) = if let Some(secret) =
        &args.webhook_cert_secret
    {
        let reloading = Arc::new(ReloadingCert::default());
        let (ca_tx, ca_rx) = watch::channel(String::new());
        let settings = rotator::Settings {
            hosts: args.hosts(addr),
            lifetimes: args.lifetimes()?,
            cert: reloading.clone(),
            ca_bundle: ca_tx,
        };
        tokio::spawn(rotator::run(
            client.clone(),
            secret.clone(),
            settings,
            stopped(stop_rx.clone()),
        ));
        let served = reloading.loaded();
        (
            reloading.server_config()?,
            CaBundle::follow(ca_rx),
            Some(served),
        )
    } else {
        let certificate = if let (Some(cert), Some(key)) = (&args.webhook_cert, &args.webhook_key) {
            tls::from_files(cert, key, args.webhook_ca.as_deref())?
        } else {
            tls::self_signed(&args.hosts(addr))?
        };
        (
            tls::server_config(&certificate)?,
            CaBundle::from(certificate.ca_pem),
            None,
        )
    };
    if let Some(path) = &args.webhook_ca_out {
        write_ca_bundle(path.clone(), ca_bundle.clone(), stopped(stop_rx.clone()))?;
    }
    let routes = gantry_operator::policy::server::router(policies.clone())
        .merge(conversion::server::router(converters.clone()));
    let webhooks = server::serve(addr, tls_config, routes)
        .await
        .with_context(|| format!("serving webhooks on {addr}"))?;
    let base_url = args.webhook_url.clone().unwrap_or_else(|| {
        let mut bound = webhooks.addr;
        if bound.ip().is_unspecified() {
            bound.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
        format!("https://{bound}")
    });
    match &args.webhook_service {
        Some(service) => println!(
            "gantry: webhooks on {}, reached through Service {}/{} at /policies/<name> and /convert/<crd>",
            webhooks.addr, service.namespace, service.name
        ),
        None => println!("gantry: webhooks at {base_url}/policies/<name> and /convert/<crd>"),
    }
    let stop = stopped(stop_rx.clone());
    tokio::spawn(async move {
        stop.await;
        webhooks.shutdown();
    });
    if sync {
        let reach = Reach {
            base_url,
            ca_pem: ca_bundle,
            service: args.webhook_service.clone(),
        };
        let options = SyncOptions {
            name: args.webhook_configuration_name.clone(),
            reach: reach.clone(),
            exclude_namespaces: vec![namespace.to_string()],
        };
        let client = client.clone();
        tokio::spawn(async move {
            // Never a configuration without its caBundle: wait for the
            // Secret's first.
            let mut ca = reach.ca_pem.clone();
            let mut stop = std::pin::pin!(stopped(stop_rx.clone()));
            while ca.current().is_empty() {
                tokio::select! {
                    () = &mut stop => return,
                    () = ca.changed() => {}
                }
            }
            tokio::spawn(conversion::sync::run_sync(
                client.clone(),
                converters,
                reach,
                stopped(stop_rx.clone()),
            ));
            tokio::spawn(run_sync(client, policies, options, stopped(stop_rx)));
        });
    }
    Ok(certificate_served)
}

/// Write the CA bundle to `path` now (if known) and whenever it changes,
/// until `stop` completes.
fn write_ca_bundle(
    path: PathBuf,
    mut ca: CaBundle,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let write = move |pem: &str| {
        std::fs::write(&path, pem)
            .with_context(|| format!("writing the CA bundle to {}", path.display()))
    };
    let pem = ca.current();
    if !pem.is_empty() {
        write(&pem)?;
    }
    tokio::spawn(async move {
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = ca.changed() => {}
            }
            if let Err(e) = write(&ca.current()) {
                tracing::warn!(error = format!("{e:#}"), "could not write the CA bundle");
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::url_host;

    #[test]
    fn hosts_of_urls() {
        assert_eq!(
            url_host("https://gantry.gantry-system.svc:8443/x").as_deref(),
            Some("gantry.gantry-system.svc")
        );
        assert_eq!(url_host("https://[::1]:8443").as_deref(), Some("::1"));
        assert_eq!(url_host("https://10.0.0.1").as_deref(), Some("10.0.0.1"));
    }
}
