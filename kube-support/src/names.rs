//! DNS names as Kubernetes validates them (apimachinery's
//! `IsDNS1123Label`, `IsDNS1123Subdomain` and `IsDNS1035Label`): the one
//! implementation, used by the embedded API server and by the host.
//!
//! A subdomain is bounded in total (253 characters), not label by label:
//! kube's rule is a length check and the regex
//! `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, so a
//! `ConfigMap` may be named with a 64-character part. Only a name that
//! must itself be a label is bounded at 63.

/// Longest DNS-1123 (and DNS-1035) label.
pub const MAX_LABEL: usize = 63;

/// Longest DNS-1123 subdomain.
pub const MAX_SUBDOMAIN: usize = 253;

/// Whether `s` is a DNS-1123 label: up to 63 lowercase letters, digits and
/// `-`, starting and ending with a letter or digit.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= MAX_LABEL && is_label_part(s)
}

/// Whether `s` is a DNS-1035 label: a DNS-1123 label that starts with a
/// letter.
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.starts_with(|c: char| c.is_ascii_lowercase())
}

/// Whether `s` is a DNS-1123 subdomain: up to 253 characters, dot-separated
/// parts each written as a label is (of any length within the total).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN && s.split('.').all(is_label_part)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, of any length.
fn is_label_part(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded_subdomains_only_in_total() {
        let long_part = "a".repeat(MAX_LABEL + 1);
        assert!(is_dns1123_label(&"a".repeat(MAX_LABEL)));
        assert!(!is_dns1123_label(&long_part));
        // As apimachinery's `IsDNS1123Subdomain` judges it: a 64-character
        // part is fine within 253 characters.
        assert!(is_dns1123_subdomain(&long_part));
        assert!(is_dns1123_subdomain(&format!("{long_part}.example.com")));
        let many_parts = vec!["a"; 127].join(".");
        assert_eq!(many_parts.len(), MAX_SUBDOMAIN);
        assert!(is_dns1123_subdomain(&many_parts));
        assert!(!is_dns1123_subdomain(&format!("{many_parts}a")));
        assert!(!is_dns1123_subdomain(&"a".repeat(MAX_SUBDOMAIN + 1)));
    }

    #[test]
    fn characters_and_ends_are_judged_as_kube_does() {
        for valid in ["a", "0", "a-b", "1-2-3", "web.v2", "a.b-c.d1"] {
            assert!(is_dns1123_subdomain(valid), "{valid:?}");
        }
        for invalid in ["", "A", "a..b", "-a", "a-", "a.-b", ".a", "a.", "a_b", "ä"] {
            assert!(!is_dns1123_subdomain(invalid), "{invalid:?}");
            assert!(!is_dns1123_label(invalid), "{invalid:?}");
        }
        assert!(!is_dns1123_label("a.b"));
        assert!(is_dns1123_label("1team"));
        assert!(!is_dns1035_label("1team"));
        assert!(is_dns1035_label("team-1"));
    }
}
