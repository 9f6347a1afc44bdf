//! A watch's response body: its lines, produced one at a time as the client reads
//! them. Initial items first, then queued events; a BOOKMARK when idle (with
//! `allowWatchBookmarks`); the body ends at `timeoutSeconds`, when the server stops,
//! or when the hub closed the watch.

use std::time::Duration;

use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::encode::{Form, Format, error_line};
use super::hub::Registration;
use super::initial::Item;
use super::watcher::Next;

/// Converts a stored object to the watch's version (a CRD's conversion webhook); the
/// error is the Status of an ERROR event, after which the watch ends.
pub type Convert = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, Value>> + Send + Sync>;

/// The per-watch settings of a response.
pub struct Options {
    /// How events are encoded.
    pub format: Format,
    /// Send BOOKMARKs (`allowWatchBookmarks`).
    pub bookmarks: bool,
    /// How often an idle watch gets a BOOKMARK.
    pub bookmark_every: Duration,
    /// End after this long (`timeoutSeconds`).
    pub timeout: Option<Duration>,
    /// Becomes true when the server shuts down.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// Converts each object first (None: stored objects are at the watch's version,
    /// or need only [`Format`]'s relabelling).
    pub convert: Option<Convert>,
}

struct Session {
    reg: Registration,
    format: Format,
    bookmarks: bool,
    ticker: Interval,
    deadline: Option<Instant>,
    stop: tokio::sync::watch::Receiver<bool>,
    initial_done: bool,
    /// Whether a Table's column definitions were sent (only the first Table has them).
    columns_sent: bool,
    convert: Option<Convert>,
}

/// The lines of a registered watch; the watch leaves the hub when the stream ends or
/// is dropped (the client went away).
pub fn lines(reg: Registration, o: Options) -> impl Stream<Item = std::io::Result<Bytes>> {
    let mut ticker = tokio::time::interval_at(Instant::now() + o.bookmark_every, o.bookmark_every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let session = Session {
        reg,
        format: o.format,
        bookmarks: o.bookmarks,
        ticker,
        deadline: o.timeout.map(|t| Instant::now() + t),
        stop: o.stop,
        initial_done: false,
        columns_sent: false,
        convert: o.convert,
    };
    futures::stream::unfold(session, |mut s| async move {
        s.next_line().await.map(|line| (Ok(line), s))
    })
}

impl Session {
    /// Whether this line is the watch's first Table (with column definitions).
    fn columns(&mut self) -> bool {
        let first = matches!(self.format.form, Form::Table(_)) && !self.columns_sent;
        self.columns_sent = true;
        first
    }

    fn ended(&self) -> bool {
        *self.stop.borrow() || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// The line of a converting watch's object (an ERROR line when conversion fails).
    async fn converted_line(
        &mut self,
        convert: &Convert,
        kind: crate::storage::EventType,
        obj: &Value,
    ) -> Bytes {
        match convert(obj.clone()).await {
            Ok(obj) => {
                let columns = self.columns();
                self.format.object_line(kind, &obj, columns)
            }
            Err(status) => {
                // The ERROR event is the last line: the watch ends now.
                self.deadline = Some(Instant::now());
                error_line(&status)
            }
        }
    }

    /// The next initial line; None when the initial items are all sent.
    async fn next_initial(&mut self) -> Option<Bytes> {
        loop {
            let watcher = &self.reg.watcher;
            let mut initial = watcher.take_initial()?;
            let item = initial.next(&watcher.filter)?;
            watcher.put_initial(initial);
            if let Some(convert) = self.convert.clone() {
                let found = match &item {
                    Item::Object(obj) => Some((crate::storage::EventType::Added, obj.clone())),
                    Item::Event(e) => match watcher.filter.event_type(e) {
                        Some(kind) => Some((kind, e.object.clone())),
                        None => continue,
                    },
                    Item::EndBookmark(_) => None,
                };
                if let Some((kind, obj)) = found {
                    return Some(self.converted_line(&convert, kind, &obj).await);
                }
            }
            let line = match item {
                Item::Object(obj) => {
                    let columns = self.columns();
                    self.format
                        .object_line(crate::storage::EventType::Added, &obj, columns)
                }
                Item::EndBookmark(rv) => self.format.bookmark_line(rv, true),
                Item::Event(e) => match watcher.filter.event_type(&e) {
                    Some(kind) => {
                        let columns = self.columns();
                        self.format.object_line(kind, &e.object, columns)
                    }
                    None => continue,
                },
            };
            return Some(line);
        }
    }

    async fn next_line(&mut self) -> Option<Bytes> {
        loop {
            if self.ended() {
                return None;
            }
            if !self.initial_done {
                if let Some(line) = self.next_initial().await {
                    return Some(line);
                }
                self.initial_done = true;
                self.reg.watcher.finish_initial();
            }
            match self.reg.watcher.next() {
                Next::Closed => return None,
                Next::Event(q) => {
                    if let Some(convert) = self.convert.clone() {
                        let obj = q.event.event.object.clone();
                        return Some(self.converted_line(&convert, q.kind, &obj).await);
                    }
                    let columns = self.columns();
                    return Some(q.event.line(&self.format, q.kind, columns));
                }
                Next::Idle(progress) => {
                    let deadline = self.deadline;
                    let until_deadline = async move {
                        match deadline {
                            Some(d) => tokio::time::sleep_until(d).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = self.reg.watcher.changed() => {}
                        _ = self.ticker.tick() => {
                            if self.bookmarks {
                                return Some(self.format.bookmark_line(progress, false));
                            }
                        }
                        () = until_deadline => return None,
                        _ = self.stop.changed() => return None,
                    }
                }
            }
        }
    }
}
