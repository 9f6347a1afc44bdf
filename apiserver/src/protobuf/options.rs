//! Protobuf `DeleteOptions` (the body of a DELETE from client-go's protobuf
//! clients) and `Eviction` (`kubectl drain`), which carries one.

use k8s_pb::api::policy::v1 as policy;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use prost::Message;
use serde_json::{Map, Value, json};

use super::{bad, meta, opt, put_str, vec_str};
use crate::error::ApiResult;

/// The JSON of `DeleteOptions` (any group's) or an `Eviction`, or None for other kinds.
pub(super) fn decode(api_version: &str, kind: &str, raw: &[u8]) -> Option<ApiResult<Value>> {
    let decoded = match (api_version, kind) {
        (_, "DeleteOptions") => metav1::DeleteOptions::decode(raw).map(delete_options),
        // kubectl before 1.22 sends policy/v1beta1 Evictions: the same message.
        ("policy/v1" | "policy/v1beta1", "Eviction") => policy::Eviction::decode(raw).map(|e| {
            let mut o = json!({ "metadata": meta(e.metadata) });
            if let Some(d) = e.delete_options {
                o["deleteOptions"] = delete_options(d);
            }
            o
        }),
        _ => return None,
    };
    Some(decoded.map_err(bad))
}

fn delete_options(d: metav1::DeleteOptions) -> Value {
    let mut o = Map::new();
    opt(&mut o, "gracePeriodSeconds", d.grace_period_seconds);
    if let Some(p) = d.preconditions {
        let mut x = Map::new();
        put_str(&mut x, "uid", p.uid.as_deref());
        put_str(&mut x, "resourceVersion", p.resource_version.as_deref());
        o.insert("preconditions".into(), Value::Object(x));
    }
    opt(&mut o, "orphanDependents", d.orphan_dependents);
    put_str(&mut o, "propagationPolicy", d.propagation_policy.as_deref());
    vec_str(&mut o, "dryRun", &d.dry_run);
    opt(
        &mut o,
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        d.ignore_store_read_error_with_cluster_breaking_potential,
    );
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eviction_carries_its_delete_options() {
        let e = policy::Eviction {
            metadata: Some(metav1::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            }),
            delete_options: Some(metav1::DeleteOptions {
                dry_run: vec!["All".into()],
                grace_period_seconds: Some(0),
                preconditions: Some(metav1::Preconditions {
                    uid: Some("u".into()),
                    resource_version: None,
                }),
                ..Default::default()
            }),
        };
        let v = decode("policy/v1", "Eviction", &e.encode_to_vec())
            .unwrap()
            .unwrap();
        assert_eq!(v["metadata"], json!({"name": "p", "namespace": "ns"}));
        assert_eq!(
            v["deleteOptions"],
            json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "u"}, "dryRun": ["All"]})
        );
    }
}
