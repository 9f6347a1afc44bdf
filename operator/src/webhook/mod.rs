//! Gantry's HTTPS webhook server, shared by admission policies and CRD
//! converters: [`server`] (serving their routes), [`tls`] (its
//! certificate from files or generated at start), [`reach`] (how the API
//! server reaches it, as a webhook `clientConfig`), and the certificates
//! shared by every replica through a Secret: [`rotator`] (the loop that
//! keeps the Secret), [`renewal`] (what is due when), [`material`] (what
//! the Secret holds) and [`reload`] (serving a certificate that changes).

pub(crate) mod material;
pub mod reach;
pub mod reload;
pub mod renewal;
pub mod rotator;
pub mod server;
pub mod tls;
