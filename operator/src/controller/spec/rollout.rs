//! The `rollout` of a binding: how a new version goes into service (see
//! `controller::rollout` for the shadow runs it asks for).

use serde::{Deserialize, Deserializer, Serialize};

/// How many parents a new version may change: a count, or a percentage of
/// the parents compared (`"10%"`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Threshold {
    /// At most this many parents.
    Count(u64),
    /// At most this percentage of the parents compared.
    Percent(f64),
}

impl Threshold {
    /// Whether `changed` of `compared` parents is over the threshold.
    pub fn exceeded(self, changed: u64, compared: u64) -> bool {
        match self {
            Threshold::Count(n) => changed > n,
            #[allow(clippy::cast_precision_loss)] // parent counts are far below 2^52
            Threshold::Percent(p) => (changed as f64) > p / 100.0 * compared as f64,
        }
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Count(u64),
            Text(String),
        }
        match Raw::deserialize(deserializer)? {
            Raw::Count(n) => Ok(Threshold::Count(n)),
            Raw::Text(text) => {
                let percent = text
                    .strip_suffix('%')
                    .and_then(|p| p.trim().parse::<f64>().ok())
                    .filter(|p| (0.0..=100.0).contains(p));
                percent.map(Threshold::Percent).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "{text:?} is neither a count nor a percentage like \"10%\""
                    ))
                })
            }
        }
    }
}

/// The `rollout` of a binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    /// Shadow-run each new version before it serves (default true).
    #[serde(default = "yes")]
    pub shadow: bool,
    /// Parents on which the new version may fail where the running one
    /// succeeds (default 0).
    #[serde(default)]
    pub max_failures: u64,
    /// Parents the new version may change; none: any number.
    #[serde(default)]
    pub max_changed_parents: Option<Threshold>,
}

fn yes() -> bool {
    true
}

impl Default for RolloutSpec {
    fn default() -> Self {
        Self {
            shadow: true,
            max_failures: 0,
            max_changed_parents: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_counts_or_percentages() {
        let spec: RolloutSpec =
            serde_yaml::from_str("maxChangedParents: 2\nmaxFailures: 1\n").unwrap();
        assert_eq!(spec.max_changed_parents, Some(Threshold::Count(2)));
        assert!(spec.shadow, "shadow runs are on by default");
        let spec: RolloutSpec = serde_yaml::from_str("maxChangedParents: \"10%\"\n").unwrap();
        assert_eq!(spec.max_changed_parents, Some(Threshold::Percent(10.0)));
        assert!(Threshold::Percent(10.0).exceeded(6, 50));
        assert!(!Threshold::Percent(10.0).exceeded(5, 50));
        assert!(Threshold::Count(2).exceeded(3, 50));
        let err = serde_yaml::from_str::<RolloutSpec>("maxChangedParents: lots\n").unwrap_err();
        assert!(
            err.to_string().contains("neither a count nor a percentage"),
            "{err}"
        );
        assert!(serde_yaml::from_str::<RolloutSpec>("maxChangedParents: \"120%\"\n").is_err());
    }
}
