//! The kubebuilder tutorial's Memcached operator as a Gantry plugin.
//!
//! A `Memcached` (spec.size, spec.containerPort) becomes a Deployment of
//! memcached with that many replicas. Status reports the ready replicas of
//! the observed Deployment and an `Available` condition.
//!
//! Config (all optional): `image` (default `memcached:1.6.26-alpine`).

use std::collections::BTreeMap;

use gantry_sdk::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use gantry_sdk::k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec,
    SeccompProfile, SecurityContext,
};
use gantry_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use gantry_sdk::{EventType, PluginError, Reconciler, Request, Response, Value};
use serde::{Deserialize, Serialize};

/// Image used when the binding's config names none.
pub const DEFAULT_IMAGE: &str = "memcached:1.6.26-alpine";

/// `Memcached.spec`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedSpec {
    /// Number of memcached replicas (1 to 10).
    #[serde(default = "one")]
    pub size: i32,
    /// Port memcached listens on.
    #[serde(default = "default_port")]
    pub container_port: i32,
}

fn one() -> i32 {
    1
}

fn default_port() -> i32 {
    11211
}

/// `Memcached.status` (the plugin's part).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemcachedStatus {
    /// Ready replicas of the Deployment.
    pub ready_replicas: i32,
}

/// The binding's config.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Container image.
    pub image: Option<String>,
}

/// The plugin.
pub struct Memcached;

impl Reconciler for Memcached {
    fn reconcile(request: Request) -> Result<Response, PluginError> {
        if request.finalizing {
            return Ok(Response::new().finalized());
        }
        let config: Config = request.config_as()?;
        let spec: MemcachedSpec = request.spec()?;
        if !(1..=10).contains(&spec.size) {
            return Err(PluginError::permanent(
                "InvalidSpec",
                format!("spec.size must be between 1 and 10, got {}", spec.size),
            ));
        }
        let name = request.parent_name()?;
        // A plugin metric: gantry_plugin_metric_deployments_rendered_total.
        gantry_sdk::metrics::counter_add("deployments_rendered", &[], 1.0);
        let deployment = deployment(
            name,
            &spec,
            config.image.as_deref().unwrap_or(DEFAULT_IMAGE),
        );

        let observed = request.observed_named::<Deployment>(name)?;
        let ready = observed
            .as_ref()
            .and_then(|d| d.status.as_ref())
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let observed_replicas = observed
            .as_ref()
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.replicas);

        let mut response = Response::new()
            .child(&deployment)?
            .status(&MemcachedStatus {
                ready_replicas: ready,
            })?;
        response = if ready >= spec.size {
            response.condition(
                "Available",
                true,
                "DeploymentReady",
                format!("{ready}/{} replicas ready", spec.size),
            )
        } else {
            response.condition(
                "Available",
                false,
                "Scaling",
                format!("{ready}/{} replicas ready", spec.size),
            )
        };
        if let Some(current) = observed_replicas.filter(|r| *r != spec.size) {
            response = response.event(
                EventType::Normal,
                "Scaling",
                format!("scaling memcached from {current} to {} replicas", spec.size),
            );
        }
        Ok(response)
    }

    fn validate_config(config: &Value) -> Result<(), String> {
        let config: Config = if config.is_null() {
            Config::default()
        } else {
            serde_json::from_value(config.clone()).map_err(|e| format!("invalid config: {e}"))?
        };
        match config.image {
            Some(image) if image.trim().is_empty() => Err("config.image must not be empty".into()),
            _ => Ok(()),
        }
    }
}

gantry_sdk::export_reconciler!(Memcached);

/// The Deployment a Memcached wants.
fn deployment(name: &str, spec: &MemcachedSpec, image: &str) -> Deployment {
    let labels: BTreeMap<String, String> = [
        (
            "app.kubernetes.io/name".to_string(),
            "memcached".to_string(),
        ),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
    ]
    .into();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels.clone()),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(spec.size),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    containers: vec![Container {
                        name: "memcached".into(),
                        image: Some(image.to_string()),
                        image_pull_policy: Some("IfNotPresent".into()),
                        command: Some(vec![
                            "memcached".into(),
                            "--memory-limit=64".into(),
                            "-o".into(),
                            "modern".into(),
                            "-v".into(),
                        ]),
                        ports: Some(vec![ContainerPort {
                            container_port: spec.container_port,
                            name: Some("memcached".into()),
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        }]),
                        security_context: Some(SecurityContext {
                            run_as_non_root: Some(true),
                            run_as_user: Some(1001),
                            allow_privilege_escalation: Some(false),
                            capabilities: Some(Capabilities {
                                drop: Some(vec!["ALL".into()]),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use gantry_sdk::json;

    use super::*;

    fn parent(size: i64) -> Value {
        json!({
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": "mc", "namespace": "default", "generation": 2},
            "spec": {"size": size, "containerPort": 11211}
        })
    }

    #[test]
    fn wants_a_deployment_with_size_replicas() {
        let response = Memcached::reconcile(Request::for_parent(parent(3))).unwrap();
        assert_eq!(response.children.len(), 1);
        let d = &response.children[0];
        assert_eq!(d["kind"], "Deployment");
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
            11211
        );
        assert_eq!(response.conditions[0].condition_type, "Available");
        assert_eq!(
            response.conditions[0].status,
            gantry_sdk::ConditionStatus::False
        );
    }

    #[test]
    fn reports_ready_replicas_from_the_observed_deployment() {
        let mut request = Request::for_parent(parent(2));
        request.observed.push(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "mc", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {}, "template": {}},
            "status": {"readyReplicas": 2}
        }));
        let response = Memcached::reconcile(request).unwrap();
        assert_eq!(response.status.unwrap()["readyReplicas"], 2);
        assert_eq!(
            response.conditions[0].status,
            gantry_sdk::ConditionStatus::True
        );
        assert_eq!(response.events[0].reason, "Scaling");
    }

    #[test]
    fn rejects_out_of_range_size_and_bad_config() {
        let err = Memcached::reconcile(Request::for_parent(parent(11))).unwrap_err();
        assert_eq!(err.reason, "InvalidSpec");
        assert!(!err.retryable);
        assert!(Memcached::validate_config(&json!({"image": ""})).is_err());
        assert!(Memcached::validate_config(&json!({"unknown": 1})).is_err());
        assert!(Memcached::validate_config(&json!({"image": "memcached:1.6"})).is_ok());
        assert!(Memcached::validate_config(&Value::Null).is_ok());
    }
}
