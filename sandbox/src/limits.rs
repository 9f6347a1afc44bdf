//! Per-call resource limits.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one plugin call may use. Every breach is reported as its own
/// [`CallError`](crate::error::CallError) variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock deadline of one call, enforced by epoch interruption.
    #[serde(with = "duration_ms", rename = "deadlineMs")]
    pub deadline: Duration,
    /// Largest linear memory the plugin may grow to, in bytes.
    pub memory_bytes: usize,
    /// Largest response, in bytes of JSON text (children, status, conditions, events).
    pub output_bytes: usize,
    /// Most children one response may list.
    pub max_children: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            deadline: Duration::from_millis(500),
            memory_bytes: 64 << 20,
            output_bytes: 4 << 20,
            max_children: 1000,
        }
    }
}

mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}
