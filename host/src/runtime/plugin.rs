//! Loaded plugins: one [`InstancePre`] each, instantiated into a fresh store
//! for every call.

use std::sync::Arc;

use gantry_sdk::{AdmissionRequest, Request, Response, Verdict};
use wasmtime::component::{Component, Instance, InstancePre};
use wasmtime::{Store, Trap};

use super::Runtime;
use super::error::{CallError, LoadError};
use super::limits::Limits;
use super::store::{CallState, new_store};
use crate::contract::bindings::policy::exports::gantry::plugin::admission;
use crate::contract::bindings::reconciler::exports::gantry::plugin::{config, reconcile};
use crate::contract::{self, names};

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
    e: wasmtime::Error,
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

/// Turn a failed call into the error that says why: deadline, memory, or a
/// trap with whatever the plugin printed to stderr.
fn call_failure(store: &Store<CallState>, limits: &Limits, error: wasmtime::Error) -> CallError {
    store.data().flush_output();
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return CallError::Timeout {
            deadline: limits.deadline,
        };
    }
    if store.data().memory_exceeded() {
        return CallError::OutOfMemory {
            limit: limits.memory_bytes,
        };
    }
    let stderr = store.data().stderr_text();
    let mut message = format!("{error:#}");
    if !stderr.is_empty() {
        message.push_str("; plugin stderr: ");
        message.push_str(&stderr);
    }
    CallError::Trap { message }
}

/// One call in a fresh sandbox: instantiate, load the export with `load`,
/// run `call`; a failure says why (deadline, memory, trap).
fn sandboxed<G, R>(
    runtime: &Runtime,
    name: &str,
    pre: &InstancePre<CallState>,
    limits: &Limits,
    load: impl FnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<G>,
    call: impl FnOnce(&G, &mut Store<CallState>) -> wasmtime::Result<R>,
) -> Result<R, CallError> {
    let mut store = new_store(runtime.engine(), name, limits);
    let outcome = pre
        .instantiate(&mut store)
        .and_then(|instance| load(&mut store, &instance))
        .and_then(|guest| call(&guest, &mut store));
    match outcome {
        Ok(result) => {
            store.data().flush_output();
            Ok(result)
        }
        Err(e) => Err(call_failure(&store, limits, e)),
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
            .map_err(|e| wrong_world(&runtime, name, names::RECONCILER_WORLD, component, e))?;
        // `config` is optional; but if it is there it must have the right type.
        let config =
            if component
                .get_export_index(None, "gantry:plugin/config@0.1.0")
                .is_some()
            {
                Some(config::GuestIndices::new(&pre).map_err(|e| {
                    wrong_world(&runtime, name, names::RECONCILER_WORLD, component, e)
                })?)
            } else {
                None
            };
        Ok(Self {
            runtime,
            name: name.to_string(),
            digest,
            pre,
            reconcile,
            config,
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

    /// Call `reconcile` on the blocking pool.
    pub async fn reconcile(
        self: &Arc<Self>,
        request: Request,
        limits: Limits,
    ) -> Result<Response, CallError> {
        let plugin = self.clone();
        self.runtime
            .run_blocking(move || plugin.reconcile_blocking(&request, &limits))
            .await
    }

    /// Call `reconcile` on this thread. Not for async contexts.
    pub fn reconcile_blocking(
        &self,
        request: &Request,
        limits: &Limits,
    ) -> Result<Response, CallError> {
        let wit_request = contract::to_wit_request(request);
        let result = sandboxed(
            &self.runtime,
            &self.name,
            &self.pre,
            limits,
            |store, instance| self.reconcile.load(store, instance),
            |guest, store| guest.call_reconcile(store, &wit_request),
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
        let plugin = self.clone();
        self.runtime
            .run_blocking(move || plugin.validate_config_blocking(&config, &limits))
            .await
    }

    /// Call `validate-config` on this thread; Ok when the plugin has no such export.
    pub fn validate_config_blocking(
        &self,
        config: &serde_json::Value,
        limits: &Limits,
    ) -> Result<(), CallError> {
        let Some(indices) = &self.config else {
            return Ok(());
        };
        let text = config.to_string();
        let verdict = sandboxed(
            &self.runtime,
            &self.name,
            &self.pre,
            limits,
            |store, instance| indices.load(store, instance),
            |guest, store| guest.call_validate_config(store, &text),
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
            .map_err(|e| wrong_world(&runtime, name, names::POLICY_WORLD, component, e))?;
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

    fn call<R>(
        &self,
        limits: &Limits,
        f: impl FnOnce(&admission::Guest, &mut Store<CallState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        sandboxed(
            &self.runtime,
            &self.name,
            &self.pre,
            limits,
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
            .run_blocking(move || plugin.validate_blocking(&request, &limits))
            .await
    }

    /// Call `validate` on this thread.
    pub fn validate_blocking(
        &self,
        request: &AdmissionRequest,
        limits: &Limits,
    ) -> Result<Verdict, CallError> {
        let wit_request = contract::to_wit_admission(request);
        let verdict = self.call(limits, |guest, store| {
            guest.call_validate(store, &wit_request)
        })?;
        contract::from_wit_verdict(verdict, limits)
    }

    /// Call `validate-settings` on this thread.
    pub fn validate_settings_blocking(
        &self,
        settings: &serde_json::Value,
        limits: &Limits,
    ) -> Result<(), CallError> {
        let text = settings.to_string();
        match self.call(limits, |guest, store| {
            guest.call_validate_settings(store, &text)
        })? {
            Ok(()) => Ok(()),
            Err(message) => Err(CallError::Plugin(gantry_sdk::PluginError::permanent(
                "InvalidSettings",
                message,
            ))),
        }
    }
}
