//! Object names as Kubernetes validates them, kind by kind: most kinds take
//! a DNS-1123 subdomain of up to 253 characters, a few a DNS label, and the
//! RBAC kinds any path segment (`system:controller:foo`).

/// A DNS-1123 label: up to 63 lowercase letters, digits and `-`, starting
/// and ending with a letter or digit.
pub fn is_dns1123_label(name: &str) -> bool {
    name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric())
}

/// A DNS-1035 label: a DNS-1123 label that starts with a letter.
pub fn is_dns1035_label(name: &str) -> bool {
    is_dns1123_label(name) && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
}

/// A DNS-1123 subdomain: up to 253 characters, dot-separated parts each
/// as a label's characters (Kubernetes bounds only the total length).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// A path segment: not `.` or `..`, without `/` or `%`.
pub fn is_path_segment(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])
}

/// Whether `name` is a valid name for an object of `kind` in `group`, as
/// the API server would judge it.
pub fn is_valid_name(group: &str, kind: &str, name: &str) -> bool {
    match (group, kind) {
        ("", "Service") => is_dns1035_label(name),
        ("", "Namespace") => is_dns1123_label(name),
        (
            "rbac.authorization.k8s.io",
            "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
        ) => is_path_segment(name),
        _ => is_dns1123_subdomain(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_judged_as_kubernetes_judges_them() {
        let long_label = "a".repeat(70);
        let many_parts = "a.".repeat(126);
        let many_parts = many_parts.trim_end_matches('.');
        let too_long = "a".repeat(254);
        let cases = [
            ("", "ConfigMap", long_label.as_str(), true),
            ("", "ConfigMap", many_parts, true),
            ("", "ConfigMap", too_long.as_str(), false),
            ("", "ConfigMap", "web.v2", true),
            ("", "ConfigMap", "Bad_Name", false),
            ("", "ConfigMap", "a..b", false),
            ("", "ConfigMap", "-a", false),
            ("", "Service", "web", true),
            ("", "Service", "1web", false),
            ("", "Service", "a.b", false),
            ("", "Service", long_label.as_str(), false),
            ("", "Namespace", "1team", true),
            (
                "rbac.authorization.k8s.io",
                "ClusterRole",
                "system:aggregate-to-view",
                true,
            ),
            ("rbac.authorization.k8s.io", "Role", "a/b", false),
            ("apps", "Deployment", long_label.as_str(), true),
        ];
        for (group, kind, name, valid) in cases {
            assert_eq!(
                is_valid_name(group, kind, name),
                valid,
                "{group}/{kind} {name:?}"
            );
        }
    }
}
