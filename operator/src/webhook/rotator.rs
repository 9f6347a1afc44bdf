//! `--webhook-cert-secret`: the webhook's certificates, generated and
//! rotated by the operator and shared by every replica through one Secret,
//! as controller-runtime's cert-controller does it.
//!
//! Every replica, leader or standby (all serve webhooks), runs the same
//! loop: read the Secret; create it if missing (409: another replica won,
//! read theirs); renew what [`super::renewal`] says is due by an update
//! with the resourceVersion read (409: another replica did, read again);
//! then serve the Secret's certificate ([`ReloadingCert`]) and hand its
//! `ca.crt` to the syncs of the webhook configurations, so all replicas
//! write the same `caBundle`. It looks again when the Secret changes (a
//! watch) and when something falls due (a timer).
//!
//! Unusable content in the Secret (garbage PEM, a key that does not match)
//! is logged as an error and replaced: by the content this replica served
//! last if it has one (nothing changes for the API server), else by a new
//! CA and certificate. A Secret of another type than `kubernetes.io/tls`
//! is left alone: the error is logged at every look, and a replica that
//! never read a usable certificate stays unready. A Secret deleted by hand
//! is made again with a new CA (a deliberate reset): calls can fail for the
//! moment it takes each replica to see it and write the new `caBundle`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use futures::StreamExt;
use gantry_kube::names::{is_dns1123_label, is_dns1123_subdomain};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::watch;

use super::material::{Authority, Serving, unix};
use super::reload::ReloadingCert;
use super::renewal::{Lifetimes, plan};

/// The Secret's type.
pub const SECRET_TYPE: &str = "kubernetes.io/tls";
/// How long to wait before looking again at a Secret left alone.
const REFUSED_RETRY: Duration = Duration::from_secs(30);
/// Longest wait between two looks: a guard against clock jumps.
const MAX_WAIT: Duration = Duration::from_mins(10);

/// The Secret, `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::str::FromStr for SecretRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once('/') {
            Some((namespace, name))
                if is_dns1123_label(namespace) && is_dns1123_subdomain(name) =>
            {
                Ok(Self {
                    namespace: namespace.into(),
                    name: name.into(),
                })
            }
            _ => Err(format!("{text:?} is not namespace/name")),
        }
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the rotator needs besides the Secret.
#[derive(Debug)]
pub struct Settings {
    /// DNS names and IPs the serving certificate must name.
    pub hosts: Vec<String>,
    /// Validity of the certificates it generates.
    pub lifetimes: Lifetimes,
    /// Where the served certificate goes.
    pub cert: Arc<ReloadingCert>,
    /// Where the CA bundle (`ca.crt`) goes.
    pub ca_bundle: watch::Sender<String>,
}

struct Rotator {
    api: Api<Secret>,
    secret: SecretRef,
    settings: Settings,
    /// The content this replica served last.
    last_good: Option<BTreeMap<String, ByteString>>,
}

/// Keep the Secret's certificates valid and serve them until `shutdown`
/// completes.
pub async fn run(
    client: Client,
    secret: SecretRef,
    settings: Settings,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<Secret> = Api::namespaced(client, &secret.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", secret.name));
    let mut events = watcher(api.clone(), config).default_backoff().boxed();
    let mut rotator = Rotator {
        api,
        secret,
        settings,
        last_good: None,
    };
    tokio::pin!(shutdown);
    let mut failures = 0u32;
    loop {
        let wait = match rotator.check().await {
            Ok(wait) => {
                failures = 0;
                wait
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(secret = %rotator.secret, error = format!("{e:#}"), "could not keep the webhook certificate Secret; retrying");
                Duration::from_secs(1 << failures.min(5))
            }
        };
        tokio::select! {
            () = &mut shutdown => return,
            () = tokio::time::sleep(wait) => {}
            event = events.next() => match event {
                Some(Ok(_)) => {}
                Some(Err(e)) => tracing::debug!(error = %e, "watching the webhook certificate Secret"),
                None => events = futures::stream::pending().boxed(),
            },
        }
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 404)
}

impl Rotator {
    /// Read, renew what is due, serve; how long until the next look.
    async fn check(&mut self) -> anyhow::Result<Duration> {
        let name = &self.secret.name;
        loop {
            let existing = self.api.get_opt(name).await.context("reading")?;
            if let Some(found) = &existing {
                let kind = found.type_.as_deref().unwrap_or("Opaque");
                if kind != SECRET_TYPE {
                    tracing::error!(secret = %self.secret, r#type = kind, "the webhook certificate Secret is not of type {SECRET_TYPE}: left alone; delete it and a replica makes a new one");
                    return Ok(REFUSED_RETRY);
                }
            }
            let data = existing
                .as_ref()
                .and_then(|s| s.data.clone())
                .unwrap_or_default();
            let now = SystemTime::now();
            let mut plan = plan(&data, &self.settings.hosts, self.settings.lifetimes, now)?;
            if plan.repaired
                && let Some(good) = &self.last_good
            {
                let restored =
                    super::renewal::plan(good, &self.settings.hosts, self.settings.lifetimes, now)?;
                plan.reasons
                    .push("restoring the content this replica served last".into());
                plan.reasons.extend(restored.reasons);
                plan.write = Some(restored.write.unwrap_or_else(|| good.clone()));
                plan.next_check = restored.next_check;
            }
            let served = match plan.write {
                None => data,
                Some(new) => {
                    let written = match existing {
                        None => {
                            self.api
                                .create(&PostParams::default(), &self.new_secret(&new))
                                .await
                        }
                        Some(mut secret) => {
                            // resourceVersion as read: a replica that wrote
                            // first wins, and this one reads theirs.
                            secret.data = Some(new.clone());
                            self.api
                                .replace(name, &PostParams::default(), &secret)
                                .await
                        }
                    };
                    match written {
                        Ok(_) => {}
                        Err(e) if is_conflict(&e) => {
                            tracing::debug!(secret = %self.secret, "another replica wrote the Secret first; reading theirs");
                            continue;
                        }
                        Err(e) => return Err(e).context("writing"),
                    }
                    let reasons = plan.reasons.join("; ");
                    if plan.repaired {
                        tracing::error!(secret = %self.secret, %reasons, "the webhook certificate Secret held unusable content: replaced");
                    } else {
                        tracing::info!(secret = %self.secret, %reasons, "webhook certificate Secret written");
                    }
                    new
                }
            };
            self.serve(&served)?;
            let left = plan.next_check - unix(SystemTime::now()) + 1;
            let wait = Duration::from_secs(left.max(1).cast_unsigned());
            return Ok(wait.min(MAX_WAIT));
        }
    }

    fn new_secret(&self, data: &BTreeMap<String, ByteString>) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(self.secret.name.clone()),
                namespace: Some(self.secret.namespace.clone()),
                labels: Some(
                    [(
                        "app.kubernetes.io/managed-by".to_string(),
                        "gantry".to_string(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            type_: Some(SECRET_TYPE.into()),
            data: Some(data.clone()),
            ..Secret::default()
        }
    }

    /// Present `data`'s serving certificate and hand on its CA bundle.
    fn serve(&mut self, data: &BTreeMap<String, ByteString>) -> anyhow::Result<()> {
        let authority = Authority::read(data).map_err(anyhow::Error::msg)?;
        let serving = Serving::read(data, &authority).map_err(anyhow::Error::msg)?;
        if self
            .settings
            .cert
            .set(serving.cert_pem(), serving.key_pem())?
        {
            tracing::info!(secret = %self.secret, not_after = serving.cert.not_after, "serving the webhook certificate of the Secret");
        }
        let bundle = authority.bundle_pem();
        self.settings.ca_bundle.send_if_modified(|current| {
            let changed = *current != bundle;
            if changed {
                current.clone_from(&bundle);
            }
            changed
        });
        self.last_good = Some(data.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::SecretRef;

    #[test]
    fn secret_refs() {
        let secret: SecretRef = "gantry-system/gantry-webhook-cert".parse().unwrap();
        assert_eq!(secret.to_string(), "gantry-system/gantry-webhook-cert");
        assert!("gantry-webhook-cert".parse::<SecretRef>().is_err());
        assert!("a/B".parse::<SecretRef>().is_err());
    }
}
