//! Watches, bounded as kube-apiserver's watch cache bounds them.
//!
//! Start with [`hub`]: every open watch is registered there, at most
//! `Config::max_watches` at once, and one task offers each stored event to all of
//! them. Each watch ([`watcher`]) has a bounded queue; one that falls behind by more
//! than `Config::watch_buffer` events or `Config::watch_buffer_bytes` bytes is closed,
//! as kube's cacher closes an unresponsive watcher, and its client watches again from
//! its last resourceVersion (the history has the events it missed, or it gets 410).
//!
//! Nothing is encoded per watch that can be shared: an event's lines ([`encode`]) are
//! encoded once per form and type and shared by every watch sending them
//! ([`shared`]). The initial events ([`initial`]) are streamed from an O(1) snapshot
//! of the store, one object at a time as the client reads ([`stream`]).

pub mod encode;
pub mod filter;
pub mod hub;
pub mod initial;
pub mod shared;
pub mod stream;
pub mod watcher;

pub use hub::{Hub, Registration, Slot, Start, TooOld, run};
pub use watcher::Bounds;
