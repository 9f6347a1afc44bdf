//! Converters as a [`Lifecycle`] of the binding loader: ConfigMaps labelled
//! `gantry.dev/converter`, each version prepared (fetched, compiled,
//! shadow-run on the CRD's stored objects) off the loop and swapped into
//! [`Converters`] atomically. A version that fails any check never
//! replaces a working one: the old one keeps serving and a Warning Event on
//! the ConfigMap says why.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use serde_json::Value;

use super::spec::{
    self, CONVERTER_KEY, CONVERTER_LABEL, ConverterSpec, DIGEST_ANNOTATION, SOURCE_ANNOTATION,
};
use super::{Converters, LoadedConverter, shadow};
use crate::delivery::loader::{self, Installed, Lifecycle, PendingPlugin, Refusal};
use crate::delivery::source::{FetchSettings, Fetcher, SourceSpec};
use gantry_kube::recorder::Recorder;
use gantry_sandbox::runtime::{ConverterPlugin, Runtime};

/// Objects listed per page for a shadow run.
const PAGE: u32 = 500;

/// Run the converter manager over the ConfigMaps of `namespace` until
/// `shutdown` completes; remote converters are fetched as `sources` say.
pub async fn run_converter_manager(
    client: Client,
    runtime: Runtime,
    namespace: &str,
    converters: Converters,
    sources: FetchSettings,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let reporter = Reporter {
        controller: "gantry-converters".into(),
        instance: std::env::var("HOSTNAME").ok(),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let manager = Manager {
        client: client.clone(),
        runtime,
        converters,
        active: HashMap::new(),
    };
    loader::run(
        client,
        namespace,
        manager,
        Fetcher::new(sources),
        recorder,
        shutdown,
    )
    .await
}

/// The converters in service.
struct Manager {
    client: Client,
    runtime: Runtime,
    converters: Converters,
    /// CRD names by ConfigMap name.
    active: HashMap<String, String>,
}

/// A converter version ready to go into service.
pub struct Ready {
    spec: ConverterSpec,
    plugin: Arc<ConverterPlugin>,
    source: Option<String>,
    /// What its shadow run found.
    shadow: String,
}

/// The stored objects of `crd` (at its storage version) and the served
/// versions (`group/version`); `None` while the CRD does not exist.
async fn stored_objects(
    client: &Client,
    crd: &str,
) -> Result<Option<(Vec<Value>, Vec<String>)>, kube::Error> {
    let Some(crd) = Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(crd)
        .await?
    else {
        return Ok(None);
    };
    let spec = &crd.spec;
    let group = &spec.group;
    let served: Vec<String> = spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| format!("{group}/{}", v.name))
        .collect();
    let Some(storage) = spec.versions.iter().find(|v| v.storage) else {
        return Ok(Some((Vec::new(), served)));
    };
    let resource = ApiResource {
        group: group.clone(),
        version: storage.name.clone(),
        api_version: format!("{group}/{}", storage.name),
        kind: spec.names.kind.clone(),
        plural: spec.names.plural.clone(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut objects = Vec::new();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api.list(&params).await?;
        objects.extend(
            page.items
                .into_iter()
                .map(|o| serde_json::to_value(o).expect("an object serializes")),
        );
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    Ok(Some((objects, served)))
}

/// Shadow-run `plugin` on the stored objects of its CRD against `running`:
/// the summary for the loaded Event, or the refusal.
async fn shadow_run(
    client: &Client,
    spec: &Arc<ConverterSpec>,
    plugin: &Arc<ConverterPlugin>,
    running: Option<Arc<LoadedConverter>>,
) -> Result<String, Refusal> {
    if !spec.rollout.shadow {
        return Ok("shadow run off".into());
    }
    match stored_objects(client, &spec.crd).await {
        Ok(None) => Ok(format!(
            "no shadow run: CRD {} does not exist yet",
            spec.crd
        )),
        // Listing converts objects stored at older versions with the
        // converter in service; without one that may fail.
        Err(e) => Ok(format!(
            "no shadow run: listing the stored objects failed: {e}"
        )),
        Ok(Some((objects, versions))) => {
            let first_version = running.is_none();
            let report =
                shadow::shadow_objects(plugin.clone(), spec.clone(), running, objects, versions)
                    .await;
            match report.refusal(first_version, spec.rollout.max_failures) {
                Some(why) => Err(Refusal::new("ShadowRunFailed", why)),
                None => Ok(report.summary()),
            }
        }
    }
}

impl Manager {
    /// The version for `crd` that ConfigMap `cm_name` has in service.
    fn running(&self, cm_name: &str, crd: &str) -> Option<Arc<LoadedConverter>> {
        self.converters
            .get(crd)
            .filter(|converter| converter.config_map == cm_name)
    }
}

impl Lifecycle for Manager {
    type Spec = ConverterSpec;
    type Ready = Ready;
    type Signal = ();

    const LABEL: &'static str = CONVERTER_LABEL;
    const DOCUMENT_KEY: &'static str = CONVERTER_KEY;
    const DIGEST_ANNOTATION: &'static str = DIGEST_ANNOTATION;
    const SOURCE_ANNOTATION: &'static str = SOURCE_ANNOTATION;
    const FIELD_MANAGER: &'static str = "gantry-converters";
    const ACTION: &'static str = "LoadConverter";
    const INVALID: &'static str = "InvalidConverter";
    const LOADED: &'static str = "ConverterLoaded";
    const NOUN: &'static str = "converter";

    fn parse(text: &str) -> Result<ConverterSpec, String> {
        spec::parse_spec(text).map_err(|e| e.to_string())
    }

    fn name(spec: &ConverterSpec) -> &str {
        &spec.crd
    }

    fn component(spec: &ConverterSpec) -> (Option<&SourceSpec>, Option<&str>) {
        (spec.source.as_ref(), spec.sha256.as_deref())
    }

    fn conflict(spec: &ConverterSpec, other_cm: &str, other: &ConverterSpec) -> Option<Refusal> {
        (other.crd == spec.crd).then(|| {
            Refusal::new(
                "ConverterCrdTaken",
                format!(
                    "CRD {} already has a converter in ConfigMap {other_cm}; this one is tried again when that one goes",
                    spec.crd
                ),
            )
            .claimed()
        })
    }

    fn prepare(
        &self,
        cm_name: &str,
        spec: Arc<ConverterSpec>,
        plugin: PendingPlugin,
    ) -> impl Future<Output = Result<Ready, Refusal>> + Send + 'static {
        let (client, runtime) = (self.client.clone(), self.runtime.clone());
        let running = self.running(cm_name, &spec.crd);
        async move {
            let plugin = plugin.fetch().await?;
            let source = plugin.source.clone();
            let crd = spec.crd.clone();
            let loaded = tokio::task::spawn_blocking(move || {
                runtime.load_converter_from(&crd, &plugin.component)
            })
            .await
            .map_err(|e| Refusal::new("ConverterLoadFailed", e.to_string()))?
            .map_err(|e| Refusal::new("ConverterLoadFailed", e.to_string()))?;
            let shadow = shadow_run(&client, &spec, &loaded, running).await?;
            Ok(Ready {
                spec: ConverterSpec::clone(&spec),
                plugin: loaded,
                source,
                shadow,
            })
        }
    }

    async fn install(&mut self, cm_name: &str, ready: Ready) -> Result<Installed, Refusal> {
        let Ready {
            spec,
            plugin,
            source,
            shadow,
        } = ready;
        let crd = spec.crd.clone();
        let digest = plugin.digest().to_string();
        // Atomic swap: reviews in flight keep the version they started with.
        self.converters.insert(LoadedConverter {
            spec: Arc::new(spec),
            plugin,
            config_map: cm_name.to_string(),
        });
        if let Some(old) = self.active.insert(cm_name.to_string(), crd.clone())
            && old != crd
        {
            self.converters.remove(&old);
        }
        tracing::info!(configmap = %cm_name, %crd, %digest, "converter in service");
        let from = source
            .as_deref()
            .map(|s| format!(" from {s}"))
            .unwrap_or_default();
        Ok(Installed {
            message: format!("converter for {crd} sha256:{digest}{from} in service ({shadow})"),
            digest,
            source,
        })
    }

    async fn retire(&mut self, cm_name: &str) {
        if let Some(crd) = self.active.remove(cm_name) {
            self.converters.remove(&crd);
        }
    }

    fn refused(&mut self, _cm_name: &str, _spec: Option<&ConverterSpec>) {}

    fn settled(&mut self) {
        self.converters.mark_loaded();
    }

    async fn signal(&mut self) {
        std::future::pending::<()>().await;
    }

    async fn on_signal(&mut self, (): ()) {}

    async fn shutdown(&mut self) {}
}
