//! Built-in kinds, derived from k8s-openapi's `Resource` metadata.

use std::any::TypeId;

use k8s_openapi::{NamespaceResourceScope, Resource};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use super::{ResourceInfo, ScalePaths};

/// Decodes JSON into the typed `T` and encodes it back (drops unknown fields, checks types).
fn roundtrip<T: DeserializeOwned + Serialize>(v: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    let mut out = serde_json::to_value(typed).map_err(|e| e.to_string())?;
    integral_floats_as_integers(&mut out);
    Ok(out)
}

/// Go writes a float64 without a fraction as an integer (`10`, not `10.0`,
/// e.g. a CRD schema's `maximum`); serde writes `10.0`. Clients comparing
/// what they sent with what they got back see the difference.
fn integral_floats_as_integers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64()
                && f.fract() == 0.0
                && f.abs() < 9_007_199_254_740_992.0
            {
                // Exact: |f| < 2^53 and integral.
                #[allow(clippy::cast_possible_truncation)]
                let i = f as i64;
                *v = Value::from(i);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

/// Whether `T` has a `status` field: kube serves a status subresource exactly for those.
fn has_status_field<T: DeserializeOwned + Serialize + Default>() -> bool {
    let Ok(mut v) = serde_json::to_value(T::default()) else {
        return false;
    };
    v["status"] = serde_json::json!({});
    serde_json::from_value::<T>(v)
        .ok()
        .and_then(|t| serde_json::to_value(t).ok())
        .is_some_and(|v| v.get("status").is_some())
}

/// Per-kind discovery extras kube has and k8s-openapi does not carry.
struct Extras {
    short_names: &'static [&'static str],
    all: bool,
    scale: bool,
}

// One row per resource, as in kube's tables; rows that happen to agree stay apart.
#[allow(clippy::match_same_arms)]
fn extras(group: &str, plural: &str) -> Extras {
    let (short_names, all, scale): (&[&str], bool, bool) = match (group, plural) {
        ("", "namespaces") => (&["ns"], false, false),
        ("", "configmaps") => (&["cm"], false, false),
        ("", "services") => (&["svc"], true, false),
        ("", "serviceaccounts") => (&["sa"], false, false),
        ("", "pods") => (&["po"], true, false),
        ("", "events") => (&["ev"], false, false),
        ("", "replicationcontrollers") => (&["rc"], true, true),
        ("", "persistentvolumeclaims") => (&["pvc"], false, false),
        ("", "persistentvolumes") => (&["pv"], false, false),
        ("", "nodes") => (&["no"], false, false),
        ("", "endpoints") => (&["ep"], false, false),
        ("events.k8s.io", "events") => (&["ev"], false, false),
        ("apps", "deployments") => (&["deploy"], true, true),
        ("apps", "statefulsets") => (&["sts"], true, true),
        ("apps", "replicasets") => (&["rs"], true, true),
        ("apps", "daemonsets") => (&["ds"], true, false),
        ("batch", "jobs") => (&[], true, false),
        ("batch", "cronjobs") => (&["cj"], true, false),
        ("apiextensions.k8s.io", "customresourcedefinitions") => (&["crd", "crds"], false, false),
        ("", "resourcequotas") => (&["quota"], false, false),
        ("", "limitranges") => (&["limits"], false, false),
        ("scheduling.k8s.io", "priorityclasses") => (&["pc"], false, false),
        ("policy", "poddisruptionbudgets") => (&["pdb"], false, false),
        ("networking.k8s.io", "ingresses") => (&["ing"], false, false),
        ("networking.k8s.io", "networkpolicies") => (&["netpol"], false, false),
        ("autoscaling", "horizontalpodautoscalers") => (&["hpa"], true, false),
        ("certificates.k8s.io", "certificatesigningrequests") => (&["csr"], false, false),
        _ => (&[], false, false),
    };
    Extras {
        short_names,
        all,
        scale,
    }
}

/// The version a kind served at several versions is stored at (and preferred):
/// `HorizontalPodAutoscalers` at autoscaling/v2, as kube.
fn storage_version(group: &str, plural: &str, version: &str) -> String {
    match (group, plural) {
        ("autoscaling", "horizontalpodautoscalers") => "v2".into(),
        _ => version.into(),
    }
}

fn info<T>() -> ResourceInfo
where
    T: Resource + DeserializeOwned + Serialize + Default + 'static,
{
    let group = T::GROUP.to_string();
    let plural = T::URL_PATH_SEGMENT.to_string();
    let ex = extras(&group, &plural);
    ResourceInfo {
        version: T::VERSION.to_string(),
        kind: T::KIND.to_string(),
        singular: T::KIND.to_ascii_lowercase(),
        namespaced: TypeId::of::<T::Scope>() == TypeId::of::<NamespaceResourceScope>(),
        short_names: ex.short_names.iter().map(ToString::to_string).collect(),
        categories: if ex.all {
            vec!["all".to_string()]
        } else {
            vec![]
        },
        has_status: has_status_field::<T>(),
        scale: ex.scale.then(|| ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        }),
        roundtrip: Some(roundtrip::<T>),
        crd: None,
        storage_version: storage_version(&group, &plural, T::VERSION),
        storage_group: if group == "events.k8s.io" {
            String::new()
        } else {
            group.clone()
        },
        preferred: storage_version(&group, &plural, T::VERSION) == T::VERSION,
        group,
        plural,
    }
}

macro_rules! builtins {
    ($($ty:ty),* $(,)?) => {
        /// Every built-in resource served.
        pub fn all() -> Vec<ResourceInfo> {
            vec![$(info::<$ty>()),*]
        }
    };
}

use k8s_openapi::api::{
    admissionregistration::v1 as admreg, apps::v1 as apps, autoscaling::v1 as autoscaling,
    autoscaling::v2 as autoscaling_v2, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;

builtins!(
    core::Namespace,
    core::ConfigMap,
    core::Secret,
    core::Service,
    core::ServiceAccount,
    core::Pod,
    core::Event,
    core::Endpoints,
    core::Node,
    core::PersistentVolume,
    core::PersistentVolumeClaim,
    core::ReplicationController,
    core::ResourceQuota,
    core::LimitRange,
    core::PodTemplate,
    events::Event,
    apps::Deployment,
    apps::StatefulSet,
    apps::ReplicaSet,
    apps::DaemonSet,
    apps::ControllerRevision,
    batch::Job,
    batch::CronJob,
    coordination::Lease,
    apiext::CustomResourceDefinition,
    admreg::ValidatingWebhookConfiguration,
    admreg::MutatingWebhookConfiguration,
    admreg::ValidatingAdmissionPolicy,
    admreg::ValidatingAdmissionPolicyBinding,
    rbac::Role,
    rbac::RoleBinding,
    rbac::ClusterRole,
    rbac::ClusterRoleBinding,
    policy::PodDisruptionBudget,
    networking::Ingress,
    networking::NetworkPolicy,
    networking::IngressClass,
    autoscaling::HorizontalPodAutoscaler,
    autoscaling_v2::HorizontalPodAutoscaler,
    discovery::EndpointSlice,
    certificates::CertificateSigningRequest,
    scheduling::PriorityClass,
    storage::StorageClass,
    apireg::APIService,
);
