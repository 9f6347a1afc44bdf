//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go does
//! it: the holder renews the lease; another candidate takes it over only
//! after it has seen the same record, unrenewed, for a whole lease
//! duration (measured on its own clock, so clock skew between replicas does
//! not matter). Every write carries the resourceVersion it read, so two
//! candidates can never both win.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

/// Lease settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This candidate's identity (e.g. the pod name).
    pub identity: String,
    /// How long a lease holds without renewal.
    pub lease_duration: Duration,
    /// How often the holder renews, and candidates retry.
    pub retry_period: Duration,
}

/// One candidate in the election.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Mutex<Option<Observed>>,
}

/// The lease record last seen (holder, renew time) and when this candidate
/// first saw it.
struct Observed {
    record: (Option<String>, Option<String>),
    since: Instant,
}

fn now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl LeaderElector {
    /// A candidate for the Lease in `config`.
    pub fn new(client: Client, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: Mutex::new(None),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn spec(&self, transitions: i32, acquired: Option<MicroTime>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired.unwrap_or_else(now)),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Whether the record in `lease` has stayed the same, unrenewed, for a
    /// whole lease duration as seen by this candidate.
    fn expired(&self, lease: &Lease) -> bool {
        let spec = lease.spec.clone().unwrap_or_default();
        let record = (
            spec.holder_identity.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
        );
        let mut observed = self.observed.lock().unwrap();
        match observed.as_ref() {
            Some(seen) if seen.record == record => {
                seen.since.elapsed() >= self.config.lease_duration
            }
            _ => {
                *observed = Some(Observed {
                    record,
                    since: Instant::now(),
                });
                false
            }
        }
    }

    /// Acquire or renew the lease once. `Ok(true)`: this candidate holds
    /// it now. A lost race is `Ok(false)`, not an error.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let mut lease = Lease::default();
            lease.metadata.name = Some(self.config.name.clone());
            lease.spec = Some(self.spec(0, None));
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(match holder {
            Some(me) if me == self.config.identity => self.spec(transitions, spec.acquire_time),
            None => self.spec(transitions + 1, None),
            Some(_) if self.expired(&lease) => self.spec(transitions + 1, None),
            Some(_) => return Ok(false),
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Wait until this candidate holds the lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "leader election: cannot read or write the lease");
                }
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Keep renewing; returns when the lease could not be renewed for a
    /// lease duration (leadership lost: stop reconciling).
    pub async fn hold(&self) {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %e, "leader election: renewal failed");
                }
            }
            if last_renewed.elapsed() >= self.config.lease_duration {
                return;
            }
        }
    }

    /// Give the lease up (on shutdown) so another candidate takes over at once.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(now());
        lease.spec = Some(spec);
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await?;
        Ok(())
    }
}
