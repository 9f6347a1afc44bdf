//! Object names as Kubernetes validates them, kind by kind: most kinds take
//! a DNS-1123 subdomain of up to 253 characters, a few a DNS label, and the
//! RBAC kinds any path segment (`system:controller:foo`). The DNS rules are
//! the embedded API server's ([`gantry_kube::names`]), so
//! the guardrails and the API server judge a name alike.

use gantry_kube::names::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain};

/// A path segment: not `.` or `..`, without `/` or `%`.
pub(crate) fn is_path_segment(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])
}

/// Whether `name` is a valid name for an object of `kind` in `group`, as
/// the API server would judge it.
pub(crate) fn is_valid_name(group: &str, kind: &str, name: &str) -> bool {
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
        let long_part = format!("{}.example.com", "a".repeat(64));
        let cases = [
            ("", "ConfigMap", long_label.as_str(), true),
            ("", "ConfigMap", many_parts, true),
            ("", "ConfigMap", too_long.as_str(), false),
            ("", "ConfigMap", "web.v2", true),
            ("", "ConfigMap", long_part.as_str(), true),
            ("", "Namespace", &long_part[..64], false),
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
