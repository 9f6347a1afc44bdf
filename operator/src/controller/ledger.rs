//! What a binding's controller remembers of each parent between
//! reconciles: why the next reconcile happens, what it last applied, the
//! status it last wrote, and how often it failed in a row. Nothing here
//! talks to the API server, so every rule is tested on its own.
//!
//! [`Ledgers`] holds the ledger of every parent of a binding and is the
//! only way to change one, each change a named step: the watch events
//! (`mappers`), the reconcile (its trigger, its children's
//! [`ChildReport`] recorded once as it ends, its outcome) and the status
//! write.
//!
//! There is one ledger per parent, so what it keeps is kept small: children
//! and their versions, and the plugin's digest, are remembered by a 64-bit
//! hash (the keys they replace took four allocations each), and the plugin's
//! status as JSON text.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};
use std::sync::Mutex;

use gantry_sdk::Trigger;
use serde_json::Value;

use super::report::EventBudget;
use super::spec::KindRef;

/// Identity of a child: kind, namespace, name.
pub(crate) type ChildKey = (KindRef, Option<String>, String);

/// How many resourceVersions of our own writes are remembered: a
/// reconcile may still run on an older cached copy of the parent.
const OWN_WRITES: usize = 4;

/// A child as one write left it: its key and its resourceVersion.
pub(crate) type ChildVersion = (ChildKey, String);

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
    applied: AppliedIntents,
    /// Fingerprint of the status last applied successfully.
    status: Option<u64>,
    /// The plugin's part of the status last applied, as JSON text.
    plugin_status: Option<Box<str>>,
    /// Children as our own applies left them and the plugin saw them:
    /// their events are not news.
    own_children: VecDeque<Print>,
    /// Whether a reconcile waits or runs.
    phase: Phase,
    /// Changes held during the running reconcile.
    held: Vec<Held>,
    /// The last reconcile ended with news held: the next runs at once,
    /// whether that reconcile succeeded or failed.
    rerun: bool,
    /// Normal Events the parent may still get.
    normal_events: EventBudget,
}

/// Where the parent's reconcile stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// None waits or runs: a change calls for one.
    #[default]
    Idle,
    /// One waits for its slot: it reads the parent and its children once
    /// it has one, so their changes call for nothing more.
    Queued,
    /// One runs: changes are held until it ends, when what it did not
    /// write itself calls for another.
    Reconciling,
}

/// What the ledger keeps of a key: its hash. Unequal keys share one with
/// odds of about 2^-64 per pair, far below anything else that can go wrong.
type Print = u64;

fn print(key: &(impl Hash + ?Sized)) -> Print {
    // SipHash with fixed keys: the same in every ledger of the process.
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
}

/// The intents a parent's children were last applied with: by child, the
/// fingerprint of the object applied.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct AppliedIntents(Vec<(Print, u64)>);

impl AppliedIntents {
    /// Whether `child` was last applied with the intent `intent`.
    pub fn applied_as(&self, child: &ChildKey, intent: u64) -> bool {
        let child = print(child);
        self.0.iter().any(|&(c, i)| c == child && i == intent)
    }

    /// `child` was applied with the intent `intent`.
    pub fn record(&mut self, child: &ChildKey, intent: u64) {
        let child = print(child);
        match self.0.iter_mut().find(|(c, _)| *c == child) {
            Some(entry) => entry.1 = intent,
            None => self.0.push((child, intent)),
        }
    }

    /// `child` is gone (pruned).
    pub fn forget(&mut self, child: &ChildKey) {
        let child = print(child);
        self.0.retain(|(c, _)| *c != child);
    }
}

/// What one reconcile's writes of children leave in the parent's ledger,
/// recorded once as the reconcile ends.
#[derive(Debug, Default)]
pub struct ChildReport {
    /// The intents the children now carry: those recorded before, with the
    /// reconcile's applies and prunes over them.
    pub applied: AppliedIntents,
    /// Versions of the reconcile's own writes that the plugin was shown:
    /// their events are not news.
    pub shown: Vec<ChildVersion>,
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

    /// A reconcile begins (its wait, if any, is over): changes are held
    /// until [`Self::end_reconcile`].
    pub fn begin_reconcile(&mut self) {
        self.phase = Phase::Reconciling;
        self.rerun = false;
        self.held.clear();
    }

    /// The parent changed to `version`: whether that calls for a
    /// reconcile now (not our own write, none running and none waiting).
    pub fn parent_changed(&mut self, version: &str) -> bool {
        if self.seen.iter().any(|v| v == version) {
            return false;
        }
        if self.phase == Phase::Reconciling {
            self.held.push(Held::Parent(version.to_string()));
            return false;
        }
        self.phase == Phase::Idle
    }

    /// A child changed to `version` (`trigger` says which): whether that
    /// calls for a reconcile now. Our own writes that the plugin has seen
    /// are not news; changes during a reconcile wait for its end.
    pub fn child_changed(&mut self, version: ChildVersion, trigger: Trigger) -> bool {
        if self.own_children.contains(&print(&version)) {
            return false;
        }
        if self.phase == Phase::Reconciling {
            self.held.push(Held::Child(version, trigger));
            return false;
        }
        self.note_trigger(trigger);
        self.phase == Phase::Idle
    }

    /// A related object changed: a reconcile now, unless one is running
    /// or waiting.
    pub fn related_changed(&mut self, trigger: Trigger) -> bool {
        if self.phase == Phase::Reconciling {
            self.held.push(Held::Other(trigger));
            return false;
        }
        self.note_trigger(trigger);
        self.phase == Phase::Idle
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
        self.phase = Phase::Idle;
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

    /// The intents the children were last applied with.
    pub fn applied_intents(&self) -> AppliedIntents {
        self.applied.clone()
    }

    /// What a reconcile's writes of children left: the intents the children
    /// now carry, and the versions of its writes the plugin saw.
    pub fn record_children(&mut self, report: ChildReport) {
        self.applied = report.applied;
        for version in &report.shown {
            self.note_own_child(version);
        }
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

/// The ledgers of one binding's parents, by parent key (`namespace/name`).
#[derive(Debug, Default)]
pub struct Ledgers(Mutex<HashMap<String, ParentState>>);

impl Ledgers {
    /// Run `f` on the ledger of `key`, made if missing.
    fn with<R>(&self, key: &str, f: impl FnOnce(&mut ParentState) -> R) -> R {
        f(self.0.lock().unwrap().entry(key.to_string()).or_default())
    }

    /// Run `f` on the ledger of `key` if it has one: a parent forgotten
    /// meanwhile stays forgotten.
    fn with_existing<R>(&self, key: &str, f: impl FnOnce(&mut ParentState) -> R) -> Option<R> {
        self.0.lock().unwrap().get_mut(key).map(f)
    }

    /// Read the ledger of `key`.
    pub fn read<R>(&self, key: &str, f: impl FnOnce(&ParentState) -> R) -> R {
        self.with(key, |ledger| f(ledger))
    }

    /// The parent `key` changed to `version`: whether that calls for a
    /// reconcile now (see [`ParentState::parent_changed`]).
    pub fn parent_changed(&self, key: &str, version: &str) -> bool {
        self.with(key, |s| s.parent_changed(version))
    }

    /// A child of `key` changed to `version`: whether that calls for a
    /// reconcile now (see [`ParentState::child_changed`]).
    pub fn child_changed(&self, key: &str, version: ChildVersion, trigger: Trigger) -> bool {
        self.with(key, |s| s.child_changed(version, trigger))
    }

    /// A related object of `key` changed: whether that calls for a
    /// reconcile now.
    pub fn related_changed(&self, key: &str, trigger: Trigger) -> bool {
        self.with(key, |s| s.related_changed(trigger))
    }

    /// A reconcile of `key` waits for its slot: until the guard begins it
    /// (or drops), the changes of `key` call for no other.
    pub fn queue(&self, key: String) -> Queued<'_> {
        self.with(&key, |s| s.phase = Phase::Queued);
        Queued {
            ledgers: self,
            key: Some(key),
        }
    }

    /// Why this reconcile of `key`, at `version` with the plugin `digest`,
    /// happens (see [`ParentState::take_trigger`]).
    pub fn take_trigger(&self, key: &str, version: &str, digest: &str) -> Trigger {
        self.with(key, |s| s.take_trigger(version, digest))
    }

    /// The intents the children of `key` were last applied with.
    pub fn applied_intents(&self, key: &str) -> AppliedIntents {
        self.with(key, |s| s.applied_intents())
    }

    /// What a reconcile's writes of the children of `key` left.
    pub fn record_children(&self, key: &str, report: ChildReport) {
        self.with_existing(key, |s| s.record_children(report));
    }

    /// Our write of the status `print` (the plugin's part `plugin_status`)
    /// gave the parent `key` `resource_version`.
    pub fn record_status(
        &self,
        key: &str,
        resource_version: Option<String>,
        print: u64,
        plugin_status: &Value,
    ) {
        self.with(key, |s| {
            s.note_own_write(resource_version);
            s.record_status(print, plugin_status);
        });
    }

    /// Whether the plugin asked to be called again for `key`.
    pub fn request_requeue(&self, key: &str, requested: bool) {
        self.with(key, |s| s.request_requeue(requested));
    }

    /// Whether a Normal Event about `key` may be written at `now`.
    pub fn take_normal_event(&self, key: &str, now: std::time::Instant) -> bool {
        self.with(key, |s| s.take_normal_event(now))
    }

    /// A reconcile of `key` succeeded.
    pub fn succeeded(&self, key: &str) {
        self.with_existing(key, ParentState::succeeded);
    }

    /// A reconcile of `key` failed: the failures in a row.
    pub fn failed(&self, key: &str) -> u32 {
        self.with(key, ParentState::failed)
    }

    /// After a failed reconcile of `key`: the failures in a row, and
    /// whether news held during it asks for a rerun at once (asked once).
    pub fn retry(&self, key: &str) -> (u32, bool) {
        self.with(key, |s| (s.failures(), s.take_rerun()))
    }

    /// Forget the parent `key` (it is gone).
    pub fn forget(&self, key: &str) {
        self.0.lock().unwrap().remove(key);
    }
}

/// A reconcile of one parent waiting for its slot.
pub struct Queued<'a> {
    ledgers: &'a Ledgers,
    key: Option<String>,
}

impl<'a> Queued<'a> {
    /// The slot is free: the reconcile begins, in one step with the end of
    /// its wait, so that no change falls between the two.
    pub fn begin(mut self) -> Reconciling<'a> {
        let key = self.key.take().expect("a queued reconcile begins once");
        self.ledgers.with(&key, ParentState::begin_reconcile);
        Reconciling {
            ledgers: self.ledgers,
            key: Some(key),
        }
    }
}

impl Drop for Queued<'_> {
    /// The wait ended without a reconcile (the operator shuts down).
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.ledgers.with_existing(&key, |s| s.phase = Phase::Idle);
        }
    }
}

/// A reconcile of one parent, holding its changes until it ends.
pub struct Reconciling<'a> {
    ledgers: &'a Ledgers,
    key: Option<String>,
}

impl Reconciling<'_> {
    /// The reconcile ended: whether a change held meanwhile calls for
    /// another. A parent forgotten meanwhile stays forgotten.
    pub fn end(mut self) -> bool {
        self.finish()
    }

    fn finish(&mut self) -> bool {
        let Some(key) = self.key.take() else {
            return false;
        };
        self.ledgers
            .with_existing(&key, ParentState::end_reconcile)
            .unwrap_or(false)
    }
}

impl Drop for Reconciling<'_> {
    fn drop(&mut self) {
        self.finish();
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
        let mut applied = state.applied_intents();
        assert!(!applied.applied_as(&key, 7));
        applied.record(&key, 7);
        applied.record(&config_map("b"), 7);
        assert!(applied.applied_as(&key, 7));
        assert!(!applied.applied_as(&key, 8));
        let shown = vec![(key.clone(), "10".to_string())];
        state.record_children(ChildReport { applied, shown });
        assert!(state.applied_intents().applied_as(&key, 7));
        assert!(
            !state.child_changed((key.clone(), "10".into()), child_changed("a")),
            "a version the plugin was shown is no news"
        );
        let mut applied = state.applied_intents();
        applied.forget(&key);
        assert!(!applied.applied_as(&key, 7));
        assert!(applied.applied_as(&config_map("b"), 7));

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
    fn changes_while_a_reconcile_waits_call_for_no_other_and_keep_their_reason() {
        let ledgers = Ledgers::default();
        ledgers.take_trigger("ns/p", "1", "d");
        let waiting = ledgers.queue("ns/p".into());
        // The waiting reconcile reads the parent and its children when its
        // slot is free: nothing need be handed to the runner meanwhile.
        assert!(!ledgers.parent_changed("ns/p", "2"));
        assert!(!ledgers.child_changed("ns/p", (config_map("a"), "10".into()), child_changed("a")));
        assert!(!ledgers.related_changed("ns/p", related_changed("s")));
        let reconciling = waiting.begin();
        assert_eq!(
            ledgers.take_trigger("ns/p", "1", "d"),
            related_changed("s"),
            "the reason a change gave is kept for the reconcile"
        );
        // Once it runs, changes are held for its end as before.
        assert!(!ledgers.parent_changed("ns/p", "3"));
        assert!(
            reconciling.end(),
            "a change during the run calls for another"
        );
        assert!(
            ledgers.parent_changed("ns/p", "4"),
            "neither waiting nor running"
        );

        // A wait given up (the operator shuts down) leaves the parent as news.
        drop(ledgers.queue("ns/p".into()));
        assert!(ledgers.parent_changed("ns/p", "5"));
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
