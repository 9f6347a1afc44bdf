//! One open watch as the hub and its response share it: a bounded queue of the events
//! it has yet to send, its initial items, and whether it was closed.
//!
//! The hub offers every event to every watcher and never waits for one: a watcher
//! whose queue is full (in events or in bytes) is closed at once, its queue and initial
//! items dropped, and its response ends. kube's cacher does the same to a watcher
//! whose buffer is full ("Forcing watcher close due to unresponsiveness"); the client
//! watches again from the last resourceVersion it saw. A watcher still sending its
//! initial items when the store has moved on by more than the history window is
//! closed too: its snapshot (or backlog) would keep objects the history has let go.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::filter::Filter;
use super::initial::Initial;
use super::shared::SharedEvent;
use crate::storage::EventType;

/// How far a watcher may fall behind before it is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Events queued and not yet sent.
    pub events: usize,
    /// Their objects' size as JSON.
    pub bytes: usize,
    /// resourceVersions the store may move on by while the watcher still sends its
    /// initial items (the history window).
    pub history: u64,
}

/// An event queued for a watcher, with the type it has for that watcher.
pub struct Queued {
    /// The event, shared with the other watchers it was offered to.
    pub event: Arc<SharedEvent>,
    /// ADDED, MODIFIED or DELETED, after selector transitions.
    pub kind: EventType,
}

/// What [`Watcher::offer`] did with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Queued for sending.
    Queued,
    /// Not for this watcher (filtered out, or older than where it starts).
    Skipped,
    /// The watcher is closed (now, because its queue was full, or before).
    Closed,
}

/// What the response sends next.
pub enum Next {
    /// A queued event.
    Event(Queued),
    /// Nothing queued; everything up to this resourceVersion was offered.
    Idle(u64),
    /// The watcher was closed: the response ends.
    Closed,
}

/// One open watch.
pub struct Watcher {
    /// What it sees.
    pub filter: Filter,
    /// Events up to this resourceVersion reach it through its initial items.
    after: u64,
    bounds: Bounds,
    state: Mutex<State>,
    wake: Notify,
}

struct State {
    initial: Option<Initial>,
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    /// Whether initial items remain to be sent.
    sending_initial: bool,
    /// The last resourceVersion offered (sent or not for this watcher).
    progress: u64,
    closed: bool,
}

impl Watcher {
    /// A watcher sending `initial` first, then the events after `after` that the hub
    /// offers it; it has been offered everything up to `progress`.
    pub fn new(
        filter: Filter,
        initial: Initial,
        after: u64,
        progress: u64,
        bounds: Bounds,
    ) -> Self {
        Watcher {
            filter,
            after,
            bounds,
            state: Mutex::new(State {
                initial: Some(initial),
                queue: VecDeque::new(),
                queued_bytes: 0,
                sending_initial: true,
                progress: progress.max(after),
                closed: false,
            }),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Offers the next stored event (the hub calls this in resourceVersion order).
    /// A watcher that would fall behind by more than its bounds is closed.
    pub fn offer(&self, shared: &Arc<SharedEvent>) -> Offer {
        let e = &shared.event;
        let kind = (e.rv > self.after)
            .then(|| self.filter.event_type(e))
            .flatten();
        // Measured (once per event) before taking the lock the response needs.
        let size = kind.map_or(0, |_| shared.size());
        let mut s = self.lock();
        if s.closed {
            return Offer::Closed;
        }
        s.progress = s.progress.max(e.rv);
        if s.sending_initial && e.rv.saturating_sub(self.after) > self.bounds.history {
            tracing::warn!(
                prefix = %self.filter.prefix,
                "closing a watch whose initial events outlived the history window"
            );
            s.close();
            drop(s);
            self.wake.notify_one();
            return Offer::Closed;
        }
        let Some(kind) = kind else {
            return Offer::Skipped;
        };
        if s.queue.len() >= self.bounds.events || s.queued_bytes + size > self.bounds.bytes {
            tracing::warn!(
                prefix = %self.filter.prefix,
                queued = s.queue.len(),
                queued_bytes = s.queued_bytes,
                "closing a watch that fell behind (its client does not read fast enough)"
            );
            s.close();
            drop(s);
            self.wake.notify_one();
            return Offer::Closed;
        }
        s.queued_bytes += size;
        s.queue.push_back(Queued {
            event: shared.clone(),
            kind,
        });
        drop(s);
        self.wake.notify_one();
        Offer::Queued
    }

    /// Closes the watcher: what it held is dropped and its response ends.
    pub fn close(&self) {
        self.lock().close();
        self.wake.notify_one();
    }

    /// Takes the initial items to send the next one (None: all sent, or closed).
    /// Give them back with [`Watcher::put_initial`].
    pub fn take_initial(&self) -> Option<Initial> {
        self.lock().initial.take()
    }

    /// Gives the initial items back; dropped if the watcher was closed meanwhile.
    pub fn put_initial(&self, initial: Initial) {
        let mut s = self.lock();
        if !s.closed {
            s.initial = Some(initial);
        }
    }

    /// Notes that the initial items were all sent.
    pub fn finish_initial(&self) {
        self.lock().sending_initial = false;
    }

    /// The next queued event, or why there is none.
    pub fn next(&self) -> Next {
        let mut s = self.lock();
        if s.closed {
            return Next::Closed;
        }
        match s.queue.pop_front() {
            Some(q) => {
                s.queued_bytes -= q.event.size();
                Next::Event(q)
            }
            None => Next::Idle(s.progress),
        }
    }

    /// Whether the watcher was closed.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Resolves after an event was queued or the watcher closed since the last call.
    pub async fn changed(&self) {
        self.wake.notified().await;
    }
}

impl State {
    fn close(&mut self) {
        self.closed = true;
        self.initial = None;
        self.queue = VecDeque::new();
        self.queued_bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::Event;

    fn filter() -> Filter {
        super::super::filter::config_maps_in_default("")
    }

    fn event(rv: u64, key: &str, bytes: usize) -> Arc<SharedEvent> {
        SharedEvent::new(Arc::new(Event {
            rv,
            kind: EventType::Added,
            key: key.into(),
            object: Arc::new(
                json!({ "metadata": { "name": "n" }, "data": { "v": "x".repeat(bytes) } }),
            ),
            previous: None,
        }))
    }

    const ROOMY: Bounds = Bounds {
        events: 100,
        bytes: 1 << 30,
        history: 1000,
    };

    #[test]
    fn events_are_queued_in_order_and_others_only_advance_progress() {
        let w = Watcher::new(filter(), Initial::none(), 5, 5, ROOMY);
        assert_eq!(
            w.offer(&event(4, "/configmaps/default/a", 0)),
            Offer::Skipped,
            "before the start"
        );
        assert_eq!(
            w.offer(&event(6, "/configmaps/default/a", 0)),
            Offer::Queued
        );
        assert_eq!(w.offer(&event(7, "/secrets/default/a", 0)), Offer::Skipped);
        assert_eq!(
            w.offer(&event(8, "/configmaps/default/b", 0)),
            Offer::Queued
        );
        let rvs: Vec<u64> = std::iter::from_fn(|| match w.next() {
            Next::Event(q) => Some(q.event.event.rv),
            _ => None,
        })
        .collect();
        assert_eq!(rvs, [6, 8]);
        assert!(matches!(w.next(), Next::Idle(8)));
    }

    #[test]
    fn a_watcher_that_falls_behind_by_more_than_its_events_is_closed_and_emptied() {
        let bounds = Bounds {
            events: 3,
            bytes: 1 << 30,
            history: 1000,
        };
        let w = Watcher::new(filter(), Initial::none(), 0, 0, bounds);
        let kept = event(1, "/configmaps/default/a", 10);
        for rv in 1..=3 {
            assert_eq!(
                w.offer(&event(rv, "/configmaps/default/a", 10)),
                Offer::Queued
            );
        }
        assert_eq!(w.offer(&kept), Offer::Closed, "the fourth overflows");
        assert!(w.is_closed());
        assert!(matches!(w.next(), Next::Closed));
        assert!(w.take_initial().is_none(), "initial items dropped");
        assert_eq!(Arc::strong_count(&kept), 1, "nothing of the queue is held");
        assert_eq!(
            w.offer(&event(9, "/configmaps/default/a", 1)),
            Offer::Closed
        );
    }

    #[test]
    fn a_watcher_that_falls_behind_by_more_than_its_bytes_is_closed() {
        let bounds = Bounds {
            events: 100,
            bytes: 10_000,
            history: 1000,
        };
        let w = Watcher::new(filter(), Initial::none(), 0, 0, bounds);
        assert_eq!(
            w.offer(&event(1, "/configmaps/default/a", 6_000)),
            Offer::Queued
        );
        // Sent: its bytes no longer count.
        assert!(matches!(w.next(), Next::Event(_)));
        assert_eq!(
            w.offer(&event(2, "/configmaps/default/a", 6_000)),
            Offer::Queued
        );
        assert_eq!(
            w.offer(&event(3, "/configmaps/default/a", 6_000)),
            Offer::Closed
        );
    }

    #[test]
    fn a_watcher_still_sending_its_initial_items_after_the_history_window_is_closed() {
        let bounds = Bounds {
            history: 10,
            ..ROOMY
        };
        let sending = Watcher::new(filter(), Initial::none(), 100, 100, bounds);
        let done = Watcher::new(filter(), Initial::none(), 100, 100, bounds);
        done.finish_initial();
        for w in [&sending, &done] {
            assert_eq!(
                w.offer(&event(110, "/secrets/default/a", 0)),
                Offer::Skipped
            );
        }
        let later = event(111, "/secrets/default/a", 0);
        assert_eq!(sending.offer(&later), Offer::Closed);
        assert_eq!(
            done.offer(&later),
            Offer::Skipped,
            "its initial items were sent"
        );
    }

    #[test]
    fn initial_items_given_back_after_a_close_are_dropped() {
        let w = Watcher::new(filter(), Initial::none(), 0, 0, ROOMY);
        let initial = w.take_initial().expect("initial items");
        w.close();
        w.put_initial(initial);
        assert!(w.take_initial().is_none());
    }
}
