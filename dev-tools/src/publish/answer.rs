//! The operator's answer to an applied binding: its `PluginLoaded` or
//! `PolicyLoaded` Event (the version in service), or the Warning Event that
//! refused it. An apply that changed nothing gets no answer: the
//! ConfigMap's digest annotation says whether that version serves.
//!
//! Events are compared with those seen before the apply, by name and
//! count (a repeat of the same message counts on the same Event), not by
//! time: the cluster's clock need not agree with this machine's.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use gantry_operator::document::Document;

/// What the operator said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The version is in service: the Event's message, and the operator's
    /// warnings about it (rights it lacks).
    InService {
        /// What the operator said.
        message: String,
        /// Warnings that did not stop it.
        warnings: Vec<String>,
    },
    /// The operator refused it: the Warning Event's reason and message.
    Refused {
        /// The Event's reason (`InvalidBinding`, `ShadowRunFailed`, ...).
        reason: String,
        /// Its message.
        message: String,
    },
    /// Nothing within the wait.
    Silent,
}

/// The Events about one ConfigMap, by name, with their counts, and the
/// ConfigMap's version, before an apply.
pub struct Seen {
    namespace: String,
    name: String,
    counts: BTreeMap<String, i32>,
    resource_version: Option<String>,
}

impl Seen {
    /// The Events about ConfigMap `namespace/name` now.
    pub async fn now(client: &Client, namespace: &str, name: &str) -> anyhow::Result<Self> {
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let mut seen = Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            counts: BTreeMap::new(),
            resource_version: config_maps
                .get_opt(name)
                .await?
                .and_then(|cm| cm.metadata.resource_version),
        };
        for event in seen.events(client).await? {
            seen.counts.insert(event.name_any(), count(&event));
        }
        Ok(seen)
    }

    /// Events about the ConfigMap that are new, or counted again, since.
    async fn news(&self, client: &Client) -> anyhow::Result<Vec<Event>> {
        let mut news: Vec<Event> = self
            .events(client)
            .await?
            .into_iter()
            .filter(|e| self.counts.get(&e.name_any()) != Some(&count(e)))
            .collect();
        news.sort_by_key(|e| e.metadata.creation_timestamp.clone());
        Ok(news)
    }

    async fn events(&self, client: &Client) -> anyhow::Result<Vec<Event>> {
        let api: Api<Event> = Api::namespaced(client.clone(), &self.namespace);
        let events = api.list(&ListParams::default()).await?;
        Ok(events
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some("ConfigMap") && r.name.as_deref() == Some(&self.name)
                })
            })
            .collect())
    }
}

/// A Warning that does not refuse the version: missing rights are
/// reported while the version goes into service.
fn is_warning(event: &Event) -> bool {
    event.reason.as_deref() == Some(gantry_operator::controller::permissions::MISSING)
}

/// How many times an Event happened.
fn count(event: &Event) -> i32 {
    event
        .series
        .as_ref()
        .map(|s| s.count)
        .or(event.deprecated_count)
        .unwrap_or(1)
}

/// Wait up to `timeout` for the operator's answer to `document`, applied
/// as `applied` (the ConfigMap the API server returned) with the
/// component of `digest`.
pub async fn wait(
    client: &Client,
    seen: &Seen,
    document: &Document,
    applied: &ConfigMap,
    digest: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<Answer> {
    let (annotation, loaded) = match document {
        Document::Binding { .. } => (
            gantry_operator::controller::spec::DIGEST_ANNOTATION,
            "PluginLoaded",
        ),
        Document::Policy { .. } => (
            gantry_operator::policy::spec::DIGEST_ANNOTATION,
            "PolicyLoaded",
        ),
        Document::Converter { .. } => (
            gantry_operator::conversion::spec::DIGEST_ANNOTATION,
            "ConverterLoaded",
        ),
    };
    if applied.metadata.resource_version == seen.resource_version {
        // Nothing changed, so the operator has nothing to say.
        let serving = applied.annotations().get(annotation);
        if let Some(digest) = digest.filter(|d| serving.is_some_and(|s| s == d)) {
            return Ok(Answer::InService {
                message: format!("unchanged; plugin sha256:{digest} is in service"),
                warnings: Vec::new(),
            });
        }
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let news = seen.news(client).await?;
        let (warnings, news): (Vec<Event>, Vec<Event>) = news.into_iter().partition(is_warning);
        let warnings: Vec<String> = warnings
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.reason.as_deref().unwrap_or_default(),
                    e.note.as_deref().unwrap_or_default()
                )
            })
            .collect();
        if let Some(refusal) = news.iter().find(|e| e.type_.as_deref() == Some("Warning")) {
            return Ok(Answer::Refused {
                reason: refusal.reason.clone().unwrap_or_default(),
                message: refusal.note.clone().unwrap_or_default(),
            });
        }
        if let Some(message) = news
            .iter()
            .rev()
            .find(|e| e.reason.as_deref() == Some(loaded))
            .and_then(|e| e.note.clone())
        {
            return Ok(Answer::InService { message, warnings });
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Answer::Silent);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
