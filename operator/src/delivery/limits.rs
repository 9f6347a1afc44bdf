//! The `limits` of a binding document, one type for every kind of binding.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use gantry_sandbox::limits::Limits;

/// Longest deadline a binding may ask for, milliseconds.
pub const MAX_DEADLINE_MS: u64 = 60_000;
/// Largest memory cap a binding may ask for, MiB (the engine's slot size).
pub const MAX_MEMORY_MIB: usize = 512;

/// Limits as written in a binding; absent fields keep the defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSpec {
    /// Call deadline, milliseconds.
    pub deadline_ms: Option<u64>,
    /// Memory cap, MiB.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: Option<usize>,
    /// Response size cap, bytes.
    pub output_bytes: Option<usize>,
    /// Most children per response (reconcile bindings only).
    pub max_children: Option<usize>,
}

impl LimitsSpec {
    /// Check the values: `Err` is (field under `limits.`, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        if self.deadline_ms == Some(0) || self.deadline_ms.is_some_and(|d| d > MAX_DEADLINE_MS) {
            return Err((
                "limits.deadlineMs".into(),
                format!("must be between 1 and {MAX_DEADLINE_MS}"),
            ));
        }
        if self.memory_mib == Some(0) || self.memory_mib.is_some_and(|m| m > MAX_MEMORY_MIB) {
            return Err((
                "limits.memoryMiB".into(),
                format!("must be between 1 and {MAX_MEMORY_MIB}"),
            ));
        }
        if self.output_bytes == Some(0) {
            return Err(("limits.outputBytes".into(), "must be at least 1".into()));
        }
        if self.max_children == Some(0) {
            return Err(("limits.maxChildren".into(), "must be at least 1".into()));
        }
        Ok(())
    }

    /// The call limits: these, defaults elsewhere.
    pub fn call_limits(&self) -> Limits {
        let defaults = Limits::default();
        Limits {
            deadline: self
                .deadline_ms
                .map_or(defaults.deadline, Duration::from_millis),
            memory_bytes: self.memory_mib.map_or(defaults.memory_bytes, |m| m << 20),
            output_bytes: self.output_bytes.unwrap_or(defaults.output_bytes),
            max_children: self.max_children.unwrap_or(defaults.max_children),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_limits_keep_the_defaults() {
        assert_eq!(LimitsSpec::default().call_limits(), Limits::default());
        let set = LimitsSpec {
            deadline_ms: Some(50),
            memory_mib: Some(16),
            ..LimitsSpec::default()
        };
        let limits = set.call_limits();
        assert_eq!(limits.deadline, Duration::from_millis(50));
        assert_eq!(limits.memory_bytes, 16 << 20);
        assert_eq!(limits.output_bytes, Limits::default().output_bytes);
    }

    #[test]
    fn out_of_range_values_name_their_field() {
        let cases = [
            (
                LimitsSpec {
                    deadline_ms: Some(0),
                    ..LimitsSpec::default()
                },
                "limits.deadlineMs",
            ),
            (
                LimitsSpec {
                    deadline_ms: Some(60_001),
                    ..LimitsSpec::default()
                },
                "limits.deadlineMs",
            ),
            (
                LimitsSpec {
                    memory_mib: Some(4096),
                    ..LimitsSpec::default()
                },
                "limits.memoryMiB",
            ),
            (
                LimitsSpec {
                    output_bytes: Some(0),
                    ..LimitsSpec::default()
                },
                "limits.outputBytes",
            ),
            (
                LimitsSpec {
                    max_children: Some(0),
                    ..LimitsSpec::default()
                },
                "limits.maxChildren",
            ),
        ];
        for (limits, field) in cases {
            assert_eq!(limits.check().unwrap_err().0, field);
        }
        assert!(LimitsSpec::default().check().is_ok());
    }
}
