//! Restoring reset (ignored) fields after a merge, as kube's strategies do.

use serde_json::Value;

use crate::fieldset::FieldSet;
use crate::path::{Path, PathElement};

/// Makes every field path of `ignored` in `new` equal to the same path in `live`
/// (removed when `live` lacks it or is `None`). Only `f:` paths are followed; this is
/// what kube's `PrepareForUpdate` does for `status` on main-resource writes and for
/// `spec` on `/status` writes.
pub fn reset_ignored(new: &mut Value, live: Option<&Value>, ignored: &FieldSet) {
    for path in ignored.paths() {
        reset_path(new, live, &path);
    }
}

fn reset_path(new: &mut Value, live: Option<&Value>, path: &Path) {
    let mut names = Vec::new();
    for pe in &path.0 {
        match pe {
            PathElement::Field(n) => names.push(n.as_str()),
            _ => return,
        }
    }
    let Some((last, init)) = names.split_last() else {
        return;
    };
    let live_val = live.and_then(|l| lookup(l, &names)).cloned();
    let mut cur = new;
    for n in init {
        let Value::Object(m) = cur else { return };
        if !m.contains_key(*n) {
            if live_val.is_none() {
                return;
            }
            m.insert(n.to_string(), Value::Object(serde_json::Map::default()));
        }
        cur = m.get_mut(*n).expect("just ensured");
    }
    let Value::Object(m) = cur else { return };
    match live_val {
        Some(v) => {
            m.insert(last.to_string(), v);
        }
        None => {
            m.remove(*last);
        }
    }
}

fn lookup<'v>(v: &'v Value, names: &[&str]) -> Option<&'v Value> {
    let mut cur = v;
    for n in names {
        cur = cur.as_object()?.get(*n)?;
    }
    Some(cur)
}
