//! Which namespaces the operator watches (`--watch-namespaces`): all of
//! them, or a list.

/// The namespaces an operator watches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WatchScope {
    /// Every namespace (needs cluster-wide rights).
    #[default]
    All,
    /// Only these (needs rights in each of them only).
    Namespaces(Vec<String>),
}

impl WatchScope {
    /// `a,b,c` (empty: every namespace). Names are DNS labels.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut names: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        if let Some(bad) = names
            .iter()
            .find(|n| !gantry_kube::names::is_dns1123_label(n))
        {
            return Err(format!("{bad:?} is not a namespace name"));
        }
        names.sort();
        names.dedup();
        Ok(if names.is_empty() {
            Self::All
        } else {
            Self::Namespaces(names)
        })
    }

    /// Whether objects in `namespace` are watched.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Namespaces(names) => names.iter().any(|n| n == namespace),
        }
    }

    /// The namespaces, comma-separated, or "all namespaces".
    pub fn describe(&self) -> String {
        match self {
            Self::All => "all namespaces".into(),
            Self::Namespaces(names) => names.join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_list_of_namespaces_and_refuses_bad_names() {
        assert_eq!(WatchScope::parse("").unwrap(), WatchScope::All);
        assert_eq!(
            WatchScope::parse("b, a,b").unwrap(),
            WatchScope::Namespaces(vec!["a".into(), "b".into()])
        );
        assert!(WatchScope::parse("a,Not_A_Name").is_err());
        let scope = WatchScope::parse("a,b").unwrap();
        assert!(scope.contains("a") && !scope.contains("c"));
        assert!(WatchScope::All.contains("c"));
    }
}
