//! Loaded plugins: one [`InstancePre`] each, instantiated into a fresh store
//! for every call.

use std::sync::Arc;

use gantry_sdk::{AdmissionRequest, Request, Response, Verdict};
use wasmtime::Store;
use wasmtime::component::{Component, InstancePre};

use super::Runtime;
use super::call::{self, Slot};
use super::error::{CallError, LoadError};
use super::limits::Limits;
use super::store::CallState;
use crate::capability::Grants;
use crate::contract::generated::converter::exports::gantry::plugin::conversion;
use crate::contract::generated::policy::exports::gantry::plugin::admission;
use crate::contract::generated::reconciler::exports::gantry::plugin::{config, reconcile};
use crate::contract::{self, EncodedRequest, names};

/// Pre-link `component` against the sandbox's imports.
fn instance_pre(
    runtime: &Runtime,
    name: &str,
    component: &Component,
) -> Result<InstancePre<CallState>, LoadError> {
    runtime
        .linker()
        .instantiate_pre(component)
        .map_err(|e| LoadError::Imports {
            name: name.to_string(),
            detail: format!("{e:#}"),
        })
}

/// The names a component exports, for error messages.
fn export_names(runtime: &Runtime, component: &Component) -> String {
    let names: Vec<String> = component
        .component_type()
        .exports(runtime.engine())
        .map(|(name, _)| name.to_string())
        .collect();
    if names.is_empty() {
        "nothing".into()
    } else {
        names.join(", ")
    }
}

fn wrong_world(
    runtime: &Runtime,
    name: &str,
    world: &'static str,
    component: &Component,
    e: &wasmtime::Error,
) -> LoadError {
    LoadError::WrongWorld {
        name: name.to_string(),
        world,
        detail: format!(
            "{e:#} (the component exports: {})",
            export_names(runtime, component)
        ),
    }
}

/// A loaded reconcile plugin. Cheap to share; each call gets its own store.
pub struct ReconcilerPlugin {
    runtime: Runtime,
    name: String,
    digest: String,
    pre: InstancePre<CallState>,
    reconcile: reconcile::GuestIndices,
    config: Option<config::GuestIndices>,
    imports_http: bool,
}

impl ReconcilerPlugin {
    pub(super) fn new(
        runtime: Runtime,
        name: &str,
        digest: String,
        component: &Component,
    ) -> Result<Self, LoadError> {
        let pre = instance_pre(&runtime, name, component)?;
        let reconcile = reconcile::GuestIndices::new(&pre)
            .map_err(|e| wrong_world(&runtime, name, names::RECONCILER_WORLD, component, &e))?;
        // `config` is optional; but if it is there it must have the right type.
        let config =
            if component
                .get_export_index(None, "gantry:plugin/config@0.1.0")
                .is_some()
            {
                Some(config::GuestIndices::new(&pre).map_err(|e| {
                    wrong_world(&runtime, name, names::RECONCILER_WORLD, component, &e)
                })?)
            } else {
                None
            };
        let imports_http = component
            .component_type()
            .imports(runtime.engine())
            .any(|(import, _)| import == names::HTTP_INTERFACE);
        Ok(Self {
            runtime,
            name: name.to_string(),
            digest,
            pre,
            reconcile,
            config,
            imports_http,
        })
    }

    /// The plugin's name (from its binding, or its file).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// sha256 of the component bytes, lowercase hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether the plugin exports `validate-config`.
    pub fn validates_config(&self) -> bool {
        self.config.is_some()
    }

    /// Whether the component imports `gantry:plugin/http` (and so needs a
    /// binding that grants it).
    pub fn imports_http(&self) -> bool {
        self.imports_http
    }

    /// Call `reconcile` on the blocking pool, with no capabilities granted.
    pub async fn reconcile(
        self: &Arc<Self>,
        request: Request,
        limits: Limits,
    ) -> Result<Response, CallError> {
        self.reconcile_with(request, limits, Grants::default())
            .await
    }

    /// Call `reconcile` on the blocking pool with `grants`.
    pub async fn reconcile_with(
        self: &Arc<Self>,
        request: Request,
        limits: Limits,
        grants: Grants,
    ) -> Result<Response, CallError> {
        let plugin = self.clone();
        self.runtime
            .run_blocking(move |slot| {
                let encoded = EncodedRequest::new(&request);
                plugin.reconcile_in(slot, &encoded, &limits, grants)
            })
            .await
    }

    /// Call `reconcile` on the blocking pool with a request already
    /// encoded (shared by the versions of a shadow run).
    pub async fn reconcile_encoded(
        self: &Arc<Self>,
        request: EncodedRequest,
        limits: Limits,
        grants: Grants,
    ) -> Result<Response, CallError> {
        let plugin = self.clone();
        self.runtime
            .run_blocking(move |slot| plugin.reconcile_in(slot, &request, &limits, grants))
            .await
    }

    /// Call `reconcile` from synchronous code, waiting for a slot. Blocks
    /// the calling thread (from a multi-threaded runtime's worker, through
    /// `block_in_place`); prefer [`Self::reconcile`] in async code.
    pub fn reconcile_blocking(
        &self,
        request: &Request,
        limits: &Limits,
    ) -> Result<Response, CallError> {
        self.reconcile_in(
            self.runtime.slot_blocking()?,
            &EncodedRequest::new(request),
            limits,
            Grants::default(),
        )
    }

    fn reconcile_in(
        &self,
        slot: Slot,
        request: &EncodedRequest,
        limits: &Limits,
        grants: Grants,
    ) -> Result<Response, CallError> {
        let result = call::run(
            &self.runtime,
            slot,
            &self.name,
            &self.pre,
            limits,
            grants,
            |store, instance| self.reconcile.load(store, instance),
            async |guest, store| guest.call_reconcile(store, &request.0).await,
        )?;
        match result {
            Ok(response) => contract::from_wit_response(response, limits),
            Err(error) => Err(CallError::Plugin(contract::reconcile_error(error))),
        }
    }

    /// Call `validate-config` (if exported) on the blocking pool.
    pub async fn validate_config(
        self: &Arc<Self>,
        config: serde_json::Value,
        limits: Limits,
    ) -> Result<(), CallError> {
        if self.config.is_none() {
            return Ok(());
        }
        let plugin = self.clone();
        self.runtime
            .run_blocking(move |slot| plugin.validate_config_in(slot, &config, &limits))
            .await
    }

    /// Call `validate-config` from synchronous code; Ok when the plugin has no such export.
    pub fn validate_config_blocking(
        &self,
        config: &serde_json::Value,
        limits: &Limits,
    ) -> Result<(), CallError> {
        if self.config.is_none() {
            return Ok(());
        }
        self.validate_config_in(self.runtime.slot_blocking()?, config, limits)
    }

    fn validate_config_in(
        &self,
        slot: Slot,
        config: &serde_json::Value,
        limits: &Limits,
    ) -> Result<(), CallError> {
        let Some(indices) = &self.config else {
            return Ok(());
        };
        let text = config.to_string();
        let verdict = call::run(
            &self.runtime,
            slot,
            &self.name,
            &self.pre,
            limits,
            Grants::default(),
            |store, instance| indices.load(store, instance),
            async |guest, store| guest.call_validate_config(store, &text).await,
        )?;
        verdict.map_err(|message| {
            CallError::Plugin(gantry_sdk::PluginError::permanent("InvalidConfig", message))
        })
    }
}

/// A loaded admission policy plugin.
pub struct PolicyPlugin {
    runtime: Runtime,
    name: String,
    digest: String,
    pre: InstancePre<CallState>,
    admission: admission::GuestIndices,
}

impl PolicyPlugin {
    pub(super) fn new(
        runtime: Runtime,
        name: &str,
        digest: String,
        component: &Component,
    ) -> Result<Self, LoadError> {
        let pre = instance_pre(&runtime, name, component)?;
        let admission = admission::GuestIndices::new(&pre)
            .map_err(|e| wrong_world(&runtime, name, names::POLICY_WORLD, component, &e))?;
        Ok(Self {
            runtime,
            name: name.to_string(),
            digest,
            pre,
            admission,
        })
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// sha256 of the component bytes, lowercase hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    fn call<R: Send>(
        &self,
        slot: Slot,
        limits: &Limits,
        f: impl AsyncFnOnce(&admission::Guest, &mut Store<CallState>) -> wasmtime::Result<R> + Send,
    ) -> Result<R, CallError> {
        call::run(
            &self.runtime,
            slot,
            &self.name,
            &self.pre,
            limits,
            Grants::default(),
            |store, instance| self.admission.load(store, instance),
            f,
        )
    }

    /// Call `validate` on the blocking pool.
    pub async fn validate(
        self: &Arc<Self>,
        request: AdmissionRequest,
        limits: Limits,
    ) -> Result<Verdict, CallError> {
        let plugin = self.clone();
        self.runtime
            .run_blocking(move |slot| plugin.validate_in(slot, &request, &limits))
            .await
    }

    /// Call `validate` from synchronous code, waiting for a slot.
    pub fn validate_blocking(
        &self,
        request: &AdmissionRequest,
        limits: &Limits,
    ) -> Result<Verdict, CallError> {
        self.validate_in(self.runtime.slot_blocking()?, request, limits)
    }

    fn validate_in(
        &self,
        slot: Slot,
        request: &AdmissionRequest,
        limits: &Limits,
    ) -> Result<Verdict, CallError> {
        let wit_request = contract::to_wit_admission(request);
        let verdict = self.call(slot, limits, async |guest, store| {
            guest.call_validate(store, &wit_request).await
        })?;
        contract::from_wit_verdict(verdict, limits)
    }

    /// Call `validate-settings` on the blocking pool.
    pub async fn validate_settings(
        self: &Arc<Self>,
        settings: serde_json::Value,
        limits: Limits,
    ) -> Result<(), CallError> {
        let plugin = self.clone();
        self.runtime
            .run_blocking(move |slot| plugin.validate_settings_in(slot, &settings, &limits))
            .await
    }

    /// Call `validate-settings` from synchronous code, waiting for a slot.
    pub fn validate_settings_blocking(
        &self,
        settings: &serde_json::Value,
        limits: &Limits,
    ) -> Result<(), CallError> {
        self.validate_settings_in(self.runtime.slot_blocking()?, settings, limits)
    }

    fn validate_settings_in(
        &self,
        slot: Slot,
        settings: &serde_json::Value,
        limits: &Limits,
    ) -> Result<(), CallError> {
        let text = settings.to_string();
        match self.call(slot, limits, async |guest, store| {
            guest.call_validate_settings(store, &text).await
        })? {
            Ok(()) => Ok(()),
            Err(message) => Err(CallError::Plugin(gantry_sdk::PluginError::permanent(
                "InvalidSettings",
                message,
            ))),
        }
    }
}

/// A loaded CRD converter plugin.
pub struct ConverterPlugin {
    runtime: Runtime,
    name: String,
    digest: String,
    pre: InstancePre<CallState>,
    conversion: conversion::GuestIndices,
}

impl ConverterPlugin {
    pub(super) fn new(
        runtime: Runtime,
        name: &str,
        digest: String,
        component: &Component,
    ) -> Result<Self, LoadError> {
        let pre = instance_pre(&runtime, name, component)?;
        let conversion = conversion::GuestIndices::new(&pre)
            .map_err(|e| wrong_world(&runtime, name, names::CONVERTER_WORLD, component, &e))?;
        Ok(Self {
            runtime,
            name: name.to_string(),
            digest,
            pre,
            conversion,
        })
    }

    /// The converter's name (the CRD it converts, or its file).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// sha256 of the component bytes, lowercase hex.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Call `convert` on the blocking pool: `objects` to
    /// `desired_api_version`, checked for size and shape (not yet for
    /// identity: see `conversion::check`).
    pub async fn convert(
        self: &Arc<Self>,
        objects: Vec<serde_json::Value>,
        desired_api_version: String,
        limits: Limits,
    ) -> Result<Vec<serde_json::Value>, CallError> {
        let plugin = self.clone();
        self.runtime
            .run_blocking(move |slot| {
                plugin.convert_in(slot, &objects, &desired_api_version, &limits)
            })
            .await
    }

    /// Call `convert` from synchronous code, waiting for a slot.
    pub fn convert_blocking(
        &self,
        objects: &[serde_json::Value],
        desired_api_version: &str,
        limits: &Limits,
    ) -> Result<Vec<serde_json::Value>, CallError> {
        self.convert_in(
            self.runtime.slot_blocking()?,
            objects,
            desired_api_version,
            limits,
        )
    }

    fn convert_in(
        &self,
        slot: Slot,
        objects: &[serde_json::Value],
        desired_api_version: &str,
        limits: &Limits,
    ) -> Result<Vec<serde_json::Value>, CallError> {
        let texts: Vec<String> = objects.iter().map(ToString::to_string).collect();
        let answer = call::run(
            &self.runtime,
            slot,
            &self.name,
            &self.pre,
            limits,
            Grants::default(),
            |store, instance| self.conversion.load(store, instance),
            async |guest, store| guest.call_convert(store, &texts, desired_api_version).await,
        )?;
        contract::from_wit_converted(answer, limits)
    }
}
