//! The WIT glue, compiled only into components (`wasm32`). Converts between
//! the generated bindings and the SDK's plain Rust types; used by
//! [`export_reconciler!`](crate::export_reconciler) and
//! [`export_policy!`](crate::export_policy).

use serde_json::Value;

use crate::{Converter, LogLevel, Policy, Reconciler};

/// Bindings for the `reconciler-capable` world: the `reconciler` world
/// with the `http` and `metrics` imports, which only end up in a component
/// that calls them.
// wit-bindgen's generated glue rebuilds `Vec`s with `from_raw_parts(ptr, len, len)`.
#[allow(clippy::same_length_and_capacity)]
pub mod reconciler {
    wit_bindgen::generate!({
        world: "reconciler-capable",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "export",
    });
}

/// Bindings for the `converter` world.
// As above.
#[allow(clippy::same_length_and_capacity)]
pub mod converter {
    wit_bindgen::generate!({
        world: "converter",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "export",
    });
}

/// Bindings for the `policy` world.
// As above.
#[allow(clippy::same_length_and_capacity)]
pub mod policy {
    wit_bindgen::generate!({
        world: "policy",
        path: "../wit",
        pub_export_macro: true,
        export_macro_name: "export",
    });
}

use policy::exports::gantry::plugin::admission as wit_admission;
use reconciler::exports::gantry::plugin::reconcile as wit;
use reconciler::gantry::plugin::types::ObjectRef as WitObjectRef;

/// Forward a log line to the host.
pub fn log(level: LogLevel, message: &str) {
    use reconciler::gantry::plugin::types::LogLevel as L;
    let level = match level {
        LogLevel::Trace => L::Trace,
        LogLevel::Debug => L::Debug,
        LogLevel::Info => L::Info,
        LogLevel::Warn => L::Warn,
        LogLevel::Error => L::Error,
    };
    reconciler::gantry::plugin::host::log(level, message);
}

/// Send one request through the host's `http` import.
pub(crate) fn http_send(
    r: crate::http::Request,
) -> Result<crate::http::Response, crate::http::Error> {
    use crate::http::{Error as E, Method as M};
    use reconciler::gantry::plugin::http as wit_http;
    let method = match r.method {
        M::Get => wit_http::Method::Get,
        M::Head => wit_http::Method::Head,
        M::Post => wit_http::Method::Post,
        M::Put => wit_http::Method::Put,
        M::Patch => wit_http::Method::Patch,
        M::Delete => wit_http::Method::Delete,
    };
    let request = wit_http::Request {
        method,
        url: r.url,
        headers: r.headers,
        body: r.body,
    };
    match wit_http::send(&request) {
        Ok(response) => Ok(crate::http::Response {
            status: response.status,
            headers: response.headers,
            body: response.body,
        }),
        Err(e) => Err(match e {
            wit_http::Error::NotGranted(m) => E::NotGranted(m),
            wit_http::Error::NotAllowed(m) => E::NotAllowed(m),
            wit_http::Error::ShadowRun(m) => E::ShadowRun(m),
            wit_http::Error::TooManyRequests(m) => E::TooManyRequests(m),
            wit_http::Error::TooLarge(m) => E::TooLarge(m),
            wit_http::Error::Timeout(m) => E::Timeout(m),
            wit_http::Error::InvalidRequest(m) => E::InvalidRequest(m),
            wit_http::Error::Transport(m) => E::Transport(m),
            wit_http::Error::Host(m) => E::Host(m),
        }),
    }
}

/// Record one sample through the host's `metrics` import.
pub(crate) fn metric(kind: crate::metrics::Kind, name: &str, labels: &[(&str, &str)], value: f64) {
    use reconciler::gantry::plugin::metrics as wit_metrics;
    let labels: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    match kind {
        crate::metrics::Kind::Counter => wit_metrics::counter_add(name, &labels, value),
        crate::metrics::Kind::Gauge => wit_metrics::gauge_set(name, &labels, value),
        crate::metrics::Kind::Histogram => wit_metrics::histogram_observe(name, &labels, value),
    }
}

fn parse(what: &str, text: &str) -> Result<Value, crate::PluginError> {
    serde_json::from_str(text)
        .map_err(|e| crate::PluginError::invalid_input(format!("{what} is not valid JSON: {e}")))
}

fn object_ref(r: WitObjectRef) -> crate::ObjectRef {
    crate::ObjectRef {
        api_version: r.api_version,
        kind: r.kind,
        namespace: r.namespace,
        name: r.name,
    }
}

fn request(r: wit::Request) -> Result<crate::Request, crate::PluginError> {
    Ok(crate::Request {
        parent: parse("parent", &r.parent)?,
        observed: r
            .observed
            .iter()
            .map(|o| parse("observed object", o))
            .collect::<Result<_, _>>()?,
        related: r
            .related
            .iter()
            .map(|o| parse("related object", o))
            .collect::<Result<_, _>>()?,
        config: parse("config", &r.config)?,
        finalizing: r.finalizing,
        trigger: match r.trigger {
            wit::Trigger::ParentChanged => crate::Trigger::ParentChanged,
            wit::Trigger::ChildChanged(o) => crate::Trigger::ChildChanged(object_ref(o)),
            wit::Trigger::RelatedChanged(o) => crate::Trigger::RelatedChanged(object_ref(o)),
            wit::Trigger::Resync => crate::Trigger::Resync,
            wit::Trigger::Requeue => crate::Trigger::Requeue,
            wit::Trigger::PluginChanged => crate::Trigger::PluginChanged,
        },
    })
}

fn response(r: crate::Response) -> wit::Response {
    wit::Response {
        children: r.children.iter().map(Value::to_string).collect(),
        status: r.status.as_ref().map(Value::to_string),
        conditions: r
            .conditions
            .into_iter()
            .map(|c| wit::Condition {
                condition_type: c.condition_type,
                status: match c.status {
                    crate::ConditionStatus::True => wit::ConditionStatus::True,
                    crate::ConditionStatus::False => wit::ConditionStatus::False,
                    crate::ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
                },
                reason: c.reason,
                message: c.message,
            })
            .collect(),
        events: r
            .events
            .into_iter()
            .map(|e| wit::Event {
                event_type: match e.event_type {
                    crate::EventType::Normal => wit::EventType::Normal,
                    crate::EventType::Warning => wit::EventType::Warning,
                },
                reason: e.reason,
                message: e.message,
            })
            .collect(),
        // Saturates past u64::MAX ms (~584 million years).
        requeue_after_ms: r
            .requeue_after
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        finalized: r.finalized,
    }
}

fn plugin_error(e: crate::PluginError) -> wit::PluginError {
    wit::PluginError {
        message: e.message,
        reason: e.reason,
        retryable: e.retryable,
    }
}

/// `reconcile` export: decode, call the plugin, encode.
pub fn reconcile<P: Reconciler>(r: wit::Request) -> Result<wit::Response, wit::PluginError> {
    let request = request(r).map_err(plugin_error)?;
    P::reconcile(request).map(response).map_err(plugin_error)
}

/// `validate-config` export.
pub fn validate_config<P: Reconciler>(config: &str) -> Result<(), String> {
    let config: Value =
        serde_json::from_str(config).map_err(|e| format!("config is not valid JSON: {e}"))?;
    P::validate_config(&config)
}

/// `validate` export of the policy world.
pub fn validate<P: Policy>(r: &wit_admission::AdmissionRequest) -> wit_admission::Verdict {
    let decoded = serde_json::from_str(&r.request).and_then(|request| {
        Ok(crate::AdmissionRequest {
            request,
            settings: serde_json::from_str(&r.settings)?,
        })
    });
    let verdict = match decoded {
        Ok(request) => P::validate(request),
        Err(e) => crate::Verdict::deny(format!("admission request is not valid JSON: {e}")),
    };
    wit_admission::Verdict {
        allowed: verdict.allowed,
        message: verdict.message,
        code: verdict.code,
        mutation: verdict.mutation.map(|m| match m {
            crate::Mutation::JsonPatch(p) => wit_admission::Mutation::JsonPatch(p.to_string()),
            crate::Mutation::MutatedObject(o) => {
                wit_admission::Mutation::MutatedObject(o.to_string())
            }
        }),
        warnings: verdict.warnings,
    }
}

/// `validate-settings` export of the policy world.
pub fn validate_settings<P: Policy>(settings: &str) -> Result<(), String> {
    let settings: Value =
        serde_json::from_str(settings).map_err(|e| format!("settings are not valid JSON: {e}"))?;
    P::validate_settings(&settings)
}

/// `convert` export: decode each object, convert it, encode.
pub fn convert<C: Converter>(
    objects: Vec<String>,
    desired_api_version: &str,
) -> Result<Vec<String>, String> {
    let objects = objects
        .iter()
        .map(|text| {
            serde_json::from_str(text).map_err(|e| format!("object is not valid JSON: {e}"))
        })
        .collect::<Result<Vec<Value>, String>>()?;
    let converted = crate::conversion::convert_all::<C>(objects, desired_api_version)?;
    Ok(converted.iter().map(Value::to_string).collect())
}
