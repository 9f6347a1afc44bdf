//! The operator's API client: kube's own, with a layer that counts the
//! requests other than reads into a metric, so that the writes an operator
//! makes can be compared across implementations (`gantry bench converge
//! --peer`) and watched in production.

use kube::client::ConfigExt;
use prometheus_client::metrics::counter::Counter;

/// A client for `config` that adds one to `writes` for every request other
/// than GET, HEAD and OPTIONS (create, update, patch, delete), and also to
/// `event_writes` when it writes an Event.
pub fn counting_writes(
    config: &kube::Config,
    writes: Counter,
    event_writes: Counter,
) -> anyhow::Result<kube::Client> {
    let https = config.rustls_https_connector()?;
    let count =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            if !matches!(request.method().as_str(), "GET" | "HEAD" | "OPTIONS") {
                writes.inc();
                if writes_events(request.uri().path()) {
                    event_writes.inc();
                }
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

/// Whether a request to `path` is about Events: core v1 or
/// `events.k8s.io/v1`, in a namespace or across them.
fn writes_events(path: &str) -> bool {
    let Some(rest) = path
        .strip_prefix("/api/v1/")
        .or_else(|| path.strip_prefix("/apis/events.k8s.io/v1/"))
    else {
        return false;
    };
    let rest = rest
        .strip_prefix("namespaces/")
        .and_then(|r| r.split_once('/'))
        .map_or(rest, |(_, r)| r);
    rest == "events" || rest.starts_with("events/")
}

#[cfg(test)]
mod tests {
    use super::writes_events;

    #[test]
    fn event_paths_are_told_from_other_writes() {
        for path in [
            "/api/v1/namespaces/apps/events",
            "/api/v1/namespaces/apps/events/web.1",
            "/apis/events.k8s.io/v1/namespaces/apps/events/web.1",
            "/apis/events.k8s.io/v1/events",
        ] {
            assert!(writes_events(path), "{path}");
        }
        for path in [
            "/api/v1/namespaces/events",
            "/api/v1/namespaces/events/configmaps/web",
            "/api/v1/namespaces/apps/configmaps/events",
            "/apis/apps/v1/namespaces/apps/deployments/events",
            "/apis/bench.gantry.dev/v1/namespaces/apps/events",
        ] {
            assert!(!writes_events(path), "{path}");
        }
    }
}
