//! Gantry's embedded Kubernetes API server: real clients (kube-rs, kubectl) use it
//! unmodified.
//!
//! Where to start reading:
//! - [`server`]: [`ApiServer::start`] / [`run`] wire the store, registry, HTTP router
//!   and background controllers together.
//! - [`http`]: every request enters `http::handle`; resource paths are parsed and
//!   dispatched by verb to [`handlers`].
//! - [`handlers::write`]: create/update/patch/apply; [`objects`] holds what a write does
//!   to an object (admission, metadata, managedFields, deletion).
//! - [`storage`]: objects, resourceVersions, watch history, redb durability.
//! - [`watch`]: open watches, the events offered to them, their bounds.
//! - [`registry`]: which resources exist (built-ins from k8s-openapi, CRDs via [`crd`]).
//! - [`admission`]: calls the admission webhooks of webhook configurations.
//! - [`conversion`]: serves custom resources at other versions (CRD conversion webhooks).
//! - [`gc`]: garbage collector, namespace and CRD cleanup controllers.
//! - [`simulate`]: simulated workloads (a Node, Pods that become Ready, the workload
//!   controllers' children and status), a client of the server that `gantry dev` runs.

pub mod access;
pub mod admission;
pub mod apiservices;
pub mod app;
pub mod auth;
pub mod bootstrap;
pub mod certificates;
pub mod config;
pub mod conversion;
pub mod crd;
pub mod discovery;
pub mod error;
pub mod gc;
pub mod handlers;
pub mod http;
pub mod kubeconfig;
pub mod listener;
pub mod objects;
pub mod openapi;
pub mod private_file;
pub mod protobuf;
pub mod registry;
pub mod selectors;
pub mod server;
pub mod simulate;
pub mod storage;
pub mod strategy;
pub mod table;
pub mod tls;
pub mod watch;

pub use app::WriteCounts;
pub use config::{ApiServerArgs, Config};
pub use server::{ApiServer, ApiServerHandle, StartError, run};
