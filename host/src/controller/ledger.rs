//! What a binding's controller remembers of each parent between
//! reconciles: why the next reconcile happens, what it last applied, the
//! status it last wrote, and how often it failed in a row. Nothing here
//! talks to the API server, so every rule is tested on its own.

use std::collections::HashMap;

use gantry_sdk::Trigger;
use serde_json::Value;

use super::binding::KindRef;

/// Identity of a child: kind, namespace, name.
pub type ChildKey = (KindRef, Option<String>, String);

/// How many resourceVersions of our own writes are remembered: a
/// reconcile may still run on an older cached copy of the parent.
const OWN_WRITES: usize = 4;

/// The bookkeeping of one parent.
#[derive(Debug, Default)]
pub struct ParentState {
    /// resourceVersions of the parent that are not news: the one of the
    /// last reconcile, and those our own writes produced since.
    seen: Vec<String>,
    /// Digest of the plugin at the last reconcile.
    digest: Option<String>,
    /// A child or related object changed since.
    pending: Option<Trigger>,
    /// The plugin asked to be called again.
    requeue_requested: bool,
    /// Consecutive failures, for backoff.
    failures: u32,
    /// Fingerprints of the children last applied successfully.
    applied: HashMap<ChildKey, u64>,
    /// Fingerprint of the status last applied successfully.
    status: Option<u64>,
    /// The plugin's part of the status last applied.
    plugin_status: Option<Value>,
}

impl ParentState {
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
        } else if self.digest.as_deref().is_some_and(|d| d != digest) {
            Trigger::PluginChanged
        } else if self.requeue_requested {
            Trigger::Requeue
        } else {
            Trigger::Resync
        };
        self.digest = Some(digest.to_string());
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

    /// Whether the plugin asked to be called again.
    pub fn request_requeue(&mut self, requested: bool) {
        self.requeue_requested = requested;
    }

    /// Whether `child` was last applied with the intent `print`.
    pub fn applied_as(&self, child: &ChildKey, print: u64) -> bool {
        self.applied.get(child) == Some(&print)
    }

    /// `child` was applied with the intent `print`.
    pub fn record_applied(&mut self, child: ChildKey, print: u64) {
        self.applied.insert(child, print);
    }

    /// `child` was pruned.
    pub fn forget_applied(&mut self, child: &ChildKey) {
        self.applied.remove(child);
    }

    /// Whether the status was last written as `print`.
    pub fn status_written_as(&self, print: u64) -> bool {
        self.status == Some(print)
    }

    /// The status `print` was written, with the plugin's part `plugin_status`.
    pub fn record_status(&mut self, print: u64, plugin_status: Value) {
        self.status = Some(print);
        self.plugin_status = Some(plugin_status);
    }

    /// The plugin's part of the status last written.
    pub fn plugin_status(&self) -> Option<&Value> {
        self.plugin_status.as_ref()
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
        state.record_applied(key.clone(), 7);
        assert!(state.applied_as(&key, 7));
        assert!(!state.applied_as(&key, 8));
        state.forget_applied(&key);
        assert!(!state.applied_as(&key, 7));

        assert!(!state.status_written_as(1));
        state.record_status(1, serde_json::json!({"ready": 3}));
        assert!(state.status_written_as(1));
        assert_eq!(
            state.plugin_status(),
            Some(&serde_json::json!({"ready": 3}))
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
