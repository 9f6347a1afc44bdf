//! Wasm OCI artifacts: pull (resolve a tag to a digest, then the one
//! `application/wasm` layer) and push (`gantry plugin push`).
//!
//! The layout is the CNCF TAG Runtime's Wasm OCI artifact, as `wkg` and
//! `wash` push it: an image manifest whose config has media type
//! [`WASM_CONFIG_MEDIA_TYPE`] and a single layer [`WASM_LAYER_MEDIA_TYPE`]
//! holding the component. Pulls also accept the older `wasm-to-oci` layer
//! type ([`LEGACY_WASM_LAYER_MEDIA_TYPE`], oci-client's own constant).
//! Registries are accessed anonymously.

use std::collections::BTreeMap;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::fetch::{FetchError, FetchSettings};

/// Config media type of a Wasm OCI artifact (CNCF layout).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Layer media type of the component (CNCF layout).
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Layer media type `wasm-to-oci` used; accepted on pull.
pub const LEGACY_WASM_LAYER_MEDIA_TYPE: &str = oci_client::manifest::WASM_LAYER_MEDIA_TYPE;

/// A client for the registry of `reference`; plain HTTP to it if `insecure`.
pub fn client(reference: &str, insecure: bool, settings: &FetchSettings) -> Client {
    gantry_kube::tls::install_crypto_provider();
    let registry = reference.split('/').next().unwrap_or_default().to_string();
    let protocol = if insecure {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(settings.connect_timeout),
        read_timeout: Some(settings.read_timeout),
        ..ClientConfig::default()
    })
}

// Called as `map_err(registry_error)`, which hands the error over by value.
#[allow(clippy::needless_pass_by_value)]
fn registry_error(e: OciDistributionError) -> FetchError {
    let transient = match &e {
        OciDistributionError::RequestError(_) | OciDistributionError::IoError(_) => true,
        OciDistributionError::ServerError { code, .. } => {
            *code >= 500 || *code == 408 || *code == 429
        }
        _ => false,
    };
    FetchError::Registry {
        message: e.to_string(),
        transient,
    }
}

/// The manifest digest of `reference` and its component layer.
pub async fn resolve(
    client: &Client,
    reference: &Reference,
    settings: &FetchSettings,
) -> Result<(String, OciDescriptor), FetchError> {
    let (manifest, digest) = client
        .pull_image_manifest(reference, &RegistryAuth::Anonymous)
        .await
        .map_err(registry_error)?;
    if let Some(pinned) = reference.digest()
        && pinned != digest
    {
        return Err(FetchError::DigestMismatch {
            expected: pinned.to_string(),
            actual: digest,
        });
    }
    let layer = component_layer(&manifest)?;
    let size = usize::try_from(layer.size).unwrap_or(usize::MAX);
    if size > settings.max_bytes {
        return Err(FetchError::TooLarge {
            limit: settings.max_bytes,
        });
    }
    if !layer.digest.starts_with("sha256:") {
        return Err(FetchError::NotWasmArtifact(format!(
            "layer digest {} is not sha256",
            layer.digest
        )));
    }
    Ok((digest, layer))
}

/// The single `application/wasm` layer of a Wasm artifact.
pub fn component_layer(manifest: &OciImageManifest) -> Result<OciDescriptor, FetchError> {
    let wasm: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| {
            l.media_type == WASM_LAYER_MEDIA_TYPE || l.media_type == LEGACY_WASM_LAYER_MEDIA_TYPE
        })
        .collect();
    match wasm.as_slice() {
        [layer] => Ok((*layer).clone()),
        [] => Err(FetchError::NotWasmArtifact(format!(
            "no {WASM_LAYER_MEDIA_TYPE} layer (config {}, layers {:?})",
            manifest.config.media_type,
            manifest
                .layers
                .iter()
                .map(|l| &l.media_type)
                .collect::<Vec<_>>()
        ))),
        _ => Err(FetchError::NotWasmArtifact(format!(
            "{} {WASM_LAYER_MEDIA_TYPE} layers; expected one",
            wasm.len()
        ))),
    }
}

/// Download `layer`, at most `settings.max_bytes`.
pub async fn pull_layer(
    client: &Client,
    reference: &Reference,
    layer: &OciDescriptor,
    settings: &FetchSettings,
) -> Result<Vec<u8>, FetchError> {
    let limit = settings.max_bytes;
    let mut stream = client
        .pull_blob_stream(reference, layer)
        .await
        .map_err(registry_error)?;
    let mut body = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0).min(limit));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| FetchError::Transport(e.to_string()))?;
        if body.len() + chunk.len() > limit {
            return Err(FetchError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// What a push produced.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// `oci://host/repo@sha256:<manifest digest>`.
    pub reference: String,
    /// The manifest digest, `sha256:<hex>`.
    pub manifest_digest: String,
    /// The component's sha256 (hex): the binding's `sha256` pin.
    pub component_sha256: String,
}

/// Push `component` to `reference` (`host/repo:tag`, without `oci://`) as
/// a Wasm OCI artifact.
pub async fn push(
    component: Vec<u8>,
    reference: &str,
    insecure: bool,
    settings: &FetchSettings,
) -> anyhow::Result<Pushed> {
    let parsed: Reference = reference.parse()?;
    let client = client(reference, insecure, settings);
    let component_sha256 = gantry_sandbox::runtime::digest(&component);
    let layer_digest = format!("sha256:{component_sha256}");
    let layers = vec![ImageLayer::new(
        component,
        WASM_LAYER_MEDIA_TYPE.to_string(),
        None,
    )];
    // The CNCF Wasm artifact config: architecture wasm, os wasip2.
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let config = Config {
        data: serde_json::to_vec(&config)?.into(),
        media_type: WASM_CONFIG_MEDIA_TYPE.to_string(),
        annotations: None,
    };
    let annotations = BTreeMap::from([(
        "org.opencontainers.image.created".to_string(),
        humantime_now(),
    )]);
    let manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    client
        .push(
            &parsed,
            &layers,
            config,
            &RegistryAuth::Anonymous,
            Some(manifest),
        )
        .await?;
    let manifest_digest = client
        .fetch_manifest_digest(&parsed, &RegistryAuth::Anonymous)
        .await?;
    Ok(Pushed {
        reference: format!(
            "oci://{}/{}@{manifest_digest}",
            parsed.registry(),
            parsed.repository()
        ),
        manifest_digest,
        component_sha256,
    })
}

/// Now as RFC 3339 (UTC, seconds).
fn humantime_now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
