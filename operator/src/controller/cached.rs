//! Objects as the operator's caches keep them: the metadata parsed, for
//! keys, owners, labels and triggers, and everything else as JSON text.
//!
//! A `DynamicObject` holds its body as a `serde_json::Value` tree, and a
//! small map in that tree costs a whole B-tree node (about 600 bytes). A
//! cached ConfigMap took 2.9 KB that way and a parent with two conditions
//! 4.9 KB; their bodies as text take a tenth of that. The body is parsed
//! again when a reconcile needs the object whole, which it needed to copy
//! anyway (docs/benchmarks.md, "Memory").
//!
//! Its kind is shared, not copied: every store key (`ObjectRef`) carries
//! its object's dynamic type, and `ApiResource`'s five strings per key were
//! a fifth of a store's memory.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::core::{DynamicResourceScope, Resource};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// A cached object: its metadata without `managedFields`, and its other
/// fields (but `apiVersion` and `kind`, which its cache knows) as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedObject {
    /// The object's metadata, `managedFields` dropped.
    pub metadata: ObjectMeta,
    /// Every other field but `apiVersion` and `kind`: a JSON object.
    body: Box<str>,
}

impl CachedObject {
    /// `obj` as a cache keeps it.
    pub fn new(obj: DynamicObject) -> Self {
        let DynamicObject {
            mut metadata, data, ..
        } = obj;
        metadata.managed_fields = None;
        let body = match data {
            Value::Object(fields) if !fields.is_empty() => Value::Object(fields).to_string(),
            _ => "{}".to_string(),
        };
        Self {
            metadata,
            body: body.into(),
        }
    }

    /// The fields beside `metadata`, parsed.
    pub fn body(&self) -> Map<String, Value> {
        serde_json::from_str(&self.body).expect("a cache's own JSON text")
    }

    /// The object whole, of the kind `resource`.
    pub fn to_object(&self, resource: &ApiResource) -> DynamicObject {
        let mut obj = DynamicObject::new("", resource);
        obj.metadata = self.metadata.clone();
        obj.data = Value::Object(self.body());
        obj
    }

    /// The object as JSON, with `apiVersion` and `kind` of `resource`.
    pub fn to_json(&self, resource: &ApiResource) -> Value {
        let mut fields = self.body();
        fields.insert("apiVersion".into(), resource.api_version.clone().into());
        fields.insert("kind".into(), resource.kind.clone().into());
        fields.insert(
            "metadata".into(),
            serde_json::to_value(&self.metadata).unwrap_or(Value::Null),
        );
        Value::Object(fields)
    }
}

/// Read as a `DynamicObject` is, then compacted: the tree lives only while
/// one object is read.
impl<'de> Deserialize<'de> for CachedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DynamicObject::deserialize(deserializer).map(Self::new)
    }
}

impl Resource for CachedObject {
    type DynamicType = Arc<ApiResource>;
    type Scope = DynamicResourceScope;

    fn group(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &Arc<ApiResource>) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource() -> ApiResource {
        ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&())
    }

    fn config_map() -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "labels": {"l": "v"},
                "managedFields": [{"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {}}}]},
            "data": {"k": "v", "n": "1"}})
    }

    #[test]
    fn keeps_all_but_managed_fields_and_gives_it_back_whole() {
        let cached: CachedObject = serde_json::from_value(config_map()).unwrap();
        assert!(cached.metadata.managed_fields.is_none());
        assert_eq!(cached.metadata.labels.as_ref().unwrap()["l"], "v");
        let mut expected = config_map();
        expected["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert_eq!(cached.to_json(&resource()), expected);
        let obj = cached.to_object(&resource());
        assert_eq!(serde_json::to_value(&obj).unwrap(), expected);
        assert_eq!(CachedObject::new(obj), cached);
    }

    #[test]
    fn a_list_item_without_kind_gets_its_caches_kind() {
        let mut item = config_map();
        let map = item.as_object_mut().unwrap();
        map.remove("apiVersion");
        map.remove("kind");
        let cached: CachedObject = serde_json::from_value(item).unwrap();
        let json = cached.to_json(&resource());
        assert_eq!(
            (json["apiVersion"].as_str(), json["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
    }

    #[test]
    fn an_object_with_only_metadata_has_an_empty_body() {
        let cached: CachedObject =
            serde_json::from_value(json!({"metadata": {"name": "a"}})).unwrap();
        assert_eq!(cached.body(), Map::new());
        assert_eq!(
            cached.to_json(&resource()),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
        );
    }
}
