//! Paths into an object, as structured-merge-diff spells them.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

/// One step of a [`Path`].
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of a struct or a key of a map (`f:<name>`).
    Field(String),
    /// An element of a list-map, identified by its key fields sorted by name (`k:{...}`).
    Key(Vec<(String, Value)>),
    /// An element of a set list, identified by its value (`v:<json>`).
    Value(Value),
    /// An element of a list by position (`i:<n>`); only for lists with no other identity.
    Index(usize),
}

impl PathElement {
    /// Builds a [`PathElement::Key`], sorting the key fields by name as Kubernetes does.
    pub fn key<I, S>(fields: I) -> PathElement
    where
        I: IntoIterator<Item = (S, Value)>,
        S: Into<String>,
    {
        let mut v: Vec<(String, Value)> = fields.into_iter().map(|(k, v)| (k.into(), v)).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(v)
    }

    /// Builds a [`PathElement::Field`].
    pub fn field(name: impl Into<String>) -> PathElement {
        PathElement::Field(name.into())
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PathElement {
    /// The order of structured-merge-diff's `PathElement.Compare`: fields, then
    /// keys, then values, then indices.
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.as_bytes().cmp(b.as_bytes()),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for (x, y) in a.iter().zip(b.iter()) {
                    let c = x.0.as_bytes().cmp(y.0.as_bytes());
                    if c != Ordering::Equal {
                        return c;
                    }
                    let c = compare_values(&x.1, &y.1);
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

fn value_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// Total order over JSON values following structured-merge-diff's `value.Compare`
/// (numbers, strings, booleans, lists, maps, null).
// `a`/`b` are the two values and `x`/`y` their contents, as in `value.Compare`.
#[allow(clippy::many_single_char_names)]
pub(crate) fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                x.cmp(&y)
            } else {
                let x = x.as_f64().unwrap_or(0.0);
                let y = y.as_f64().unwrap_or(0.0);
                x.partial_cmp(&y).unwrap_or(Ordering::Equal)
            }
        }
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xk: Vec<_> = x.iter().collect();
            let mut yk: Vec<_> = y.iter().collect();
            xk.sort_by(|p, q| p.0.cmp(q.0));
            yk.sort_by(|p, q| p.0.cmp(q.0));
            for (p, q) in xk.iter().zip(yk.iter()) {
                let c = p.0.cmp(q.0).then_with(|| compare_values(p.1, q.1));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xk.len().cmp(&yk.len())
        }
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => value_rank(a).cmp(&value_rank(b)),
    }
}

/// Equality of JSON values where `1` and `1.0` are equal (as in structured-merge-diff).
pub(crate) fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare_values(a, b) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Renders a value like structured-merge-diff's `value.ToString`: strings quoted,
/// everything else as compact JSON.
fn value_to_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}={}", value_to_string(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", value_to_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the root of an object, e.g. `.spec.containers[name="a"].image`.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of plain field names, e.g. `Path::fields(["spec", "replicas"])`.
    pub fn fields<I, S>(names: I) -> Path
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Path(
            names
                .into_iter()
                .map(|n| PathElement::Field(n.into()))
                .collect(),
        )
    }

    /// Returns this path extended by one element.
    #[must_use]
    pub fn child(&self, pe: PathElement) -> Path {
        let mut v = self.0.clone();
        v.push(pe);
        Path(v)
    }
}

impl fmt::Display for Path {
    /// The human form kube-apiserver uses in conflict messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}
