//! [`FieldSet`]: a set of paths, stored as a trie, with kube's `FieldsV1` encoding.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::error::FieldsError;
use crate::path::{Path, PathElement};

/// A set of field paths (structured-merge-diff's `fieldpath.Set`).
///
/// A path is a *member* when it is itself in the set; `children` holds the sets below
/// each element (never empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// A set holding each of `paths`.
    pub fn from_paths<I: IntoIterator<Item = Path>>(paths: I) -> FieldSet {
        let mut s = FieldSet::new();
        for p in paths {
            s.insert(&p);
        }
        s
    }

    /// True when no path is in the set.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds `path` as a member. The empty path is ignored.
    pub fn insert(&mut self, path: &Path) {
        self.insert_elements(&path.0);
    }

    pub(crate) fn insert_elements(&mut self, elems: &[PathElement]) {
        match elems {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self
                .children
                .entry(first.clone())
                .or_default()
                .insert_elements(rest),
        }
    }

    /// True when `path` is a member.
    pub fn has(&self, path: &Path) -> bool {
        let mut set = self;
        let Some((last, init)) = path.0.split_last() else {
            return false;
        };
        for pe in init {
            match set.children.get(pe) {
                Some(c) => set = c,
                None => return false,
            }
        }
        set.members.contains(last)
    }

    /// True when `pe` (one step below this set's root) is a member.
    pub(crate) fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// The subset below `pe`, if any.
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Paths in either set.
    #[must_use]
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Paths in `self` that are not in `other` (exact paths: a member of `other` does not
    /// remove `self`'s paths below it).
    #[must_use]
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                children.insert(pe.clone(), d);
            }
        }
        FieldSet { members, children }
    }

    /// Paths in both sets.
    #[must_use]
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    children.insert(pe.clone(), i);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Paths in `self` that are neither in `other` nor below a member of `other`
    /// (structured-merge-diff's `RecursiveDifference`, used for ignored/reset fields).
    #[must_use]
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            if other.members.contains(pe) {
                continue;
            }
            let d = match other.children.get(pe) {
                Some(o) => c.recursive_difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                children.insert(pe.clone(), d);
            }
        }
        FieldSet { members, children }
    }

    /// Every member path, in structured-merge-diff's iteration order (at each level the
    /// members first, then the children, each sorted).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(Path(p));
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Member paths that have no member below them (the leaves).
    pub fn leaves(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_leaves(&mut Vec::new(), &mut out);
        out
    }

    fn collect_leaves(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            if !self.children.contains_key(m) {
                let mut p = prefix.clone();
                p.push(m.clone());
                out.push(Path(p));
            }
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect_leaves(prefix, out);
            prefix.pop();
        }
    }

    /// Number of member paths.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(FieldSet::len).sum::<usize>()
    }

    /// The `FieldsV1` JSON document for this set, exactly as kube-apiserver writes it
    /// (`.` for a member that also has children, `{}` for a member leaf).
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.fields_v1_contents(false))
    }

    fn fields_v1_contents(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !self.is_empty() {
            out.insert(".".to_string(), Value::Object(Map::new()));
        }
        let mut keys: BTreeSet<&PathElement> = self.members.iter().collect();
        keys.extend(self.children.keys());
        for pe in keys {
            let v = match self.children.get(pe) {
                Some(c) => Value::Object(c.fields_v1_contents(self.members.contains(pe))),
                None => Value::Object(Map::new()),
            };
            out.insert(encode_path_element(pe), v);
        }
        out
    }

    /// Decodes a `FieldsV1` JSON document.
    ///
    /// # Errors
    ///
    /// [`FieldsError::NotAnObject`] or [`FieldsError::BadKey`] when `v` is not a valid
    /// `FieldsV1` document.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsError> {
        let Value::Object(map) = v else {
            return Err(FieldsError::NotAnObject(v.to_string()));
        };
        let mut set = FieldSet::new();
        for (k, child) in map {
            if k == "." {
                continue;
            }
            let pe = decode_path_element(k)?;
            let Value::Object(cm) = child else {
                return Err(FieldsError::NotAnObject(child.to_string()));
            };
            if cm.is_empty() || cm.contains_key(".") {
                set.members.insert(pe.clone());
            }
            let c = FieldSet::from_fields_v1(child)?;
            if !c.is_empty() {
                set.children.insert(pe, c);
            }
        }
        Ok(set)
    }
}

/// The `FieldsV1` key for one path element (`f:`, `k:`, `v:`, `i:`).
pub(crate) fn encode_path_element(pe: &PathElement) -> String {
    match pe {
        PathElement::Field(name) => format!("f:{name}"),
        PathElement::Key(fields) => {
            let parts: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), v))
                .collect();
            format!("k:{{{}}}", parts.join(","))
        }
        PathElement::Value(v) => format!("v:{v}"),
        PathElement::Index(i) => format!("i:{i}"),
    }
}

fn bad_key(key: &str, reason: impl Into<String>) -> FieldsError {
    FieldsError::BadKey {
        key: key.to_string(),
        reason: reason.into(),
    }
}

/// Parses one `FieldsV1` key.
pub(crate) fn decode_path_element(key: &str) -> Result<PathElement, FieldsError> {
    let Some((prefix, rest)) = key.split_once(':') else {
        return Err(bad_key(key, "missing type prefix (f:, k:, v:, i:)"));
    };
    match prefix {
        "f" => Ok(PathElement::Field(rest.to_string())),
        "v" => serde_json::from_str(rest)
            .map(PathElement::Value)
            .map_err(|e| bad_key(key, e.to_string())),
        "k" => {
            let v: Value = serde_json::from_str(rest).map_err(|e| bad_key(key, e.to_string()))?;
            let Value::Object(m) = v else {
                return Err(bad_key(key, "key must be a JSON object"));
            };
            if m.is_empty() {
                return Err(bad_key(key, "key must not be empty"));
            }
            Ok(PathElement::key(m))
        }
        "i" => rest
            .parse::<usize>()
            .map(PathElement::Index)
            .map_err(|e| bad_key(key, e.to_string())),
        other => Err(bad_key(key, format!("unknown type prefix {other:?}"))),
    }
}

impl FieldSet {
    /// The members directly at this level.
    pub(crate) fn paths_one_level_members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// The child sets directly below this level.
    pub(crate) fn children_iter(&self) -> impl Iterator<Item = (&PathElement, &FieldSet)> {
        self.children.iter()
    }
}
