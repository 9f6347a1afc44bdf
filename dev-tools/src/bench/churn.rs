//! The churn phase of `gantry bench converge`: every second a share of the
//! parents gets a new `spec.value`, in turn, and the driver times each
//! change from just before its patch is sent until the last of that
//! parent's children holds the value (or a later one), as a watch on the
//! children reports it. The same watch and clock serve both operators.
//!
//! Values are `c<round>`, so a child holding a later round also settles
//! every earlier change of its parent: a change overtaken by the next one
//! before it was written is timed to when the newer value landed, not
//! dropped from the percentiles.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio::sync::mpsc;

use super::percentile;

/// How hard to churn.
#[derive(Debug, Clone, Copy)]
pub struct ChurnPlan {
    /// Percentage of the parents changed each second (at least one).
    pub percent: u8,
    /// How long to keep changing them.
    pub duration: Duration,
}

/// Reaction latency under churn: from a parent's spec change to its
/// children written.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Latency {
    /// Changes made.
    pub changes: usize,
    /// Changes per second the driver achieved.
    pub changes_per_second: f64,
    /// Median, seconds.
    pub p50_seconds: f64,
    /// 99th percentile, seconds.
    pub p99_seconds: f64,
    /// Slowest, seconds.
    pub max_seconds: f64,
}

/// What the tracker hears, in the order it happened.
#[derive(Clone, Copy)]
enum Heard {
    /// `parent` is about to get round `round`.
    Change { parent: usize, round: u64 },
    /// Child `index` of `parent` holds round `round` (0: not a churn value).
    Child {
        parent: usize,
        index: usize,
        round: u64,
    },
}

/// Churn `parents` (named `p-00000`…, each with `children` ConfigMaps
/// `<parent>-<i>` in `config_maps`' namespace) by `plan`; wait up to
/// `drain` after the last change for every change to be written.
pub(super) async fn run(
    parents: &Api<DynamicObject>,
    config_maps: Api<ConfigMap>,
    count: usize,
    children: u32,
    plan: ChurnPlan,
    drain: Duration,
) -> anyhow::Result<Latency> {
    let (heard, mut hearing) = mpsc::unbounded_channel::<(Heard, Instant)>();
    let watch = tokio::spawn(watch_children(config_maps, heard.clone()));
    let changing_parents = change(parents, count, plan, heard);
    let mut tracker = Tracker::new(children as usize);
    tokio::pin!(changing_parents);
    let mut changing = true;
    let mut changes = 0;
    let mut changing_for = plan.duration;
    let mut drain_until = None;
    let outcome = loop {
        tokio::select! {
            done = &mut changing_parents, if changing => {
                changing = false;
                match done {
                    Ok((made, span)) => {
                        changes = made;
                        changing_for = span;
                        drain_until = Some(Instant::now() + drain);
                    }
                    Err(e) => break Err(e),
                }
            }
            message = hearing.recv() => {
                let Some((message, at)) = message else {
                    break Err(anyhow::anyhow!("the watch on the children ended"));
                };
                tracker.hear(message, at);
            }
            () = tokio::time::sleep(Duration::from_millis(100)), if !changing => {}
        }
        if let Some(until) = drain_until {
            if tracker.pending() == 0 {
                break Ok(());
            }
            if Instant::now() > until {
                break Err(anyhow::anyhow!(
                    "{} of {changes} changes not written within {drain:?} of the last",
                    tracker.pending()
                ));
            }
        }
    };
    watch.abort();
    outcome?;
    #[allow(clippy::cast_precision_loss)] // counts far below 2^52
    let changes_per_second = changes as f64 / changing_for.as_secs_f64();
    let mut latencies = tracker.latencies;
    anyhow::ensure!(!latencies.is_empty(), "no change was timed");
    latencies.sort_unstable();
    Ok(Latency {
        changes,
        changes_per_second,
        p50_seconds: percentile(&latencies, 50.0).as_secs_f64(),
        p99_seconds: percentile(&latencies, 99.0).as_secs_f64(),
        max_seconds: latencies[latencies.len() - 1].as_secs_f64(),
    })
}

/// Change `plan.percent` of the parents each second, in turn; the changes
/// made, and the seconds they took (from the first round to a second after
/// the last began: `plan.duration` when every round kept its second).
async fn change(
    parents: &Api<DynamicObject>,
    count: usize,
    plan: ChurnPlan,
    heard: mpsc::UnboundedSender<(Heard, Instant)>,
) -> anyhow::Result<(usize, Duration)> {
    let started = Instant::now();
    let mut last_round = started;
    let per_round = (count * usize::from(plan.percent)).div_ceil(100).max(1);
    let rounds = plan.duration.as_secs().max(1);
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    // A round that overruns its second delays the next, rather than
    // bunching: the achieved rate is reported.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next = 0;
    for round in 1..=rounds {
        ticks.tick().await;
        last_round = Instant::now();
        let batch: Vec<usize> = (0..per_round).map(|i| (next + i) % count).collect();
        next = (next + per_round) % count;
        futures::stream::iter(batch)
            .map(|parent| {
                let heard = heard.clone();
                async move {
                    let _ = heard.send((Heard::Change { parent, round }, Instant::now()));
                    let patch = json!({"spec": {"value": format!("c{round}")}});
                    parents
                        .patch(
                            &format!("p-{parent:05}"),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await
                }
            })
            .buffer_unordered(32)
            .try_for_each(|_| std::future::ready(Ok(())))
            .await?;
    }
    #[allow(clippy::cast_possible_truncation)] // rounds are seconds of a bench
    Ok((
        per_round * rounds as usize,
        last_round.duration_since(started) + Duration::from_secs(1),
    ))
}

/// Report every child's round as the watch delivers it.
async fn watch_children(
    config_maps: Api<ConfigMap>,
    heard: mpsc::UnboundedSender<(Heard, Instant)>,
) {
    let mut events = std::pin::pin!(watcher(config_maps, watcher::Config::default()));
    while let Some(event) = events.next().await {
        let (watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = (match event {
            Ok(event) => event,
            Err(_) => continue, // the watcher retries by itself
        }) else {
            continue;
        };
        let Some((parent, index)) = cm.metadata.name.as_deref().and_then(child_of) else {
            continue;
        };
        let round = cm
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .and_then(|v| v.strip_prefix('c'))
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        if heard
            .send((
                Heard::Child {
                    parent,
                    index,
                    round,
                },
                Instant::now(),
            ))
            .is_err()
        {
            return;
        }
    }
}

/// `p-00042-1` → (42, 1).
fn child_of(name: &str) -> Option<(usize, usize)> {
    let (parent, index) = name.strip_prefix("p-")?.rsplit_once('-')?;
    Some((parent.parse().ok()?, index.parse().ok()?))
}

/// Changes waiting for their children, and the latencies of those done.
struct Tracker {
    children: usize,
    parents: HashMap<usize, Parent>,
    latencies: Vec<Duration>,
}

struct Parent {
    /// Changes not yet written, oldest first: (round, sent).
    waiting: VecDeque<(u64, Instant)>,
    /// The round each child holds.
    rounds: Vec<u64>,
}

impl Tracker {
    fn new(children: usize) -> Self {
        Self {
            children,
            parents: HashMap::new(),
            latencies: Vec::new(),
        }
    }

    fn hear(&mut self, message: Heard, at: Instant) {
        let children = self.children;
        match message {
            Heard::Change { parent, round } => {
                parent_entry(&mut self.parents, children, parent)
                    .waiting
                    .push_back((round, at));
            }
            Heard::Child {
                parent,
                index,
                round,
            } if index < children => {
                let state = parent_entry(&mut self.parents, children, parent);
                state.rounds[index] = state.rounds[index].max(round);
                let written = state.rounds.iter().copied().min().unwrap_or(0);
                while let Some(&(round, sent)) = state.waiting.front() {
                    if round > written {
                        break;
                    }
                    state.waiting.pop_front();
                    self.latencies.push(at.duration_since(sent));
                }
            }
            Heard::Child { .. } => {}
        }
    }

    fn pending(&self) -> usize {
        self.parents.values().map(|p| p.waiting.len()).sum()
    }
}

/// The state of `parent`, with `children` children.
fn parent_entry(
    parents: &mut HashMap<usize, Parent>,
    children: usize,
    parent: usize,
) -> &mut Parent {
    parents.entry(parent).or_insert_with(|| Parent {
        waiting: VecDeque::new(),
        rounds: vec![0; children],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(parent: usize, round: u64) -> Heard {
        Heard::Change { parent, round }
    }

    fn child_of_parent(parent: usize, index: usize, round: u64) -> Heard {
        Heard::Child {
            parent,
            index,
            round,
        }
    }

    #[test]
    fn a_change_is_written_when_its_last_child_holds_it_or_a_later_round() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut tracker = Tracker::new(2);
        tracker.hear(change(7, 1), at(0));
        let child = |index, round| child_of_parent(7, index, round);
        tracker.hear(child(0, 1), at(10));
        assert_eq!(tracker.pending(), 1, "one child of two");
        tracker.hear(child(1, 1), at(30));
        let ms = Duration::from_millis;
        assert_eq!(tracker.latencies, [ms(30)]);
        // Rounds 2 and 3 in flight: round 2 is written once every child
        // holds 2 or later, round 3 once both hold 3.
        tracker.hear(change(7, 2), at(100));
        tracker.hear(change(7, 3), at(200));
        tracker.hear(child(0, 3), at(250));
        tracker.hear(child(1, 2), at(260));
        assert_eq!(tracker.pending(), 1, "child 0 holds 3, child 1 only 2");
        tracker.hear(child(1, 3), at(300));
        assert_eq!(tracker.pending(), 0);
        assert_eq!(tracker.latencies, [ms(30), ms(160), ms(100)]);
        // A change overtaken before it lands is timed to the newer value.
        tracker.hear(change(7, 4), at(400));
        tracker.hear(change(7, 5), at(450));
        tracker.hear(child(0, 5), at(500));
        tracker.hear(child(1, 5), at(520));
        assert_eq!(tracker.latencies[3..], [ms(120), ms(70)]);
    }

    #[test]
    fn children_of_other_parents_and_old_values_settle_nothing() {
        let mut tracker = Tracker::new(1);
        let now = Instant::now();
        tracker.hear(change(1, 4), now);
        for message in [
            child_of_parent(2, 0, 9),
            child_of_parent(1, 0, 3),
            child_of_parent(1, 5, 9),
        ] {
            tracker.hear(message, now);
        }
        assert_eq!(tracker.pending(), 1);
    }

    #[test]
    fn children_are_named_after_their_parent_and_index() {
        assert_eq!(child_of("p-00042-1"), Some((42, 1)));
        assert_eq!(child_of("other-1"), None);
    }
}
