//! What a binding's controller remembers of each parent between
//! reconciles: why the next reconcile happens, what it last applied, the
//! status it last wrote, and how often it failed in a row. Nothing here
//! talks to the API server, so every rule is tested on its own.
//!
//! There is one ledger per parent, so what it keeps is kept small: children
//! and their versions, and the plugin's digest, are remembered by a 64-bit
//! hash (the keys they replace took four allocations each), and the plugin's
//! status as JSON text.

use std::collections::VecDeque;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};

use gantry_sdk::Trigger;
use serde_json::Value;

use super::binding::KindRef;
use super::report::EventBudget;

/// Identity of a child: kind, namespace, name.
pub type ChildKey = (KindRef, Option<String>, String);

/// How many resourceVersions of our own writes are remembered: a
/// reconcile may still run on an older cached copy of the parent.
const OWN_WRITES: usize = 4;

/// A child as one write left it: its key and its resourceVersion.
pub type ChildVersion = (ChildKey, String);

/// How many child versions of our own writes, already shown to the
/// plugin, are remembered per parent: their events may come after the
/// next reconcile has begun.
const OWN_CHILD_WRITES: usize = 64;

/// The bookkeeping of one parent.
#[derive(Debug, Default)]
pub struct ParentState {
    /// resourceVersions of the parent that are not news: the one of the
    /// last reconcile, and those our own writes produced since.
    seen: Vec<String>,
    /// Digest of the plugin at the last reconcile.
    digest: Option<Print>,
    /// A child or related object changed since.
    pending: Option<Trigger>,
    /// The plugin asked to be called again.
    requeue_requested: bool,
    /// Consecutive failures, for backoff.
    failures: u32,
    /// Fingerprints of the children last applied successfully, by child.
    applied: Vec<(Print, u64)>,
    /// Fingerprint of the status last applied successfully.
    status: Option<u64>,
    /// The plugin's part of the status last applied, as JSON text.
    plugin_status: Option<Box<str>>,
    /// Children as our own applies left them and the plugin saw them:
    /// their events are not news.
    own_children: VecDeque<Print>,
    /// A reconcile is running: changes are held until it ends, when what
    /// it did not write itself calls for another.
    reconciling: bool,
    /// Changes held during the running reconcile.
    held: Vec<Held>,
    /// The last reconcile ended with news held: the next runs at once,
    /// whether that reconcile succeeded or failed.
    rerun: bool,
    /// Normal Events the parent may still get.
    normal_events: EventBudget,
}

/// What the ledger keeps of a key: its hash. Unequal keys share one with
/// odds of about 2^-64 per pair, far below anything else that can go wrong.
type Print = u64;

fn print(key: &(impl Hash + ?Sized)) -> Print {
    // SipHash with fixed keys: the same in every ledger of the process.
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
}

/// A change that came during a reconcile.
#[derive(Debug)]
enum Held {
    Parent(String),
    Child(ChildVersion, Trigger),
    Other(Trigger),
}

impl ParentState {
    /// Whether a Normal Event about the parent may be written at `now`
    /// (taking it from the parent's budget).
    pub fn take_normal_event(&mut self, now: std::time::Instant) -> bool {
        self.normal_events.take(now)
    }

    /// A child or related object changed. Of several changes before the
    /// next reconcile, a related object's wins over a child's: children
    /// change after every apply of ours.
    pub fn note_trigger(&mut self, trigger: Trigger) {
        let replaces = matches!(
            (&self.pending, &trigger),
            (None, _) | (Some(Trigger::ChildChanged(_)), Trigger::RelatedChanged(_))
        );
        if replaces {
            self.pending = Some(trigger);
        }
    }

    /// Why the reconcile of the parent at `version`, with the plugin
    /// `digest`, happens; records both as seen. In order: the parent
    /// changed (not by our own write), a child or related object changed,
    /// the plugin changed, the plugin asked, or it is the resync.
    pub fn take_trigger(&mut self, version: &str, digest: &str) -> Trigger {
        let trigger = if !self.seen.iter().any(|v| v == version) {
            self.seen = vec![version.to_string()];
            Trigger::ParentChanged
        } else if let Some(pending) = self.pending.take() {
            pending
        } else if self.digest.is_some_and(|d| d != print(digest)) {
            Trigger::PluginChanged
        } else if self.requeue_requested {
            Trigger::Requeue
        } else {
            Trigger::Resync
        };
        self.digest = Some(print(digest));
        self.pending = None;
        self.requeue_requested = false;
        trigger
    }

    /// Our own write gave the parent `resource_version`: the event it
    /// causes is not a change of the parent.
    pub fn note_own_write(&mut self, resource_version: Option<String>) {
        self.seen.extend(resource_version);
        if self.seen.len() > OWN_WRITES {
            self.seen.remove(0);
        }
    }

    /// A reconcile begins: changes are held until [`Self::end_reconcile`].
    pub fn begin_reconcile(&mut self) {
        self.reconciling = true;
        self.rerun = false;
        self.held.clear();
    }

    /// The parent changed to `version`: whether that calls for a
    /// reconcile now (not our own write, and none running).
    pub fn parent_changed(&mut self, version: &str) -> bool {
        if self.seen.iter().any(|v| v == version) {
            return false;
        }
        if self.reconciling {
            self.held.push(Held::Parent(version.to_string()));
            return false;
        }
        true
    }

    /// A child changed to `version` (`trigger` says which): whether that
    /// calls for a reconcile now. Our own writes that the plugin has seen
    /// are not news; changes during a reconcile wait for its end.
    pub fn child_changed(&mut self, version: ChildVersion, trigger: Trigger) -> bool {
        if self.own_children.contains(&print(&version)) {
            return false;
        }
        if self.reconciling {
            self.held.push(Held::Child(version, trigger));
            return false;
        }
        self.note_trigger(trigger);
        true
    }

    /// A related object changed: a reconcile now, unless one is running.
    pub fn related_changed(&mut self, trigger: Trigger) -> bool {
        if self.reconciling {
            self.held.push(Held::Other(trigger));
            return false;
        }
        self.note_trigger(trigger);
        true
    }

    /// Our own apply left a child at `version`, and the plugin has been
    /// shown it: its event is not news.
    pub fn note_own_child(&mut self, version: &ChildVersion) {
        self.own_children.push_back(print(version));
        if self.own_children.len() > OWN_CHILD_WRITES {
            self.own_children.pop_front();
        }
    }

    /// The reconcile ended: whether a change held meanwhile calls for
    /// another (one the reconcile did not make and show the plugin itself).
    pub fn end_reconcile(&mut self) -> bool {
        self.reconciling = false;
        let mut news = false;
        for held in std::mem::take(&mut self.held) {
            match held {
                Held::Parent(version) => news |= !self.seen.contains(&version),
                Held::Child(version, trigger) => {
                    if !self.own_children.contains(&print(&version)) {
                        self.note_trigger(trigger);
                        news = true;
                    }
                }
                Held::Other(trigger) => {
                    self.note_trigger(trigger);
                    news = true;
                }
            }
        }
        self.rerun = news;
        news
    }

    /// Whether the reconcile that just ended held news, so the next runs
    /// at once rather than after a backoff; asks once.
    pub fn take_rerun(&mut self) -> bool {
        std::mem::take(&mut self.rerun)
    }

    /// Whether the plugin asked to be called again.
    pub fn request_requeue(&mut self, requested: bool) {
        self.requeue_requested = requested;
    }

    /// Whether `child` was last applied with the intent `print`.
    pub fn applied_as(&self, child: &ChildKey, intent: u64) -> bool {
        let child = print(child);
        self.applied.iter().any(|&(c, i)| c == child && i == intent)
    }

    /// `child` was applied with the intent `print`.
    pub fn record_applied(&mut self, child: &ChildKey, intent: u64) {
        let child = print(child);
        match self.applied.iter_mut().find(|(c, _)| *c == child) {
            Some(entry) => entry.1 = intent,
            None => self.applied.push((child, intent)),
        }
    }

    /// `child` was pruned.
    pub fn forget_applied(&mut self, child: &ChildKey) {
        let child = print(child);
        self.applied.retain(|(c, _)| *c != child);
    }

    /// Whether the status was last written as `print`.
    pub fn status_written_as(&self, print: u64) -> bool {
        self.status == Some(print)
    }

    /// The status `print` was written, with the plugin's part `plugin_status`.
    pub fn record_status(&mut self, print: u64, plugin_status: &Value) {
        self.status = Some(print);
        self.plugin_status = Some(plugin_status.to_string().into());
    }

    /// The plugin's part of the status last written.
    pub fn plugin_status(&self) -> Option<Value> {
        let text = self.plugin_status.as_deref()?;
        Some(serde_json::from_str(text).expect("the ledger's own JSON text"))
    }

    /// A reconcile failed: the failures in a row, this one included.
    pub fn failed(&mut self) -> u32 {
        self.failures = self.failures.saturating_add(1);
        self.failures
    }

    /// A reconcile succeeded: the backoff starts over.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Failures in a row (at least 1, for the backoff of the one at hand).
    pub fn failures(&self) -> u32 {
        self.failures.max(1)
    }
}

#[cfg(test)]
mod tests {
    use gantry_sdk::ObjectRef;

    use super::*;

    fn child_changed(name: &str) -> Trigger {
        Trigger::ChildChanged(ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("default".into()),
            name: name.into(),
        })
    }

    fn related_changed(name: &str) -> Trigger {
        Trigger::RelatedChanged(ObjectRef {
            api_version: "v1".into(),
            kind: "Secret".into(),
            namespace: Some("default".into()),
            name: name.into(),
        })
    }

    #[test]
    fn triggers_come_in_their_order_and_are_taken_once() {
        let mut state = ParentState::default();
        assert_eq!(state.take_trigger("1", "d1"), Trigger::ParentChanged);
        assert_eq!(state.take_trigger("1", "d1"), Trigger::Resync);
        state.note_trigger(child_changed("a"));
        assert_eq!(state.take_trigger("1", "d1"), child_changed("a"));
        assert_eq!(state.take_trigger("1", "d2"), Trigger::PluginChanged);
        state.request_requeue(true);
        assert_eq!(state.take_trigger("1", "d2"), Trigger::Requeue);
        assert_eq!(state.take_trigger("1", "d2"), Trigger::Resync);
        // A change of the parent comes before anything pending.
        state.note_trigger(child_changed("b"));
        assert_eq!(state.take_trigger("2", "d2"), Trigger::ParentChanged);
        assert_eq!(state.take_trigger("2", "d2"), Trigger::Resync);
    }

    #[test]
    fn a_related_change_wins_over_a_child_change() {
        let mut state = ParentState::default();
        state.take_trigger("1", "d");
        state.note_trigger(child_changed("a"));
        state.note_trigger(related_changed("s"));
        state.note_trigger(child_changed("b"));
        assert_eq!(state.take_trigger("1", "d"), related_changed("s"));
    }

    #[test]
    fn our_own_writes_are_not_news_and_only_the_last_few_are_kept() {
        let mut state = ParentState::default();
        state.take_trigger("1", "d");
        state.note_own_write(Some("2".into()));
        assert_eq!(state.take_trigger("2", "d"), Trigger::Resync);
        for version in 3..=7 {
            state.note_own_write(Some(version.to_string()));
        }
        assert_eq!(state.take_trigger("7", "d"), Trigger::Resync);
        // "2" fell out of the window: seeing it again is news.
        assert_eq!(state.take_trigger("2", "d"), Trigger::ParentChanged);
    }

    #[test]
    fn applied_children_and_status_are_remembered_by_fingerprint() {
        let mut state = ParentState::default();
        let key: ChildKey = (
            KindRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            Some("default".into()),
            "a".into(),
        );
        assert!(!state.applied_as(&key, 7));
        state.record_applied(&key, 7);
        state.record_applied(&config_map("b"), 7);
        assert!(state.applied_as(&key, 7));
        assert!(!state.applied_as(&key, 8));
        state.forget_applied(&key);
        assert!(!state.applied_as(&key, 7));

        assert!(!state.status_written_as(1));
        state.record_status(1, &serde_json::json!({"ready": 3}));
        assert!(state.status_written_as(1));
        assert_eq!(state.plugin_status(), Some(serde_json::json!({"ready": 3})));
    }

    fn config_map(name: &str) -> ChildKey {
        (
            KindRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
            },
            Some("default".into()),
            name.into(),
        )
    }

    #[test]
    fn our_own_child_writes_the_plugin_saw_are_not_news() {
        let mut state = ParentState::default();
        state.take_trigger("1", "d");
        let ours = (config_map("a"), "10".to_string());
        state.note_own_child(&ours);
        assert!(!state.child_changed(ours, child_changed("a")));
        assert_eq!(state.take_trigger("1", "d"), Trigger::Resync);
        // Someone else's change of the same child is.
        assert!(state.child_changed((config_map("a"), "11".into()), child_changed("a")));
        assert_eq!(state.take_trigger("1", "d"), child_changed("a"));
    }

    #[test]
    fn changes_during_a_reconcile_are_judged_at_its_end() {
        let mut state = ParentState::default();
        state.take_trigger("1", "d");
        state.begin_reconcile();
        // Its own writes: events come before the reconcile records them.
        assert!(!state.child_changed((config_map("a"), "10".into()), child_changed("a")));
        assert!(!state.parent_changed("12"));
        state.note_own_child(&(config_map("a"), "10".into()));
        state.note_own_write(Some("12".into()));
        assert!(!state.end_reconcile(), "only our own writes came");
        assert!(!state.parent_changed("12"));

        state.begin_reconcile();
        assert!(!state.child_changed((config_map("b"), "20".into()), child_changed("b")));
        assert!(
            state.end_reconcile(),
            "a write the reconcile did not make calls for another"
        );
        assert_eq!(state.take_trigger("12", "d"), child_changed("b"));

        state.begin_reconcile();
        assert!(!state.parent_changed("30"));
        assert!(state.end_reconcile(), "the parent changed meanwhile");
        assert!(
            state.parent_changed("31"),
            "no reconcile running: news at once"
        );
        state.begin_reconcile();
        assert!(!state.related_changed(related_changed("s")));
        assert!(state.end_reconcile());
        assert_eq!(state.take_trigger("12", "d"), related_changed("s"));
    }

    #[test]
    fn news_held_through_a_reconcile_asks_once_for_a_rerun() {
        let mut state = ParentState::default();
        state.take_trigger("1", "d");
        state.begin_reconcile();
        assert!(!state.parent_changed("2"));
        assert!(state.end_reconcile());
        assert!(state.take_rerun(), "the news asks for a rerun");
        assert!(!state.take_rerun(), "once");

        state.begin_reconcile();
        state.note_own_write(Some("3".into()));
        assert!(!state.parent_changed("3"));
        assert!(!state.end_reconcile());
        assert!(!state.take_rerun(), "our own write is no news");

        state.begin_reconcile();
        assert!(!state.related_changed(related_changed("s")));
        state.end_reconcile();
        state.begin_reconcile();
        assert!(
            !state.take_rerun(),
            "a new reconcile forgets the last one's news"
        );
    }

    #[test]
    fn failures_count_in_a_row_until_a_success() {
        let mut state = ParentState::default();
        assert_eq!(state.failures(), 1);
        assert_eq!(state.failed(), 1);
        assert_eq!(state.failed(), 2);
        assert_eq!(state.failures(), 2);
        state.succeeded();
        assert_eq!(state.failures(), 1);
    }
}
