//! Sharding: with `--shard-count N`, replica `--shard-index i` reconciles
//! only the parents whose stable hash of `namespace/name` is `i` modulo N.
//! The hash is the first 8 bytes of SHA-256, so every replica and every
//! version of Gantry agrees on it (std's hasher makes no such promise).

use sha2::{Digest, Sha256};

/// This replica's share of the parents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// Which shard this replica is, `0..count`.
    pub index: u32,
    /// How many shards there are.
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Self { index: 0, count: 1 }
    }
}

impl Shard {
    /// A shard, checked: `index < count`, `count ≥ 1`.
    pub fn new(index: u32, count: u32) -> Result<Self, String> {
        if count == 0 || index >= count {
            return Err(format!(
                "shard index {index} is not below shard count {count}"
            ));
        }
        Ok(Self { index, count })
    }

    /// The shard of the parent `key` (`namespace/name`, or `name`).
    pub fn of(key: &str, count: u32) -> u32 {
        let digest = Sha256::digest(key.as_bytes());
        let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
        u32::try_from(head % u64::from(count.max(1))).expect("less than count, a u32")
    }

    /// Whether this replica reconciles the parent `key`.
    pub fn owns(&self, key: &str) -> bool {
        self.count <= 1 || Self::of(key, self.count) == self.index
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_exactly_one_owner_and_the_split_is_even() {
        let shards: Vec<Shard> = (0..3).map(|i| Shard::new(i, 3).unwrap()).collect();
        let mut counts = [0usize; 3];
        for n in 0..3000 {
            let key = format!("default/parent-{n}");
            let owners: Vec<&Shard> = shards.iter().filter(|s| s.owns(&key)).collect();
            assert_eq!(owners.len(), 1, "{key}");
            counts[owners[0].index as usize] += 1;
        }
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
    }

    #[test]
    fn the_hash_is_stable() {
        // Fixed values: a change here would move parents between replicas
        // running different versions.
        // (computed independently: first 8 bytes of SHA-256, big-endian)
        assert_eq!(Shard::of("default/mc", 1000), 231);
        assert_eq!(Shard::of("default/mc", 2), 1);
        assert_eq!(Shard::of("a", 1000), 250);
        assert!(Shard::new(2, 2).is_err());
        assert!(Shard::new(0, 0).is_err());
        assert!(Shard::default().owns("anything"));
    }
}
