//! Pruning of unknown fields (`structuralpruning.Prune`) and `ObjectMeta` coercion of
//! `metadata` (root and embedded resources).

use serde_json::Value;

use crate::path::{child, index};
use crate::schema::{AdditionalProperties, StructuralSchema};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Top-level fields of `metav1.ObjectMeta`; others are dropped from `metadata`.
pub(crate) const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Collects dropped paths (or nothing).
struct Pruner {
    dropped: Option<Vec<String>>,
    coerce_meta: bool,
}

impl Pruner {
    fn record(&mut self, path: String) {
        if let Some(d) = &mut self.dropped {
            d.push(path);
        }
    }

    /// `prune(x, s)`; `s == None` means "no schema": objects lose every field.
    // `x` and `s` as in kube's `prune(x, s)`.
    #[allow(clippy::many_single_char_names)]
    fn prune(&mut self, x: &mut Value, s: Option<&StructuralSchema>, embedded: bool, path: &str) {
        let Some(s) = s else {
            self.prune_without_schema(x, path);
            return;
        };
        if s.preserve_unknown_fields {
            self.skip_prune(x, s, embedded, path);
            return;
        }
        match x {
            Value::Object(m) => {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    let p = child(path, &k);
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        if k == "metadata"
                            && self.coerce_meta
                            && let Some(md) = m.get_mut(&k)
                        {
                            self.coerce_metadata(md, &p);
                        }
                        continue;
                    }
                    if let Some(prop) = s.properties.get(&k) {
                        let v = m.get_mut(&k).expect("key present");
                        self.prune(v, Some(prop), prop.embedded_resource, &p);
                    } else if let Some(ap) = &s.additional_properties {
                        let v = m.get_mut(&k).expect("key present");
                        match ap {
                            AdditionalProperties::Schema(aps) => {
                                self.prune(v, Some(aps), aps.embedded_resource, &p);
                            }
                            AdditionalProperties::Bool(_) => self.prune(v, None, false, &p),
                        }
                    } else {
                        m.remove(&k);
                        self.record(p);
                    }
                }
            }
            Value::Array(a) => {
                let items = s.items.as_deref();
                for (i, v) in a.iter_mut().enumerate() {
                    self.prune(
                        v,
                        items,
                        items.is_some_and(|it| it.embedded_resource),
                        &index(path, i),
                    );
                }
            }
            _ => {}
        }
    }

    /// `skipPrune`: keep unknown fields but prune inside known ones.
    fn skip_prune(&mut self, x: &mut Value, s: &StructuralSchema, embedded: bool, path: &str) {
        match x {
            Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    let p = child(path, k);
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        if k == "metadata" && self.coerce_meta {
                            self.coerce_metadata(v, &p);
                        }
                        continue;
                    }
                    if let Some(prop) = s.properties.get(k) {
                        self.prune(v, Some(prop), prop.embedded_resource, &p);
                    } else if let Some(ap) = &s.additional_properties {
                        match ap {
                            AdditionalProperties::Schema(aps) => {
                                self.prune(v, Some(aps), aps.embedded_resource, &p);
                            }
                            AdditionalProperties::Bool(_) => self.prune(v, None, false, &p),
                        }
                    }
                }
            }
            Value::Array(a) => {
                if let Some(items) = &s.items {
                    for (i, v) in a.iter_mut().enumerate() {
                        self.skip_prune(v, items, items.embedded_resource, &index(path, i));
                    }
                }
            }
            _ => {}
        }
    }

    /// Iterative: objects without a schema lose all their fields.
    fn prune_without_schema(&mut self, x: &mut Value, path: &str) {
        let mut stack: Vec<(&mut Value, String)> = vec![(x, path.to_string())];
        while let Some((v, p)) = stack.pop() {
            match v {
                Value::Object(m) => {
                    let mut keys: Vec<String> = m.keys().cloned().collect();
                    keys.sort();
                    for k in keys {
                        self.record(child(&p, &k));
                    }
                    m.clear();
                }
                Value::Array(a) => {
                    for (i, item) in a.iter_mut().enumerate() {
                        stack.push((item, index(&p, i)));
                    }
                }
                _ => {}
            }
        }
    }

    /// Drops fields of `metadata` that `ObjectMeta` does not have.
    fn coerce_metadata(&mut self, md: &mut Value, path: &str) {
        let Value::Object(m) = md else { return };
        let unknown: Vec<String> = m
            .keys()
            .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
            .cloned()
            .collect();
        for k in unknown {
            m.remove(&k);
            self.record(child(path, &k));
        }
    }
}

/// Prunes a custom resource (root treated as an embedded resource) and coerces metadata.
pub(crate) fn prune_object(obj: &mut Value, s: &StructuralSchema) -> Vec<String> {
    let mut p = Pruner {
        dropped: Some(Vec::new()),
        coerce_meta: true,
    };
    p.prune(obj, Some(s), true, "");
    let mut out = p.dropped.unwrap_or_default();
    out.sort();
    out
}

/// `pruning.Prune(default, s, isEmbedded)` as used to check that defaults are pruned.
pub(crate) fn prune_for_defaults(v: &mut Value, s: &StructuralSchema, embedded: bool) {
    let mut p = Pruner {
        dropped: None,
        coerce_meta: false,
    };
    p.prune(v, Some(s), embedded, "");
}
