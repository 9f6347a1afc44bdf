//! Plugin delivery: plugins come in ConfigMaps, whatever they are for
//! (reconcile bindings, admission policies, CRD converters), and go into
//! service or are refused here.
//!
//! Read top-down: [`envelope`] (what every binding ConfigMap carries: the
//! component inline or from a [`source`], the sha256 pin) and [`limits`]
//! (the one limits type) → [`loader`] (the one swap loop, generic over a
//! [`Lifecycle`]) → [`registry`] (what a kind has in service). Reconcile
//! bindings (`controller::manager`), admission policies
//! (`policy::manager`) and CRD converters (`conversion::manager`) are
//! lifecycles of the loader.

pub mod envelope;
pub mod limits;
pub(crate) mod loader;
pub(crate) mod registry;
pub mod source;

pub use envelope::{Component, EnvelopeError, PluginBytes};
pub use limits::LimitsSpec;
pub use loader::{Installed, Lifecycle, PendingPlugin, Refusal};
