//! # gantry-sdk: write Gantry plugins in Rust
//!
//! A reconcile plugin is a pure function from a [`Request`] (the parent
//! object, its observed children, related objects, config) to a [`Response`]
//! (the desired children, status, conditions, events). Implement
//! [`Reconciler`] and export it:
//!
//! ```
//! use gantry_sdk::{Reconciler, Request, Response, PluginError};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! struct Hello;
//!
//! impl Reconciler for Hello {
//!     fn reconcile(request: Request) -> Result<Response, PluginError> {
//!         let name = request.parent_name()?;
//!         let mut map = ConfigMap::default();
//!         map.metadata.name = Some(format!("{name}-hello"));
//!         map.data = Some([("greeting".to_string(), format!("hello {name}"))].into());
//!         Response::new().child(&map)
//!     }
//! }
//!
//! gantry_sdk::export_reconciler!(Hello);
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2` as a `cdylib`: the
//! result is a component for the host. The same crate also builds natively,
//! so the logic can be unit-tested with `cargo test` like any Rust code.
//!
//! The host owns everything Kubernetes-specific around the call: it sets the
//! owner reference and Gantry's labels on every child, applies them with
//! server-side apply, prunes what is no longer desired, and writes status.
//! Plugins never do.
//!
//! Admission policies implement [`Policy`] and use [`export_policy!`];
//! CRD converters implement [`Converter`] and use [`export_converter!`].
//!
//! Reconcile plugins may also record [`metrics`], and, where their binding
//! grants `capabilities.http`, send requests with the [`http`] client. A
//! component imports these only when it uses them.

// Others build on this crate, so its fallible and panicking functions say when
// they fail (the workspace allows both lints for the application crates).
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

pub mod conversion;
#[cfg(feature = "crd")]
mod crd;
pub mod http;
mod log;
pub mod metrics;
mod policy;
mod reconcile;

#[doc(hidden)]
#[cfg(target_arch = "wasm32")]
pub mod guest;

pub use conversion::Converter;
#[cfg(feature = "crd")]
pub use crd::{HostStatus, crd_json, print_crd};
pub use log::{LogLevel, debug, error, info, trace, warn};
pub use policy::{AdmissionRequest, Mutation, Policy, Verdict, pod_spec_path};
pub use reconcile::{
    Condition, ConditionStatus, Event, EventType, ObjectRef, PluginError, Reconciler, Request,
    Response, Trigger,
};

pub use k8s_openapi;
pub use serde_json;
pub use serde_json::{Value, json};

/// Export a [`Reconciler`] implementation as the component's `reconcile` and
/// `config` interfaces. Natively (not `wasm32`) this expands to nothing, so
/// plugin crates also build and test as ordinary Rust libraries.
#[macro_export]
macro_rules! export_reconciler {
    ($plugin:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct GantryReconcilerExport;

            impl $crate::guest::reconciler::exports::gantry::plugin::reconcile::Guest
                for GantryReconcilerExport
            {
                fn reconcile(
                    request: $crate::guest::reconciler::exports::gantry::plugin::reconcile::Request,
                ) -> ::core::result::Result<
                    $crate::guest::reconciler::exports::gantry::plugin::reconcile::Response,
                    $crate::guest::reconciler::exports::gantry::plugin::reconcile::PluginError,
                > {
                    $crate::guest::reconcile::<$plugin>(request)
                }
            }

            impl $crate::guest::reconciler::exports::gantry::plugin::config::Guest
                for GantryReconcilerExport
            {
                fn validate_config(
                    config: ::std::string::String,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::guest::validate_config::<$plugin>(&config)
                }
            }

            $crate::guest::reconciler::export!(
                GantryReconcilerExport with_types_in $crate::guest::reconciler
            );
        };
    };
}

/// Export a [`Policy`] implementation as the component's `admission`
/// interface. Natively this expands to nothing.
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct GantryPolicyExport;

            impl $crate::guest::policy::exports::gantry::plugin::admission::Guest
                for GantryPolicyExport
            {
                fn validate(
                    request: $crate::guest::policy::exports::gantry::plugin::admission::AdmissionRequest,
                ) -> $crate::guest::policy::exports::gantry::plugin::admission::Verdict {
                    $crate::guest::validate::<$policy>(&request)
                }

                fn validate_settings(
                    settings: ::std::string::String,
                ) -> ::core::result::Result<(), ::std::string::String> {
                    $crate::guest::validate_settings::<$policy>(&settings)
                }
            }

            $crate::guest::policy::export!(
                GantryPolicyExport with_types_in $crate::guest::policy
            );
        };
    };
}

/// Export a [`Converter`] implementation as the component's `conversion`
/// interface (the `converter` world). Natively this expands to nothing.
#[macro_export]
macro_rules! export_converter {
    ($converter:ty) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct GantryConverterExport;

            impl $crate::guest::converter::exports::gantry::plugin::conversion::Guest
                for GantryConverterExport
            {
                fn convert(
                    objects: ::std::vec::Vec<::std::string::String>,
                    desired_api_version: ::std::string::String,
                ) -> ::core::result::Result<
                    ::std::vec::Vec<::std::string::String>,
                    ::std::string::String,
                > {
                    $crate::guest::convert::<$converter>(objects, &desired_api_version)
                }
            }

            $crate::guest::converter::export!(
                GantryConverterExport with_types_in $crate::guest::converter
            );
        };
    };
}
