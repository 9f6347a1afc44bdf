//! The memory cap of one plugin instance: every linear memory and every
//! table of every core instance in the component counts against one limit.

use wasmtime::ResourceLimiter;

use super::engine::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLES};

/// Bytes one table element takes in wasmtime (a pointer).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// Refuses growth of any memory or table once the instance's total would
/// pass the limit, and remembers that it did, so a trap that follows is
/// reported as out-of-memory rather than as a trap.
#[derive(Debug)]
pub(super) struct MemoryLimiter {
    limit: usize,
    used: usize,
    /// The growth last allowed, taken back if it then fails.
    last_grant: usize,
    exceeded: bool,
}

impl MemoryLimiter {
    /// A limiter for `limit` bytes in all.
    pub(super) fn new(limit: usize) -> Self {
        Self {
            limit,
            used: 0,
            last_grant: 0,
            exceeded: false,
        }
    }

    /// Whether a growth was refused.
    pub(super) fn exceeded(&self) -> bool {
        self.exceeded
    }

    /// Bytes of memories and tables the instance holds.
    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used
    }

    fn grow(&mut self, bytes: usize) -> bool {
        match self.used.checked_add(bytes) {
            Some(total) if total <= self.limit => {
                self.used = total;
                self.last_grant = bytes;
                true
            }
            _ => {
                self.exceeded = true;
                false
            }
        }
    }

    fn undo_last(&mut self) {
        self.used -= self.last_grant;
        self.last_grant = 0;
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(self.grow(desired.saturating_sub(current)))
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.undo_last();
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let elements = desired.saturating_sub(current);
        Ok(self.grow(elements.saturating_mul(TABLE_ELEMENT_BYTES)))
    }

    fn table_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        self.undo_last();
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_and_tables_share_one_limit() {
        let mut limiter = MemoryLimiter::new(4 << 20);
        assert!(limiter.memory_growing(0, 3 << 20, None).unwrap());
        // A second memory of the same size fits the old per-memory check,
        // not the instance's total.
        assert!(!limiter.memory_growing(0, 3 << 20, None).unwrap());
        assert!(limiter.exceeded());
        let mut limiter = MemoryLimiter::new(4 << 20);
        assert!(limiter.memory_growing(0, 3 << 20, None).unwrap());
        assert!(!limiter.table_growing(0, 1 << 20, None).unwrap());
        assert!(limiter.table_growing(0, 1000, None).unwrap());
        assert_eq!(limiter.used(), (3 << 20) + 1000 * TABLE_ELEMENT_BYTES);
    }

    #[test]
    fn a_failed_growth_is_taken_back() {
        let mut limiter = MemoryLimiter::new(4 << 20);
        assert!(limiter.memory_growing(1 << 20, 2 << 20, None).unwrap());
        limiter
            .memory_grow_failed(wasmtime::Error::msg("no"))
            .unwrap();
        assert_eq!(limiter.used(), 0);
    }
}
