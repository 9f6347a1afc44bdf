//! One reconcile of one parent: its trigger and finalizer, the settle
//! loop (request → plugin → guardrails → children), status, events, the
//! ledger updated; and the error policy with backoff.

use std::sync::Arc;
use std::time::Duration;

use kube::Resource;
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType as KubeEventType;
use kube::runtime::reflector::ObjectRef;
use tracing::Instrument;

use super::cached::CachedObject;
use super::children::Written;
use super::context::{BindingContext, object_key};
use super::events::{publish, publish_plugin_events};
use super::ledger::Queued;
use super::report::{Change, Changes};
use super::settle::{Settled, settle};
use super::status::{self, Outcome};
use super::{ReconcileError, finalizer};

/// Reconcile `parent`, bounded by the operator's per-reconcile timeout.
///
/// The reconcile runs as a task of its own, and kube-runtime's runner holds
/// only its outcome: the runner polls every future it holds whenever any of
/// them wakes, so a reconcile run inside it would wake it at each of its
/// API calls, and each wake would poll every parent waiting for a slot.
pub(crate) async fn reconcile(
    parent: Arc<CachedObject>,
    ctx: Arc<BindingContext>,
) -> Result<Action, ReconcileError> {
    let (outcome, received) = futures::channel::oneshot::channel();
    let task = tokio::spawn(
        async move {
            let _ = outcome.send(wait_and_run(parent, ctx).await);
        }
        .in_current_span(),
    );
    // The runner drops what it holds when the controller stops.
    let _abort = AbortOnDrop(task.abort_handle());
    // Dropped unsent: the task panicked.
    received.await.unwrap_or(Err(ReconcileError::Panicked))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Wait for a slot of the binding and one of the operator, then run.
async fn wait_and_run(
    parent: Arc<CachedObject>,
    ctx: Arc<BindingContext>,
) -> Result<Action, ReconcileError> {
    let key = object_key(parent.as_ref());
    if !ctx.shared.leading() || !ctx.shared.options.shard.owns(&key) {
        return Ok(Action::await_change());
    }
    // While it waits, the parent's changes need not reach kube-runtime's
    // runner: the reconcile reads the parent once its slot is free.
    let waiting = ctx.ledgers.queue(key);
    let queued = ctx.shared.metrics.queued(&ctx.name);
    // A slot of the binding, then one of the operator: both semaphores are
    // fair, so parents are served in the order they became due, as
    // controller-runtime's work queue serves them.
    let _slot = ctx
        .slots
        .acquire()
        .await
        .map_err(|_| ReconcileError::ShuttingDown)?;
    let _permit = ctx
        .shared
        .reconciles
        .acquire()
        .await
        .map_err(|_| ReconcileError::ShuttingDown)?;
    drop(queued);
    // Boxed: a reconcile waiting for its slot holds only the few words
    // above, not the state of a whole reconcile (hundreds may wait).
    Box::pin(run(parent, &ctx, waiting)).await
}

/// Run the reconcile of `parent`, its slots taken.
async fn run(
    parent: Arc<CachedObject>,
    ctx: &BindingContext,
    waiting: Queued<'_>,
) -> Result<Action, ReconcileError> {
    let timeout = ctx.shared.options.reconcile_timeout;
    let metrics = &ctx.shared.metrics;
    let _in_flight = ctx.start_reconcile();
    // Changes from here on are held for this reconcile's end; those before
    // are in the cache it reads now.
    let reconciling = waiting.begin();
    // The parent as the cache holds it now: it may have changed while this
    // reconcile waited for its slot. (Gone from the cache: the copy it was
    // due with.)
    let reference = ObjectRef::from_obj_with(parent.as_ref(), ctx.parent.resource.clone());
    let parent = ctx.parents.get(&reference).unwrap_or(parent);
    // Parsed once a reconcile may run: queued ones hold only the cache's copy.
    let parent = parent.to_object(&ctx.parent.resource);
    let _running = metrics.running(&ctx.name);
    let started = std::time::Instant::now();
    let key = object_key(&parent);
    let span = tracing::info_span!(
        "reconcile",
        binding = %ctx.name,
        object = %key,
        trace_id = tracing::field::Empty,
    );
    crate::telemetry::record_trace_id(&span);
    let mut written = Written::new(ctx.ledgers.applied_intents(&key));
    let inner = reconcile_inner(&parent, ctx, &mut written).instrument(span);
    let result = match tokio::time::timeout(timeout, inner).await {
        Ok(result) => result,
        Err(_) => Err(ReconcileError::Timeout(timeout)),
    };
    // What the children's writes left, whether the reconcile succeeded,
    // failed or ran out of time, before the changes it held are judged.
    ctx.ledgers.record_children(&key, written.report());
    // A change that came meanwhile and was not this reconcile's own write:
    // again at once (after a failure, `error_policy` sees to that).
    let result = match (reconciling.end(), result) {
        (true, Ok(_)) => Ok(Action::requeue(Duration::ZERO)),
        (_, result) => result,
    };
    ctx.shared
        .metrics
        .record_reconcile(&ctx.name, started.elapsed(), result.is_ok());
    if result.is_ok() {
        ctx.ledgers.succeeded(&key);
    }
    result
}

async fn reconcile_inner(
    parent: &DynamicObject,
    ctx: &BindingContext,
    written: &mut Written,
) -> Result<Action, ReconcileError> {
    let current = ctx.current();
    let spec = &current.spec;
    let key = object_key(parent);
    let version = parent.metadata.resource_version.clone().unwrap_or_default();
    let trigger = ctx
        .ledgers
        .take_trigger(&key, &version, current.plugin.digest());
    tracing::debug!(binding = %ctx.name, parent = %key, %version, ?trigger, "reconcile trigger");
    let deleting = parent.meta().deletion_timestamp.is_some();
    let finalizer_name = spec.finalizer();
    match entry(
        deleting,
        spec.finalize,
        finalizer::has(parent, &finalizer_name),
    ) {
        Entry::Forget => {
            // Garbage collection removes the children through their owner references.
            ctx.ledgers.forget(&key);
            return Ok(Action::await_change());
        }
        Entry::AddFinalizer => {
            finalizer::add(ctx, parent, &finalizer_name).await?;
            // The update triggers the next reconcile, which sees the finalizer.
            return Ok(Action::await_change());
        }
        Entry::RemoveFinalizer => {
            finalizer::release(ctx, parent, &finalizer_name, "no longer finalizes").await?;
            return Ok(Action::await_change());
        }
        Entry::CallPlugin => {}
    }
    if !ctx.caches_ready(Duration::from_secs(30)).await {
        return Err(ReconcileError::CachesNotReady);
    }

    let Settled { response, events } = match settle(ctx, parent, &current, trigger, written).await {
        Ok(answer) => answer,
        Err(error) => return fail(ctx, parent, current.plugin.digest(), error).await,
    };
    publish_plugin_events(ctx, parent, &events).await;
    let mut status_written = false;
    if ctx.parent.has_status {
        status_written = status::write_status(
            ctx,
            parent,
            Outcome {
                plugin_status: response.status.clone(),
                conditions: &response.conditions,
                synced: status::synced(),
                observed: true,
                digest: current.plugin.digest(),
            },
        )
        .instrument(tracing::info_span!("status"))
        .await?;
    } else {
        warn_no_status(ctx, parent).await;
    }
    report(ctx, parent, &written.changes, status_written).await;
    if deleting && response.finalized {
        finalizer::remove(ctx, parent, &finalizer_name).await?;
        ctx.ledgers.forget(&key);
        return Ok(Action::await_change());
    }
    ctx.ledgers
        .request_requeue(&key, response.requeue_after.is_some());
    Ok(match requeue_delay(response.requeue_after, spec.resync()) {
        Some(delay) => Action::requeue(delay),
        None => Action::await_change(),
    })
}

/// How a reconcile begins, from the parent's deletion and finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// The parent is going and the plugin has nothing to finalize: forget
    /// it (garbage collection takes its children).
    Forget,
    /// A finalizing binding's parent without its finalizer: add it first.
    AddFinalizer,
    /// The binding no longer finalizes, but the parent holds its
    /// finalizer, which nothing would ever remove: remove it.
    RemoveFinalizer,
    /// Call the plugin (with `finalizing` when the parent is going).
    CallPlugin,
}

/// How the reconcile of a parent begins: `deleting` it, for a binding that
/// `finalize`s or not, the parent holding its finalizer or not.
pub(crate) fn entry(deleting: bool, finalize: bool, holds_finalizer: bool) -> Entry {
    match (finalize, holds_finalizer, deleting) {
        (false, true, _) => Entry::RemoveFinalizer,
        (true, false, false) => Entry::AddFinalizer,
        (_, false, true) => Entry::Forget,
        _ => Entry::CallPlugin,
    }
}

/// The soonest a plugin may ask to be called again: `requeue-after-ms: 0`
/// must not turn into a hot loop.
pub(crate) const MIN_REQUEUE: Duration = Duration::from_secs(1);

/// When to reconcile again: the plugin's wish, no sooner than
/// [`MIN_REQUEUE`], or the resync.
pub(crate) fn requeue_delay(
    requested: Option<Duration>,
    resync: Option<Duration>,
) -> Option<Duration> {
    requested.map(|d| d.max(MIN_REQUEUE)).or(resync)
}

/// Record a failed reconcile on the parent (`Synced=False`, a Warning
/// Event); children stay as they are. Returns the error for the backoff.
async fn fail(
    ctx: &BindingContext,
    parent: &DynamicObject,
    digest: &str,
    error: ReconcileError,
) -> Result<Action, ReconcileError> {
    let reason = error.reason();
    let message = error.to_string();
    tracing::warn!(binding = %ctx.name, parent = %object_key(parent), %reason, "reconcile failed: {message}");
    if ctx.parent.has_status {
        let outcome = Outcome {
            plugin_status: None,
            conditions: &[],
            synced: status::not_synced(&reason, &message),
            observed: false,
            digest,
        };
        if let Err(e) = status::write_status(ctx, parent, outcome).await {
            tracing::warn!(binding = %ctx.name, parent = %object_key(parent), error = %e, "could not record the failure in status");
        }
    }
    publish(ctx, parent, KubeEventType::Warning, &reason, &message).await;
    ctx.ledgers.failed(&object_key(parent));
    Err(error)
}

/// Say what the reconcile of `parent` changed: one info line, and a Normal
/// Event per kind of change to its children while the parent's budget
/// lasts (see [`report`](super::report)).
async fn report(ctx: &BindingContext, parent: &DynamicObject, changes: &Changes, status: bool) {
    let Some(summary) = changes.summary(status) else {
        return;
    };
    tracing::info!(
        binding = %ctx.name,
        parent = %object_key(parent),
        created = changes.count(Change::Created),
        updated = changes.count(Change::Updated),
        pruned = changes.count(Change::Pruned),
        status,
        "reconciled: {summary}"
    );
    let now = std::time::Instant::now();
    for (change, message) in changes.messages() {
        if ctx.ledgers.take_normal_event(&object_key(parent), now) {
            publish(
                ctx,
                parent,
                KubeEventType::Normal,
                change.reason(),
                &message,
            )
            .await;
        }
    }
}

async fn warn_no_status(ctx: &BindingContext, parent: &DynamicObject) {
    let message = format!(
        "{} has no status subresource: Gantry cannot record status, conditions or observedGeneration; add `subresources: {{status: {{}}}}` to its CRD",
        ctx.parent.kind
    );
    publish(
        ctx,
        parent,
        KubeEventType::Warning,
        "NoStatusSubresource",
        &message,
    )
    .await;
}

/// Exponential backoff with jitter, capped, from the binding's `backoff`;
/// an error the plugin calls permanent waits for the resync (or a change,
/// which triggers earlier).
// The signature kube-runtime's `Controller::run` asks for.
#[allow(clippy::needless_pass_by_value)]
pub(crate) fn error_policy(
    parent: Arc<CachedObject>,
    error: &ReconcileError,
    ctx: Arc<BindingContext>,
) -> Action {
    let (failures, rerun) = ctx.ledgers.retry(&object_key(parent.as_ref()));
    // News held during the failed reconcile is news like any other: it is
    // looked at now, not after the backoff (or never, for a lasting error).
    if rerun {
        return Action::requeue(Duration::ZERO);
    }
    let spec = ctx.current().spec.clone();
    if !error.retryable() {
        return spec
            .resync()
            .map_or_else(Action::await_change, Action::requeue);
    }
    let (base, max) = match spec.backoff {
        Some(b) => (
            Duration::from_millis(b.base_ms),
            Duration::from_millis(b.max_ms),
        ),
        None => (
            ctx.shared.options.backoff_base,
            ctx.shared.options.backoff_max,
        ),
    };
    Action::requeue(backoff(base, max, failures))
}

/// Delay before retry number `failures` (1-based): `base` × 2^(n-1), up to
/// `max`, with ±20% jitter so parents failing together do not retry
/// together.
pub(crate) fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    let delay = base.saturating_mul(1 << exponent).min(max);
    delay.mul_f64(0.8 + fastrand::f64() * 0.4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_size<A, B, F: Future>(_: impl Fn(A, B) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn a_reconcile_waiting_for_its_slot_is_small() {
        // Many reconciles may wait for a slot at once: each holds the
        // waiting future, while the state of a running reconcile is boxed
        // only once its slot is free.
        let waiting = future_size(wait_and_run);
        let running = future_size(|parent, ctx: Arc<BindingContext>| async move {
            run(parent, &ctx, ctx.ledgers.queue(String::new())).await
        });
        eprintln!("waiting {waiting} bytes, running {running} bytes");
        assert!(waiting <= 1024, "{waiting} bytes");
        assert!(running > 4 * waiting, "{running} bytes");
    }

    #[test]
    fn a_reconcile_begins_by_the_parents_deletion_and_finalizer() {
        // Not finalizing: call the plugin, forget the parent when it goes.
        assert_eq!(entry(false, false, false), Entry::CallPlugin);
        assert_eq!(entry(true, false, false), Entry::Forget);
        // Finalizing: the finalizer first, then the plugin, also while going.
        assert_eq!(entry(false, true, false), Entry::AddFinalizer);
        assert_eq!(entry(false, true, true), Entry::CallPlugin);
        assert_eq!(entry(true, true, true), Entry::CallPlugin);
        // Going without our finalizer (finalized already, or never had it).
        assert_eq!(entry(true, true, false), Entry::Forget);
        // A binding switched to finalize: false lets go of its finalizer,
        // also on a parent that is going.
        assert_eq!(entry(false, false, true), Entry::RemoveFinalizer);
        assert_eq!(entry(true, false, true), Entry::RemoveFinalizer);
    }

    #[test]
    fn requeues_come_no_sooner_than_the_floor() {
        let resync = Duration::from_mins(5);
        assert_eq!(requeue_delay(None, Some(resync)), Some(resync));
        assert_eq!(
            requeue_delay(Some(Duration::ZERO), Some(resync)),
            Some(MIN_REQUEUE)
        );
        // Without a resync, only a requested requeue comes back.
        assert_eq!(requeue_delay(None, None), None);
        assert_eq!(
            requeue_delay(Some(Duration::from_secs(7)), None),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            requeue_delay(Some(Duration::from_secs(5)), Some(resync)),
            Some(Duration::from_secs(5))
        );
    }
}
