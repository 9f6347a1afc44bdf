//! Gantry's HTTPS webhook server, shared by admission policies and CRD
//! converters: [`server`] (serving their routes), [`tls`] (its
//! certificate) and [`reach`] (how the API server reaches it, as a
//! webhook `clientConfig`).

pub mod reach;
pub mod server;
pub mod tls;
