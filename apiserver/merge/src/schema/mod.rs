//! How values at each path merge.

mod builtin;
mod generated;
mod openapi;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

/// How a list's elements are identified when merging.
#[derive(Clone, Debug, PartialEq)]
pub enum ListKind {
    /// The whole list is one value: replaced as a whole, owned as one leaf.
    Atomic,
    /// Elements are scalars identified by value (`v:` in `FieldsV1`).
    Set,
    /// Elements are objects identified by the named key fields (`k:` in `FieldsV1`).
    Map {
        /// The key field names (`x-kubernetes-list-map-keys`).
        keys: Vec<String>,
        /// Defaults used for a key field an element omits (e.g. container port `protocol: TCP`).
        defaults: BTreeMap<String, Value>,
    },
}

/// How values at a path merge: from a CRD's OpenAPI v3 schema or a built-in kind's known
/// merge metadata.
#[derive(Clone, Debug, PartialEq)]
pub enum Schema {
    /// A leaf value (string, number, bool, int-or-string).
    Scalar,
    /// An object. `fields` are named (struct) fields; other keys use `elements` when set
    /// (a map, `additionalProperties`) and otherwise are treated as named fields of an
    /// open struct whose own children are again open structs (lists atomic).
    Map {
        /// Named fields.
        fields: BTreeMap<String, Schema>,
        /// Schema of keys that are not named fields (`additionalProperties`,
        /// `x-kubernetes-preserve-unknown-fields` gives [`Schema::Untyped`]).
        elements: Option<Box<Schema>>,
        /// `x-kubernetes-map-type: atomic`: replaced and owned as a whole.
        atomic: bool,
    },
    /// A list.
    List {
        /// Schema of each element.
        element: Box<Schema>,
        /// How elements are identified.
        kind: ListKind,
    },
    /// Unknown structure (preserve-unknown-fields, no schema): objects merge key by key,
    /// lists are atomic.
    Untyped,
}

/// Built-in schemas by (apiVersion, kind).
type BuiltinCache = HashMap<(String, String), Arc<Schema>>;

/// An open struct: unknown keys are named fields whose children are open structs.
pub(crate) const OPEN_STRUCT: Schema = Schema::Map {
    fields: BTreeMap::new(),
    elements: None,
    atomic: false,
};

impl Schema {
    /// A granular map (struct) with the given named fields and no other keys.
    pub fn object<I, S>(fields: I) -> Schema
    where
        I: IntoIterator<Item = (S, Schema)>,
        S: Into<String>,
    {
        Schema::Map {
            fields: fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            elements: None,
            atomic: false,
        }
    }

    /// A granular map whose every key has the schema `element` (e.g. labels).
    pub fn map_of(element: Schema) -> Schema {
        Schema::Map {
            fields: BTreeMap::new(),
            elements: Some(Box::new(element)),
            atomic: false,
        }
    }

    /// An atomic map (`x-kubernetes-map-type: atomic`).
    pub fn atomic_map() -> Schema {
        Schema::Map {
            fields: BTreeMap::new(),
            elements: None,
            atomic: true,
        }
    }

    /// An atomic list.
    pub fn atomic_list() -> Schema {
        Schema::List {
            element: Box::new(Schema::Untyped),
            kind: ListKind::Atomic,
        }
    }

    /// A set list of scalars.
    pub fn set() -> Schema {
        Schema::List {
            element: Box::new(Schema::Scalar),
            kind: ListKind::Set,
        }
    }

    /// A list-map of `element` keyed by `keys`.
    pub fn list_map(keys: &[&str], element: Schema) -> Schema {
        Schema::List {
            element: Box::new(element),
            kind: ListKind::Map {
                keys: keys.iter().map(ToString::to_string).collect(),
                defaults: BTreeMap::new(),
            },
        }
    }

    /// Adds (or replaces) a named field of a [`Schema::Map`]; other schemas are returned unchanged.
    #[must_use]
    pub fn with_field(mut self, name: &str, schema: Schema) -> Schema {
        if let Schema::Map { fields, .. } = &mut self {
            fields.insert(name.to_string(), schema);
        }
        self
    }

    /// The schema of the named field `name` of a map, if declared.
    pub fn field(&self, name: &str) -> Option<&Schema> {
        match self {
            Schema::Map { fields, .. } => fields.get(name),
            _ => None,
        }
    }

    /// Schema from an apiextensions v1 `openAPIV3Schema` (honours
    /// `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`,
    /// `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource`,
    /// `x-kubernetes-int-or-string`). The root always gets `apiVersion`, `kind` and the
    /// standard `metadata` (`ObjectMeta`) schema, as kube-apiserver does for CRDs.
    pub fn from_openapi(schema: &Value) -> Schema {
        openapi::from_openapi_root(schema)
    }

    /// Schema for a built-in kind (`apiVersion`, `kind`) with the merge keys and list types
    /// kube-apiserver uses. Unknown kinds get the generic object schema (`ObjectMeta` known,
    /// everything else open structs with atomic lists).
    pub fn builtin(api_version: &str, kind: &str) -> Schema {
        Schema::builtin_shared(api_version, kind).as_ref().clone()
    }

    /// Like [`Schema::builtin`], built once per (apiVersion, kind) and shared.
    pub fn builtin_shared(api_version: &str, kind: &str) -> Arc<Schema> {
        static CACHE: OnceLock<Mutex<BuiltinCache>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (api_version.to_string(), kind.to_string());
        if let Some(s) = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return s.clone();
        }
        let built = Arc::new(builtin::builtin(api_version, kind));
        cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(key)
            .or_insert(built)
            .clone()
    }

    /// The standard `metadata` (`ObjectMeta`) schema.
    pub fn object_meta() -> Schema {
        builtin::object_meta()
    }
}
