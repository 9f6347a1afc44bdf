//! The hub: every open watch registered in one place, the cap on how many may be open,
//! and the one task that offers each stored event to all of them (kube's cacher).
//!
//! The task never waits for a watch: [`Watcher::offer`] queues or closes. It encodes
//! nothing either; each event is wrapped once in a [`SharedEvent`] whose lines the
//! watches encode once and share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, broadcast};

use super::filter::Filter;
use super::initial::Initial;
use super::shared::SharedEvent;
use super::watcher::{Bounds, Offer, Watcher};
use crate::app::App;
use crate::storage::{Event, Store};

/// All open watches.
pub struct Hub {
    registry: Mutex<Registry>,
    slots: Arc<Semaphore>,
    bounds: Bounds,
}

struct Registry {
    open: HashMap<u64, Arc<Watcher>>,
    next_id: u64,
    /// The last resourceVersion offered to the open watches.
    dispatched: u64,
}

/// A place for one more open watch, held for as long as the watch is open.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

/// Where a new watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// From a snapshot of the store, sent as ADDED events; `end_bookmark`: then a
    /// bookmark marking their end (`sendInitialEvents`).
    Snapshot {
        /// Send the `k8s.io/initial-events-end` bookmark.
        end_bookmark: bool,
    },
    /// From the events after this resourceVersion.
    After(u64),
}

/// The resourceVersion a watch asked for is older than the retained history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("too old resource version (the oldest retained is {oldest})")]
pub struct TooOld {
    /// The oldest resourceVersion a watch may still start from.
    pub oldest: u64,
}

/// An open watch; it leaves the hub (and frees its slot) when dropped.
pub struct Registration {
    hub: Arc<Hub>,
    id: u64,
    /// The watch's state shared with the hub.
    pub watcher: Arc<Watcher>,
    _slot: Slot,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.lock().open.remove(&self.id);
        self.watcher.close();
    }
}

impl Hub {
    /// A hub for at most `max_watches` open watches, each closed when it falls behind
    /// by more than `bounds`.
    pub fn new(max_watches: usize, bounds: Bounds) -> Hub {
        Hub {
            registry: Mutex::new(Registry {
                open: HashMap::new(),
                next_id: 0,
                dispatched: 0,
            }),
            slots: Arc::new(Semaphore::new(max_watches)),
            bounds,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A slot for one more watch; None when `max_watches` are open.
    pub fn slot(&self) -> Option<Slot> {
        let permit = self.slots.clone().try_acquire_owned().ok()?;
        Some(Slot { _permit: permit })
    }

    /// The number of watches the hub offers events to.
    pub fn open_watches(&self) -> usize {
        self.lock().open.len()
    }

    /// Sets where dispatching starts: the store's resourceVersion when the hub's task
    /// subscribed to it (see [`run`]).
    pub fn start_at(&self, rv: u64) {
        self.lock().dispatched = rv;
    }

    /// Opens a watch of `filter` from `start`. Events the hub already offered to the
    /// others since then come from the store's history.
    pub fn register(
        self: &Arc<Self>,
        store: &Store,
        filter: Filter,
        start: Start,
        slot: Slot,
    ) -> Result<Registration, TooOld> {
        // Under the registry lock no event is dispatched: the watch starts exactly
        // after `dispatched`.
        let mut registry = self.lock();
        let dispatched = registry.dispatched;
        let (initial, after) = match start {
            Start::Snapshot { end_bookmark } => {
                let (objects, rv) = store.snapshot();
                (
                    Initial::snapshot(objects, &filter.prefix, rv, end_bookmark),
                    rv,
                )
            }
            Start::After(rv) => (Initial::none(), rv),
        };
        let missed = store
            .events_between(after, dispatched.max(after))
            .map_err(|oldest| TooOld { oldest })?;
        let initial = initial.then_events(missed);
        let watcher = Arc::new(Watcher::new(
            filter,
            initial,
            after,
            dispatched,
            self.bounds,
        ));
        let id = registry.next_id;
        registry.next_id += 1;
        registry.open.insert(id, watcher.clone());
        Ok(Registration {
            hub: self.clone(),
            id,
            watcher,
            _slot: slot,
        })
    }

    /// Offers one stored event to every open watch; drops the watches it closed.
    pub fn dispatch(&self, event: &Arc<Event>) {
        let mut registry = self.lock();
        if event.rv <= registry.dispatched {
            return;
        }
        registry.dispatched = event.rv;
        if registry.open.is_empty() {
            return;
        }
        let shared = SharedEvent::new(event.clone());
        registry
            .open
            .retain(|_, w| w.offer(&shared) != Offer::Closed);
    }

    /// After missing live events: offers them from the store's history, or, when they
    /// are gone from it too, closes every watch (their clients watch again).
    fn catch_up(&self, store: &Store) {
        let dispatched = self.lock().dispatched;
        if let Ok(events) = store.events_between(dispatched, store.rv()) {
            for e in &events {
                self.dispatch(e);
            }
        } else {
            tracing::warn!("watch events were lost: closing every watch");
            let mut registry = self.lock();
            registry.dispatched = store.rv();
            for (_, w) in registry.open.drain() {
                w.close();
            }
        }
    }

    /// Closes every open watch.
    pub fn close_all(&self) {
        for (_, w) in self.lock().open.drain() {
            w.close();
        }
    }
}

/// The hub's task: offers each event of `live` (a subscription taken before
/// [`Hub::start_at`]) to the open watches until the server stops.
pub async fn run(
    app: Arc<App>,
    mut live: broadcast::Receiver<Arc<Event>>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            e = live.recv() => match e {
                Ok(e) => app.watches.dispatch(&e),
                Err(broadcast::error::RecvError::Lagged(_)) => app.watches.catch_up(&app.store),
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = stop.changed() => break,
        }
    }
    app.watches.close_all();
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::storage::Write;
    use crate::watch::initial::Item;
    use crate::watch::watcher::Next;

    fn filter() -> Filter {
        super::super::filter::config_maps_in_default("")
    }

    fn put(store: &Store, name: &str) -> Arc<Event> {
        let obj = json!({ "metadata": { "name": name } });
        let key = format!("/configmaps/default/{name}");
        let ((), mut events) = store
            .commit(|_| Ok::<_, ()>(((), vec![Write::Put(key, obj)])))
            .unwrap()
            .unwrap();
        events.pop().unwrap()
    }

    const BOUNDS: Bounds = Bounds {
        events: 2,
        bytes: 1 << 20,
        history: 100,
    };

    fn queued(w: &Watcher) -> Vec<u64> {
        std::iter::from_fn(|| match w.next() {
            Next::Event(q) => Some(q.event.event.rv),
            _ => None,
        })
        .collect()
    }

    #[test]
    fn at_most_max_watches_hold_a_slot() {
        let hub = Hub::new(2, BOUNDS);
        let (a, b) = (hub.slot().unwrap(), hub.slot().unwrap());
        assert!(hub.slot().is_none(), "the third is refused");
        drop(a);
        assert!(hub.slot().is_some(), "a closed watch frees its slot");
        drop(b);
    }

    #[test]
    fn a_watch_gets_the_events_the_hub_dispatched_before_it_registered() {
        let store = Store::open(None, 100).unwrap();
        let hub = Arc::new(Hub::new(10, BOUNDS));
        hub.start_at(store.rv());
        let first = put(&store, "a");
        let second = put(&store, "b");
        // The hub has offered both before a watch from `first` registers: the second
        // reaches it from the history, then live events from the hub.
        hub.dispatch(&first);
        hub.dispatch(&second);
        let reg = hub
            .register(
                &store,
                filter(),
                Start::After(first.rv),
                hub.slot().unwrap(),
            )
            .unwrap();
        let third = put(&store, "c");
        hub.dispatch(&third);
        hub.dispatch(&third); // offered twice (a catch-up): sent once
        let mut initial = reg.watcher.take_initial().unwrap();
        let from_history: Vec<u64> = std::iter::from_fn(|| initial.next(&reg.watcher.filter))
            .map(|i| match i {
                Item::Event(e) => e.rv,
                _ => panic!("only events"),
            })
            .collect();
        assert_eq!(from_history, [second.rv]);
        assert_eq!(queued(&reg.watcher), [third.rv]);
    }

    #[test]
    fn a_watch_from_before_the_history_is_too_old() {
        let store = Store::open(None, 2).unwrap();
        let hub = Arc::new(Hub::new(10, BOUNDS));
        let start = store.rv();
        hub.start_at(start);
        for name in ["a", "b", "c", "d"] {
            hub.dispatch(&put(&store, name));
        }
        let r = hub.register(&store, filter(), Start::After(start), hub.slot().unwrap());
        assert!(matches!(r, Err(TooOld { .. })));
        assert_eq!(hub.open_watches(), 0);
    }

    #[test]
    fn a_slow_watch_is_closed_and_dropped_while_others_go_on() {
        let store = Store::open(None, 100).unwrap();
        let hub = Arc::new(Hub::new(10, BOUNDS));
        hub.start_at(store.rv());
        let slow = hub
            .register(
                &store,
                filter(),
                Start::After(store.rv()),
                hub.slot().unwrap(),
            )
            .unwrap();
        let fast = hub
            .register(
                &store,
                filter(),
                Start::After(store.rv()),
                hub.slot().unwrap(),
            )
            .unwrap();
        let mut sent = vec![];
        for name in ["a", "b", "c", "d"] {
            let e = put(&store, name);
            hub.dispatch(&e);
            sent.push(e.rv);
            assert_eq!(queued(&fast.watcher), [e.rv], "the fast one reads each");
        }
        assert!(
            slow.watcher.is_closed(),
            "the slow one fell more than 2 events behind"
        );
        assert!(matches!(slow.watcher.next(), Next::Closed));
        assert_eq!(hub.open_watches(), 1);
        drop(fast);
        assert_eq!(hub.open_watches(), 0);
    }

    #[test]
    fn a_snapshot_watch_starts_at_the_store_and_ends_its_initial_events_with_a_bookmark() {
        let store = Store::open(None, 100).unwrap();
        let hub = Arc::new(Hub::new(10, BOUNDS));
        hub.start_at(store.rv());
        let a = put(&store, "a");
        let reg = hub
            .register(
                &store,
                filter(),
                Start::Snapshot { end_bookmark: true },
                hub.slot().unwrap(),
            )
            .unwrap();
        // The hub offers `a` late (it lags the store): the snapshot already has it.
        hub.dispatch(&a);
        let b = put(&store, "b");
        hub.dispatch(&b);
        let mut initial = reg.watcher.take_initial().unwrap();
        let items: Vec<String> = std::iter::from_fn(|| initial.next(&reg.watcher.filter))
            .map(|i| match i {
                Item::Object(o) => o["metadata"]["name"].as_str().unwrap().to_string(),
                Item::EndBookmark(rv) => format!("bookmark {rv}"),
                Item::Event(e) => format!("event {}", e.rv),
            })
            .collect();
        assert_eq!(items, ["a".to_string(), format!("bookmark {}", a.rv)]);
        assert_eq!(queued(&reg.watcher), [b.rv]);
    }
}
