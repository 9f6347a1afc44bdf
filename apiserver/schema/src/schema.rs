//! The parsed schema tree and its public entry points.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::FieldError;

/// `additionalProperties` of a schema node: a boolean or a schema.
#[derive(Debug, Clone, PartialEq)]
pub enum AdditionalProperties {
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {...}`.
    Schema(Box<StructuralSchema>),
}

/// A CRD schema (`apiextensions.k8s.io/v1` `openAPIV3Schema`) that passed kube's
/// structural checks. One node of the tree; children are nodes too.
#[derive(Debug, Clone, PartialEq)]
// One field per OpenAPI keyword, and several of those are flags.
#[allow(clippy::struct_excessive_bools)]
pub struct StructuralSchema {
    pub(crate) type_: String,
    pub(crate) format: String,
    pub(crate) description: String,
    pub(crate) title: String,
    pub(crate) nullable: bool,
    pub(crate) default: Option<Value>,
    pub(crate) properties: BTreeMap<String, StructuralSchema>,
    pub(crate) items: Option<Box<StructuralSchema>>,
    pub(crate) additional_properties: Option<AdditionalProperties>,
    pub(crate) preserve_unknown_fields: bool,
    pub(crate) preserve_unknown_fields_explicit_false: bool,
    pub(crate) has_validations: bool,
    pub(crate) rules: Vec<crate::cel::Rule>,
    pub(crate) has_external_docs: bool,
    pub(crate) embedded_resource: bool,
    pub(crate) int_or_string: bool,
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
    pub(crate) map_type: Option<String>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_maximum: bool,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) enum_: Option<Vec<Value>>,
    pub(crate) max_properties: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) required: Vec<String>,
    pub(crate) all_of: Vec<StructuralSchema>,
    pub(crate) one_of: Vec<StructuralSchema>,
    pub(crate) any_of: Vec<StructuralSchema>,
    pub(crate) not: Option<Box<StructuralSchema>>,
    /// The original JSON of this node.
    pub(crate) raw: Value,
}

/// A compiled `pattern`; equality compares the source text.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub(crate) source: String,
    pub(crate) regex: regex::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl StructuralSchema {
    /// A node with nothing set but its original JSON (filled in by the parser).
    pub(crate) fn blank(raw: Value) -> Self {
        StructuralSchema {
            type_: String::new(),
            format: String::new(),
            description: String::new(),
            title: String::new(),
            nullable: false,
            default: None,
            properties: BTreeMap::new(),
            items: None,
            additional_properties: None,
            preserve_unknown_fields: false,
            preserve_unknown_fields_explicit_false: false,
            has_validations: false,
            rules: Vec::new(),
            has_external_docs: false,
            embedded_resource: false,
            int_or_string: false,
            list_type: None,
            list_map_keys: Vec::new(),
            map_type: None,
            maximum: None,
            exclusive_maximum: false,
            minimum: None,
            exclusive_minimum: false,
            max_length: None,
            min_length: None,
            pattern: None,
            max_items: None,
            min_items: None,
            unique_items: false,
            multiple_of: None,
            enum_: None,
            max_properties: None,
            min_properties: None,
            required: Vec::new(),
            all_of: Vec::new(),
            one_of: Vec::new(),
            any_of: Vec::new(),
            not: None,
            raw,
        }
    }

    /// Parses `openapi_v3` (the value of `openAPIV3Schema`) and checks it as kube-apiserver
    /// does on CRD create/update: every node has a type (except under
    /// `x-kubernetes-int-or-string` / `x-kubernetes-preserve-unknown-fields`), no
    /// `additionalProperties` together with `properties`, valid regexes, defaults that
    /// validate and are pruned-clean, `metadata` at the root restricting only
    /// `name`/`generateName`, list-map keys that are required or defaulted scalars, etc.
    ///
    /// Error paths start with `openAPIV3Schema`; use [`StructuralSchema::new_at`] to root
    /// them elsewhere (e.g. `spec.versions[0].schema.openAPIV3Schema`).
    ///
    /// # Errors
    ///
    /// Every check that failed, as kube words it.
    pub fn new(openapi_v3: &Value) -> Result<Self, Vec<FieldError>> {
        Self::new_at(openapi_v3, "openAPIV3Schema")
    }

    /// Like [`StructuralSchema::new`], with error paths rooted at `base_path`.
    ///
    /// # Errors
    ///
    /// As [`StructuralSchema::new`].
    pub fn new_at(openapi_v3: &Value, base_path: &str) -> Result<Self, Vec<FieldError>> {
        crate::check::build(openapi_v3, base_path)
    }

    /// Applies defaults in place, as kube does on create, update and read of stored
    /// objects: defaults for absent fields, recursing into defaulted objects, and
    /// `null` handling (null + default + not nullable → defaulted).
    pub fn default(&self, obj: &mut Value) {
        crate::defaulting::prune_nulls(obj, self);
        crate::defaulting::apply(obj, self);
    }

    /// Drops `null` values of non-nullable fields without a default, as kube does
    /// right after defaulting. [`StructuralSchema::default`] calls this already.
    pub fn prune_nulls(&self, obj: &mut Value) {
        crate::defaulting::prune_nulls(obj, self);
    }

    /// Drops unknown fields (unless `x-kubernetes-preserve-unknown-fields`) and returns
    /// the dropped paths (e.g. `spec.foo`, `spec.items[0].bar`). Keeps
    /// `apiVersion`/`kind`/`metadata` at the root and in
    /// `x-kubernetes-embedded-resource` objects; root `metadata` is pruned to
    /// `ObjectMeta` fields.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        crate::pruning::prune_object(obj, self)
    }

    /// Validates `obj` against the schema, returning kube's errors (empty when valid).
    /// Paths are rooted at the object (`spec.replicas`).
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        crate::validation::validate_object(self, obj, None)
    }

    /// Validates an update of `old` to `new` with kube's validation ratcheting
    /// (`CRDValidationRatcheting`, default on since 1.30): errors in values that did not
    /// change are dropped, so objects stored before a schema was tightened stay
    /// updatable. Values correlate through object properties and map keys, and through
    /// `x-kubernetes-list-type: map` items by key; other list items do not correlate.
    /// List-type uniqueness and embedded-resource checks are not ratcheted (as in kube).
    pub fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        crate::validation::validate_object(self, new, Some(old))
    }

    /// Validates a value against this node only (no list-type or embedded-resource
    /// checks), with error paths under `field_prefix` (e.g. `spec`). Useful for
    /// validating a sub-tree with a schema obtained from [`StructuralSchema::at`].
    pub fn validate_value(&self, value: &Value, field_prefix: &str) -> Vec<FieldError> {
        crate::validation::validate_at(self, value, field_prefix)
    }

    /// The sub-schema at a property path, e.g. `["status"]` or `["spec", "replicas"]`.
    /// Falls back to a schema-valued `additionalProperties` for unknown names.
    pub fn at(&self, path: &[&str]) -> Option<&StructuralSchema> {
        let mut cur = self;
        for name in path {
            cur = match cur.properties.get(*name) {
                Some(s) => s,
                None => match &cur.additional_properties {
                    Some(AdditionalProperties::Schema(s)) => s,
                    _ => return None,
                },
            };
        }
        Some(cur)
    }

    /// The `type` (`object`, `array`, `string`, `integer`, `number`, `boolean`), or `""`.
    pub fn type_name(&self) -> &str {
        &self.type_
    }

    /// The `format`, or `""`.
    pub fn format(&self) -> &str {
        &self.format
    }

    /// The `description`, or `""`.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Whether `nullable: true`.
    pub fn nullable(&self) -> bool {
        self.nullable
    }

    /// The `default` value, if any.
    pub fn default_value(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    /// The `properties`.
    pub fn properties(&self) -> &BTreeMap<String, StructuralSchema> {
        &self.properties
    }

    /// The `items` schema.
    pub fn items(&self) -> Option<&StructuralSchema> {
        self.items.as_deref()
    }

    /// The `additionalProperties`.
    pub fn additional_properties(&self) -> Option<&AdditionalProperties> {
        self.additional_properties.as_ref()
    }

    /// Whether `x-kubernetes-preserve-unknown-fields: true`.
    pub fn preserve_unknown_fields(&self) -> bool {
        self.preserve_unknown_fields
    }

    /// Whether `x-kubernetes-embedded-resource: true`.
    pub fn embedded_resource(&self) -> bool {
        self.embedded_resource
    }

    /// Whether `x-kubernetes-int-or-string: true`.
    pub fn int_or_string(&self) -> bool {
        self.int_or_string
    }

    /// `x-kubernetes-list-type` (`atomic`, `set`, `map`).
    pub fn list_type(&self) -> Option<&str> {
        self.list_type.as_deref()
    }

    /// `x-kubernetes-list-map-keys`.
    pub fn list_map_keys(&self) -> &[String] {
        &self.list_map_keys
    }

    /// `x-kubernetes-map-type` (`granular`, `atomic`).
    pub fn map_type(&self) -> Option<&str> {
        self.map_type.as_deref()
    }

    /// The original JSON of this node.
    pub fn raw(&self) -> &Value {
        &self.raw
    }
}
