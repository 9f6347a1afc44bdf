//! The last admission requests a policy judged, kept so that a new version
//! can be tried on them before it serves: a bounded ring, by count and by
//! bytes, that lives across versions of the same policy.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Requests kept per policy.
pub const MAX_REVIEWS: usize = 64;
/// Bytes of requests (as JSON) kept per policy.
pub const MAX_BYTES: usize = 4 << 20;

/// The recent admission requests of one policy. Cheap to clone: clones
/// share the ring.
#[derive(Debug, Clone, Default)]
pub struct RecentReviews {
    ring: Arc<Mutex<Ring>>,
}

#[derive(Debug, Default)]
struct Ring {
    requests: VecDeque<(Arc<Value>, usize)>,
    bytes: usize,
}

impl RecentReviews {
    /// Keep `request`, dropping the oldest ones beyond the bounds. A
    /// request larger than the whole byte bound is not kept.
    pub fn record(&self, request: &Value) {
        let size = request.to_string().len();
        if size > MAX_BYTES {
            return;
        }
        let mut ring = self.ring.lock().unwrap();
        ring.requests.push_back((Arc::new(request.clone()), size));
        ring.bytes += size;
        while ring.requests.len() > MAX_REVIEWS || ring.bytes > MAX_BYTES {
            if let Some((_, dropped)) = ring.requests.pop_front() {
                ring.bytes -= dropped;
            }
        }
    }

    /// The requests kept, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Value>> {
        let ring = self.ring.lock().unwrap();
        ring.requests.iter().map(|(r, _)| r.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_ring_keeps_the_newest_requests_within_its_bounds() {
        let recent = RecentReviews::default();
        for n in 0..(MAX_REVIEWS + 10) {
            recent.record(&json!({ "uid": n }));
        }
        let kept = recent.snapshot();
        assert_eq!(kept.len(), MAX_REVIEWS);
        assert_eq!(kept[0]["uid"], 10, "the oldest went first");
        assert_eq!(kept[MAX_REVIEWS - 1]["uid"], MAX_REVIEWS + 9);

        let big = "x".repeat(MAX_BYTES / 3);
        let recent = RecentReviews::default();
        for n in 0..4 {
            recent.record(&json!({ "uid": n, "data": big }));
        }
        let kept: Vec<_> = recent.snapshot().iter().map(|r| r["uid"].clone()).collect();
        assert_eq!(kept, vec![json!(2), json!(3)], "at most MAX_BYTES are kept");
        recent.record(&json!({ "data": "x".repeat(MAX_BYTES + 1) }));
        assert_eq!(
            recent.snapshot().len(),
            2,
            "a request over the bound is not kept"
        );
    }
}
