//! Field paths rendered like apimachinery's `field.Path`.

/// `a.b` (or `b` at the root).
pub(crate) fn child(base: &str, name: &str) -> String {
    if base.is_empty() {
        name.to_string()
    } else {
        format!("{base}.{name}")
    }
}

/// `a[key]`.
pub(crate) fn key(base: &str, k: &str) -> String {
    format!("{base}[{k}]")
}

/// `a[3]`.
pub(crate) fn index(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}
