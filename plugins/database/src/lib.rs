//! The `Database` example: a replicated PostgreSQL as a StatefulSet with a
//! headless Service and a ConfigMap of settings.
//!
//! `spec.replicas` (1 to 5), `spec.storage` (a quantity such as `1Gi`),
//! `spec.version` (PostgreSQL major version). Status reports ready replicas
//! and a `Ready` condition.
//!
//! When the binding finalizes, deletion first drains the database: the
//! StatefulSet is scaled to zero, and the plugin reports `finalized` once no
//! replica is left running.

use std::collections::BTreeMap;

use gantry_sdk::k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec};
use gantry_sdk::k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec, Volume,
    VolumeMount, VolumeResourceRequirements,
};
use gantry_sdk::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use gantry_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use gantry_sdk::{EventType, PluginError, Reconciler, Request, Response};
use serde::{Deserialize, Serialize};

/// Supported PostgreSQL major versions.
pub const VERSIONS: &[&str] = &["14", "15", "16", "17"];

/// `Database.spec`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseSpec {
    /// Replicas, 1 to 5.
    #[serde(default = "one")]
    pub replicas: i32,
    /// Volume size per replica.
    #[serde(default = "default_storage")]
    pub storage: String,
    /// PostgreSQL major version.
    #[serde(default = "default_version")]
    pub version: String,
}

fn one() -> i32 {
    1
}

fn default_storage() -> String {
    "1Gi".into()
}

fn default_version() -> String {
    "16".into()
}

/// `Database.status` (the plugin's part).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseStatus {
    /// Ready replicas of the StatefulSet.
    pub ready_replicas: i32,
    /// The Service clients connect to.
    pub endpoint: String,
}

/// The plugin.
pub struct Database;

impl Reconciler for Database {
    fn reconcile(request: Request) -> Result<Response, PluginError> {
        let spec: DatabaseSpec = request.spec()?;
        check(&spec)?;
        let name = request.parent_name()?;
        let observed = request.observed_named::<StatefulSet>(name)?;
        let ready = observed
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        let running = observed
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .map_or(0, |s| s.replicas);

        if request.finalizing {
            // Drain: keep the children but scale to zero; done when nothing runs.
            let response = Response::new()
                .child(&stateful_set(name, &spec, 0))?
                .child(&service(name))?
                .child(&config_map(name, &spec))?;
            return Ok(if running == 0 {
                response
                    .event(EventType::Normal, "Drained", "all replicas stopped")
                    .finalized()
            } else {
                response
                    .condition(
                        "Ready",
                        false,
                        "Draining",
                        format!("{running} replicas still running"),
                    )
                    .requeue_after(std::time::Duration::from_secs(2))
            });
        }

        let namespace = request.parent_namespace().unwrap_or("default");
        let response = Response::new()
            .child(&stateful_set(name, &spec, spec.replicas))?
            .child(&service(name))?
            .child(&config_map(name, &spec))?
            .status(&DatabaseStatus {
                ready_replicas: ready,
                endpoint: format!("{name}.{namespace}.svc:5432"),
            })?;
        Ok(if ready >= spec.replicas {
            response.condition(
                "Ready",
                true,
                "ReplicasReady",
                format!("{ready}/{} replicas ready", spec.replicas),
            )
        } else {
            response.condition(
                "Ready",
                false,
                "ReplicasStarting",
                format!("{ready}/{} replicas ready", spec.replicas),
            )
        })
    }
}

gantry_sdk::export_reconciler!(Database);

fn check(spec: &DatabaseSpec) -> Result<(), PluginError> {
    if !(1..=5).contains(&spec.replicas) {
        return Err(PluginError::permanent(
            "InvalidSpec",
            format!(
                "spec.replicas must be between 1 and 5, got {}",
                spec.replicas
            ),
        ));
    }
    if !VERSIONS.contains(&spec.version.as_str()) {
        return Err(PluginError::permanent(
            "InvalidSpec",
            format!(
                "spec.version {:?} is not one of {}",
                spec.version,
                VERSIONS.join(", ")
            ),
        ));
    }
    Ok(())
}

fn labels(name: &str) -> BTreeMap<String, String> {
    [
        (
            "app.kubernetes.io/name".to_string(),
            "postgresql".to_string(),
        ),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
    ]
    .into()
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(labels(name)),
        ..Default::default()
    }
}

fn stateful_set(name: &str, spec: &DatabaseSpec, replicas: i32) -> StatefulSet {
    StatefulSet {
        metadata: meta(name),
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(name.to_string()),
            selector: LabelSelector {
                match_labels: Some(labels(name)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(name)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "postgres".into(),
                        image: Some(format!("postgres:{}", spec.version)),
                        ports: Some(vec![ContainerPort {
                            container_port: 5432,
                            name: Some("postgres".into()),
                            protocol: Some("TCP".into()),
                            ..Default::default()
                        }]),
                        env: Some(vec![EnvVar {
                            name: "PGDATA".into(),
                            value: Some("/var/lib/postgresql/data/pgdata".into()),
                            ..Default::default()
                        }]),
                        volume_mounts: Some(vec![
                            VolumeMount {
                                name: "data".into(),
                                mount_path: "/var/lib/postgresql/data".into(),
                                ..Default::default()
                            },
                            VolumeMount {
                                name: "config".into(),
                                mount_path: "/etc/postgresql/conf.d".into(),
                                ..Default::default()
                            },
                        ]),
                        ..Default::default()
                    }],
                    volumes: Some(vec![Volume {
                        name: "config".into(),
                        config_map: Some(ConfigMapVolumeSource {
                            name: format!("{name}-config"),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            volume_claim_templates: Some(vec![PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some("data".into()),
                    ..Default::default()
                },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(
                            [("storage".to_string(), Quantity(spec.storage.clone()))].into(),
                        ),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn service(name: &str) -> Service {
    Service {
        metadata: meta(name),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(labels(name)),
            ports: Some(vec![ServicePort {
                name: Some("postgres".into()),
                port: 5432,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn config_map(name: &str, spec: &DatabaseSpec) -> ConfigMap {
    let settings = format!(
        "max_connections = {}\nshared_buffers = 128MB\n",
        100 * spec.replicas
    );
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{name}-config")),
            labels: Some(labels(name)),
            ..Default::default()
        },
        data: Some([("gantry.conf".to_string(), settings)].into()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use gantry_sdk::{ConditionStatus, Value, json};

    use super::*;

    // Takes a `json!` literal by value so each call reads as data.
    #[allow(clippy::needless_pass_by_value)]
    fn parent(spec: Value) -> Value {
        json!({
            "apiVersion": "db.example.com/v1alpha1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": spec
        })
    }

    fn observed_sts(replicas: i32, ready: i32) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": {"selector": {}, "template": {}, "serviceName": "orders"},
            "status": {"replicas": replicas, "readyReplicas": ready}
        })
    }

    #[test]
    fn wants_statefulset_headless_service_and_config() {
        let r = Database::reconcile(Request::for_parent(parent(
            json!({"replicas": 3, "storage": "5Gi", "version": "15"}),
        )))
        .unwrap();
        let kinds: Vec<_> = r
            .children
            .iter()
            .map(|c| c["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["StatefulSet", "Service", "ConfigMap"]);
        assert_eq!(r.children[0]["spec"]["replicas"], 3);
        assert_eq!(
            r.children[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            "postgres:15"
        );
        assert_eq!(
            r.children[0]["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            "5Gi"
        );
        assert_eq!(r.children[1]["spec"]["clusterIP"], "None");
        assert_eq!(r.children[2]["metadata"]["name"], "orders-config");
        assert_eq!(r.status.unwrap()["endpoint"], "orders.shop.svc:5432");
        assert_eq!(r.conditions[0].status, ConditionStatus::False);
    }

    #[test]
    fn ready_when_all_replicas_are() {
        let mut request = Request::for_parent(parent(json!({"replicas": 2})));
        request.observed.push(observed_sts(2, 2));
        let r = Database::reconcile(request).unwrap();
        assert_eq!(r.conditions[0].status, ConditionStatus::True);
        assert_eq!(r.status.unwrap()["readyReplicas"], 2);
    }

    #[test]
    fn rejects_bad_replicas_and_versions() {
        for spec in [
            json!({"replicas": 0}),
            json!({"replicas": 6}),
            json!({"version": "9"}),
        ] {
            let err = Database::reconcile(Request::for_parent(parent(spec))).unwrap_err();
            assert_eq!(err.reason, "InvalidSpec");
        }
    }

    #[test]
    fn finalizing_drains_before_reporting_finalized() {
        let mut request = Request::for_parent(parent(json!({"replicas": 2})));
        request.finalizing = true;
        request.observed.push(observed_sts(2, 2));
        let r = Database::reconcile(request.clone()).unwrap();
        assert!(!r.finalized);
        assert_eq!(r.children[0]["spec"]["replicas"], 0);
        assert!(r.requeue_after.is_some());

        request.observed = vec![observed_sts(0, 0)];
        assert!(Database::reconcile(request).unwrap().finalized);
    }
}
