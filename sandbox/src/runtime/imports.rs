//! The capability imports (`http`, `metrics`) on a call's store: each does
//! what the call's [`Grants`](crate::capability::Grants) allow.

use super::store::CallState;
use crate::capability::http::send;
use crate::capability::metrics::Kind;
use crate::contract::generated::reconciler::gantry::plugin::{http, metrics};

impl http::Host for CallState {
    async fn send(&mut self, request: http::Request) -> Result<http::Response, http::Error> {
        let grant = self.grants.http.clone();
        send(grant.as_deref(), &mut self.http, request).await
    }
}

impl CallState {
    fn sample(&self, kind: Kind, name: &str, labels: &[(String, String)], value: f64) {
        if let Some(scope) = &self.grants.metrics {
            // A dropped sample is counted; the plugin is not told.
            let _ = scope
                .metrics
                .record(&scope.binding, &scope.digest, kind, name, labels, value);
        }
    }
}

impl metrics::Host for CallState {
    fn counter_add(&mut self, name: String, labels: Vec<(String, String)>, value: f64) {
        self.sample(Kind::Counter, &name, &labels, value);
    }

    fn gauge_set(&mut self, name: String, labels: Vec<(String, String)>, value: f64) {
        self.sample(Kind::Gauge, &name, &labels, value);
    }

    fn histogram_observe(&mut self, name: String, labels: Vec<(String, String)>, value: f64) {
        self.sample(Kind::Histogram, &name, &labels, value);
    }
}
