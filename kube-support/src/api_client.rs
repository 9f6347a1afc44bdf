//! The operator's API client: kube's own, with a layer that counts the
//! requests other than reads into a metric, so that the writes an operator
//! makes can be compared across implementations (`gantry bench converge
//! --peer`) and watched in production.

use kube::client::ConfigExt;
use prometheus_client::metrics::counter::Counter;

/// A client for `config` that adds one to `writes` for every request other
/// than GET, HEAD and OPTIONS (create, update, patch, delete).
pub fn counting_writes(config: &kube::Config, writes: Counter) -> anyhow::Result<kube::Client> {
    let https = config.rustls_https_connector()?;
    let count =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            if !matches!(request.method().as_str(), "GET" | "HEAD" | "OPTIONS") {
                writes.inc();
            }
            request
        });
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(count)
        .map_err(tower::BoxError::from)
        .service(
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(https),
        );
    Ok(kube::Client::new(service, config.default_namespace.clone()))
}
