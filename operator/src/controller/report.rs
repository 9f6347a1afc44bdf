//! What a reconcile changed, said once: one info log line per reconcile
//! that wrote something (children created, updated, pruned; the status),
//! and Normal Events on the parent for the children, a few at a time per
//! parent so that a parent edited in a loop does not flood the Events API.
//! A reconcile that wrote nothing says nothing above debug level.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What happened to one child in a reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// It did not exist: the apply created it.
    Created,
    /// It existed and the apply changed it (a new resourceVersion).
    Updated,
    /// No longer desired: deleted.
    Pruned,
}

impl Change {
    /// The reason of its Normal Event.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Created => "ChildrenCreated",
            Self::Updated => "ChildrenUpdated",
            Self::Pruned => "ChildrenPruned",
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Updated => "updated",
            Self::Pruned => "pruned",
        }
    }
}

/// The children one reconcile changed, by name (`Kind name`), over all its
/// plugin calls: a child created by the first call and updated by the next
/// was created.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    children: BTreeMap<String, Change>,
}

impl Changes {
    /// `child` (`Kind name`) went through `change`.
    pub fn record(&mut self, child: String, change: Change) {
        self.children
            .entry(child)
            .and_modify(|earlier| {
                // Created then updated is still news of a creation; a
                // prune is the last word.
                if change == Change::Pruned || *earlier != Change::Created {
                    *earlier = change;
                }
            })
            .or_insert(change);
    }

    /// Whether no child changed.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }

    /// How many children went through `change`.
    pub fn count(&self, change: Change) -> usize {
        self.children.values().filter(|c| **c == change).count()
    }

    /// One message per kind of change, in the order created, updated,
    /// pruned: `created Deployment web, Service web`.
    pub fn messages(&self) -> Vec<(Change, String)> {
        let mut by_change: BTreeMap<Change, Vec<&str>> = BTreeMap::new();
        for (child, change) in &self.children {
            by_change.entry(*change).or_default().push(child);
        }
        by_change
            .into_iter()
            .map(|(change, children)| {
                (change, format!("{} {}", change.verb(), children.join(", ")))
            })
            .collect()
    }

    /// The log line of a reconcile that changed these children and wrote
    /// the status or not; `None` when it wrote nothing.
    pub fn summary(&self, status_written: bool) -> Option<String> {
        let mut parts: Vec<String> = self.messages().into_iter().map(|(_, m)| m).collect();
        if status_written {
            parts.push("status written".into());
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Normal Events a parent may get at once.
pub const BURST: u32 = 10;
/// One more Normal Event allowed per parent after this long.
pub const REFILL: Duration = Duration::from_secs(10);

/// A token bucket of Normal Events for one parent (as client-go's event
/// spam filter keeps one per object): [`BURST`] at once, then one per
/// [`REFILL`]. Warnings are not counted: failures are always reported.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventBudget {
    /// Events spent, and since when refills are counted. `None`: full.
    spent: Option<(u32, Instant)>,
}

impl EventBudget {
    /// Take one Event at `now`; false when the parent has had its share.
    pub fn take(&mut self, now: Instant) -> bool {
        let (spent, from) = self.spent.unwrap_or((0, now));
        let periods = now.saturating_duration_since(from).as_nanos() / REFILL.as_nanos();
        let back = u32::try_from(periods).unwrap_or(u32::MAX).min(spent);
        let spent = spent - back;
        // A period partly run keeps counting, unless the bucket is full.
        let from = if spent == 0 {
            now
        } else {
            from + REFILL * back
        };
        let allowed = spent < BURST;
        self.spent = Some((spent + u32::from(allowed), from));
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_created_then_updated_was_created_and_a_prune_is_final() {
        let mut changes = Changes::default();
        changes.record("Deployment web".into(), Change::Created);
        changes.record("Deployment web".into(), Change::Updated);
        changes.record("Service web".into(), Change::Updated);
        changes.record("Ingress web".into(), Change::Created);
        changes.record("Ingress web".into(), Change::Pruned);
        assert_eq!(
            changes.messages(),
            vec![
                (Change::Created, "created Deployment web".to_string()),
                (Change::Updated, "updated Service web".to_string()),
                (Change::Pruned, "pruned Ingress web".to_string()),
            ]
        );
        assert_eq!(
            changes.summary(true).unwrap(),
            "created Deployment web; updated Service web; pruned Ingress web; status written"
        );
    }

    #[test]
    fn a_reconcile_that_wrote_nothing_has_nothing_to_say() {
        let changes = Changes::default();
        assert!(changes.is_empty());
        assert_eq!(changes.summary(false), None);
        assert_eq!(changes.summary(true).unwrap(), "status written");
    }

    #[test]
    fn the_budget_allows_a_burst_then_one_per_refill() {
        let start = Instant::now();
        let mut budget = EventBudget::default();
        for _ in 0..BURST {
            assert!(budget.take(start));
        }
        assert!(!budget.take(start));
        assert!(!budget.take(start + REFILL / 2));
        assert!(budget.take(start + REFILL));
        assert!(!budget.take(start + REFILL));
        // Long enough idle, and the whole burst is back.
        let later = start + REFILL * (BURST + 2);
        for _ in 0..BURST {
            assert!(budget.take(later));
        }
        assert!(!budget.take(later));
    }
}
