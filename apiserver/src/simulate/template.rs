//! Pods from pod templates, and the template hashes kube's controllers name
//! ReplicaSets and revisions with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The label a Deployment's ReplicaSets and their Pods carry.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The label of StatefulSet and DaemonSet Pods naming their revision.
pub const REVISION_HASH: &str = "controller-revision-hash";

/// The revision a StatefulSet's or DaemonSet's Pod was made from.
pub fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(REVISION_HASH)
        .map(String::as_str)
}

/// The characters of kube's `rand.SafeEncodeString` (no vowels, no look-alikes).
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The hash of `template` (without the `pod-template-hash` label) as kube writes it:
/// FNV-1a (32 bits) encoded with safe characters. kube hashes its Go structure, this
/// hashes the JSON, so the values differ from kube's; the form is the same.
pub fn hash(template: &PodTemplateSpec) -> String {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    let bytes = serde_json::to_vec(&template).unwrap_or_default();
    let hash = bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    hash.to_string()
        .bytes()
        .map(|b| char::from(SAFE[usize::from(b) % SAFE.len()]))
        .collect()
}

/// Whether two templates are the same but for the `pod-template-hash` label (kube's
/// `EqualIgnoreHash`).
pub fn same_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        let meta = t.metadata.get_or_insert_with(ObjectMeta::default);
        if let Some(labels) = meta.labels.as_mut() {
            labels.remove(POD_TEMPLATE_HASH);
            if labels.is_empty() {
                meta.labels = None;
            }
        }
        serde_json::to_value(t).unwrap_or_default()
    };
    strip(a) == strip(b)
}

/// `template` with `labels` added to its own.
pub fn with_labels(
    template: &PodTemplateSpec,
    labels: &BTreeMap<String, String>,
) -> PodTemplateSpec {
    let mut template = template.clone();
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new)
        .extend(labels.clone());
    template
}

/// How a new Pod is named.
pub enum Name {
    /// Exactly this (StatefulSet Pods).
    Fixed(String),
    /// This prefix and a random suffix from the server.
    Generated(String),
}

/// A Pod of `template` controlled by `owner`.
pub fn pod(template: &PodTemplateSpec, name: Name, owner: OwnerReference) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let (name, generate_name) = match name {
        Name::Fixed(name) => (Some(name), None),
        Name::Generated(prefix) => (None, Some(prefix)),
    };
    Pod {
        metadata: ObjectMeta {
            name,
            generate_name,
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(image: &str, hash: Option<&str>) -> PodTemplateSpec {
        let mut labels = serde_json::json!({"app": "web"});
        if let Some(hash) = hash {
            labels[POD_TEMPLATE_HASH] = hash.into();
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "web", "image": image}]}
        }))
        .unwrap()
    }

    #[test]
    fn hashes_are_safe_encoded_and_follow_the_template() {
        let h = hash(&template("nginx:1", None));
        assert!(!h.is_empty() && h.bytes().all(|b| SAFE.contains(&b)), "{h}");
        assert_eq!(h, hash(&template("nginx:1", Some("xyz"))));
        assert_ne!(h, hash(&template("nginx:2", None)));
    }

    #[test]
    fn templates_compare_without_their_hash_label() {
        assert!(same_ignoring_hash(
            &template("nginx:1", Some("abc")),
            &template("nginx:1", None)
        ));
        assert!(!same_ignoring_hash(
            &template("nginx:1", Some("abc")),
            &template("nginx:2", Some("abc"))
        ));
    }
}
