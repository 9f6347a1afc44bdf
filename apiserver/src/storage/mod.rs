//! Object storage: an in-memory map of JSON objects keyed by
//! `group/plural/namespace/name`, a global monotonic resourceVersion, a bounded
//! event history for watches, and an optional durable redb backend.
//!
//! All writes go through [`Store::commit`], which runs a closure under the store
//! lock (so read-check-write is atomic), assigns resourceVersions, makes the writes
//! durable, then publishes watch events.

mod durable;

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

pub use durable::{DurableError, STORE_FILE};

/// Watch event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Clone, Debug)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Type.
    pub kind: EventType,
    /// Storage key.
    pub key: String,
    /// The object after the change (for deletes: the last state, with the delete's RV).
    pub object: Arc<Value>,
    /// The object before the change (None for Added).
    pub previous: Option<Arc<Value>>,
}

/// A commit's result: the closure's value and the events written.
pub type Committed<T> = (T, Vec<Arc<Event>>);

/// The stored objects by key: a persistent map, so a snapshot is a cheap clone that
/// shares its nodes and objects with the store (watches stream their initial events
/// from one).
pub type Objects = imbl::OrdMap<String, Arc<Value>>;

/// A write requested by a [`Store::commit`] closure.
#[derive(Clone, Debug)]
pub enum Write {
    /// Store this object (its resourceVersion is set by the store).
    Put(String, Value),
    /// Remove the object at this key.
    Delete(String),
    /// Remove the object at this key; the DELETED event carries this final state
    /// (e.g. the update that removed the last finalizer).
    DeleteAs(String, Value),
}

/// Read access to the current state inside a commit.
pub struct View<'a> {
    state: &'a State,
}

impl View<'_> {
    /// The object at `key`.
    pub fn get(&self, key: &str) -> Option<&Arc<Value>> {
        self.state.objects.get(key)
    }

    /// All objects whose key starts with `prefix`.
    pub fn list(&self, prefix: &str) -> Vec<(String, Arc<Value>)> {
        self.state.range(prefix, None)
    }

    /// The current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.state.rv
    }
}

struct State {
    objects: Objects,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    /// Watches from a resourceVersion below this get 410 Gone.
    oldest_watchable: u64,
}

impl State {
    fn range(&self, prefix: &str, after: Option<&str>) -> Vec<(String, Arc<Value>)> {
        use std::ops::Bound;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        self.objects
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Largest stored object, as JSON: etcd's default request limit (1.5 MiB).
pub const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024 / 2;

/// Errors of [`Store::open`] and commits.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An object is larger than [`MAX_OBJECT_BYTES`] (etcd's message).
    #[error("etcdserver: request is too large")]
    TooLarge,
    /// The durable backend failed.
    #[error("storage: {0}")]
    Durable(#[from] DurableError),
}

/// The object store.
pub struct Store {
    state: Mutex<State>,
    durable: Option<durable::Durable>,
    events: broadcast::Sender<Arc<Event>>,
    history_limit: usize,
}

impl Store {
    /// An in-memory store, or a durable one when `data_dir` is given (loading its content).
    pub fn open(data_dir: Option<&Path>, history_limit: usize) -> Result<Store, StoreError> {
        let (durable, objects, rv) = match data_dir {
            Some(dir) => {
                let (d, objects, rv) = durable::Durable::open(dir)?;
                (Some(d), objects, rv)
            }
            None => (None, BTreeMap::new(), 0),
        };
        let (events, _) = broadcast::channel(history_limit.clamp(1024, 1 << 16));
        Ok(Store {
            state: Mutex::new(State {
                objects: objects.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
                rv,
                history: VecDeque::new(),
                oldest_watchable: rv,
            }),
            durable,
            events,
            history_limit: history_limit.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether writes go to disk (callers then run commits off the async executor).
    pub fn is_durable(&self) -> bool {
        self.durable.is_some()
    }

    /// The object at `key`.
    pub fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.lock().objects.get(key).cloned()
    }

    /// Objects under `prefix` (after key `after`), and the current resourceVersion.
    pub fn list(&self, prefix: &str, after: Option<&str>) -> (Vec<(String, Arc<Value>)>, u64) {
        let s = self.lock();
        (s.range(prefix, after), s.rv)
    }

    /// The current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.lock().rv
    }

    /// Objects under `prefix` (after key `after`) as they were at resourceVersion `rv`,
    /// rebuilt from the retained history; `Err(oldest)` when `rv` is older than it.
    pub fn list_at(
        &self,
        prefix: &str,
        after: Option<&str>,
        rv: u64,
    ) -> Result<Vec<(String, Arc<Value>)>, u64> {
        let s = self.lock();
        if rv < s.oldest_watchable {
            return Err(s.oldest_watchable);
        }
        let current = s.range(prefix, after);
        if rv >= s.rv {
            return Ok(current);
        }
        // Newest to oldest: the last override of a key is its state at `rv`.
        let mut at_rv: BTreeMap<String, Option<Arc<Value>>> = BTreeMap::new();
        for e in s.history.iter().rev().take_while(|e| e.rv > rv) {
            let in_range = e.key.starts_with(prefix) && after.is_none_or(|a| e.key.as_str() > a);
            if in_range {
                at_rv.insert(e.key.clone(), e.previous.clone());
            }
        }
        let mut merged: BTreeMap<String, Arc<Value>> = current.into_iter().collect();
        for (k, v) in at_rv {
            match v {
                Some(obj) => merged.insert(k, obj),
                None => merged.remove(&k),
            };
        }
        Ok(merged.into_iter().collect())
    }

    /// The oldest resourceVersion a watch or continue token may start from.
    pub fn oldest_watchable(&self) -> u64 {
        self.lock().oldest_watchable
    }

    /// Runs `f` under the store lock; applies the writes it returns atomically
    /// (durably first, when durable), assigning consecutive resourceVersions, and
    /// publishes the events. Returns `f`'s value and the stored objects, in order.
    /// Blocks on disk I/O when durable: call from a blocking context then.
    pub fn commit<T, E>(
        &self,
        f: impl FnOnce(&View<'_>) -> Result<(T, Vec<Write>), E>,
    ) -> Result<Result<Committed<T>, E>, StoreError> {
        let mut s = self.lock();
        let (out, writes) = match f(&View { state: &s }) {
            Ok(x) => x,
            Err(e) => return Ok(Err(e)),
        };
        if writes.is_empty() {
            return Ok(Ok((out, vec![])));
        }
        if writes.iter().any(|w| match w {
            Write::Put(_, obj) | Write::DeleteAs(_, obj) => json_len(obj) > MAX_OBJECT_BYTES,
            Write::Delete(_) => false,
        }) {
            return Err(StoreError::TooLarge);
        }
        let mut rv = s.rv;
        let mut events = Vec::with_capacity(writes.len());
        for w in writes {
            rv += 1;
            match w {
                Write::Put(key, mut obj) => {
                    set_rv(&mut obj, rv);
                    let previous = s.objects.get(&key).cloned();
                    let kind = if previous.is_some() {
                        EventType::Modified
                    } else {
                        EventType::Added
                    };
                    events.push(Event {
                        rv,
                        kind,
                        key,
                        object: Arc::new(obj),
                        previous,
                    });
                }
                Write::Delete(key) | Write::DeleteAs(key, _) if !s.objects.contains_key(&key) => {
                    rv -= 1;
                }
                Write::Delete(key) => {
                    let prev = s.objects.get(&key).cloned().expect("checked above");
                    let mut obj = (*prev).clone();
                    set_rv(&mut obj, rv);
                    events.push(Event {
                        rv,
                        kind: EventType::Deleted,
                        key,
                        object: Arc::new(obj),
                        previous: Some(prev),
                    });
                }
                Write::DeleteAs(key, mut obj) => {
                    let prev = s.objects.get(&key).cloned().expect("checked above");
                    set_rv(&mut obj, rv);
                    events.push(Event {
                        rv,
                        kind: EventType::Deleted,
                        key,
                        object: Arc::new(obj),
                        previous: Some(prev),
                    });
                }
            }
        }
        if let Some(d) = &self.durable {
            d.write(&events, rv)?;
        }
        s.rv = rv;
        let mut published = Vec::with_capacity(events.len());
        for e in events {
            match e.kind {
                EventType::Deleted => {
                    s.objects.remove(&e.key);
                }
                _ => {
                    s.objects.insert(e.key.clone(), e.object.clone());
                }
            }
            let e = Arc::new(e);
            s.history.push_back(e.clone());
            while s.history.len() > self.history_limit {
                if let Some(old) = s.history.pop_front() {
                    s.oldest_watchable = old.rv;
                }
            }
            // No receivers is fine.
            let _ = self.events.send(e.clone());
            published.push(e);
        }
        Ok(Ok((out, published)))
    }

    /// The retained events after `after` up to `until` (inclusive), oldest first;
    /// `Err(oldest)` when `after` is older than the retained history.
    pub fn events_between(&self, after: u64, until: u64) -> Result<Vec<Arc<Event>>, u64> {
        let s = self.lock();
        if after < s.oldest_watchable {
            return Err(s.oldest_watchable);
        }
        let first = s.history.partition_point(|e| e.rv <= after);
        Ok(s.history
            .range(first..)
            .take_while(|e| e.rv <= until)
            .cloned()
            .collect())
    }

    /// All objects and the resourceVersion they are at, in O(1): the snapshot shares
    /// the store's nodes until the store changes them.
    pub fn snapshot(&self) -> (Objects, u64) {
        let s = self.lock();
        (s.objects.clone(), s.rv)
    }

    /// Live events only (for background controllers).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }
}

/// The length of `obj` as JSON, without building the text.
pub fn json_len(obj: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, obj);
    count.0
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}
