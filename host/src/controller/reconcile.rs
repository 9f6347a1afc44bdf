//! One reconcile of one parent: request → plugin → guardrails → apply and
//! prune → status → events; and the error policy with backoff.

use std::sync::Arc;
use std::time::Duration;

use gantry_sdk::{EventType, Request, Response, Trigger};
use kube::api::DynamicObject;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType as KubeEventType};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use super::apply::Intent;
use super::binding::BindingSpec;
use super::cached::CachedObject;
use super::context::{BindingContext, Current, ParentState, object_key};
use super::guardrails::{self, DesiredChild, Rules};
use super::report::{Change, Changes};
use super::settle::{self, Written};
use super::status::{self, Outcome};
use super::{ReconcileError, apply, finalizer};
use crate::policy::guardrails::{self as guardrail_policies, ChildIntent};

/// Reconcile `parent`, bounded by the operator's per-reconcile timeout.
pub async fn reconcile(
    parent: Arc<CachedObject>,
    ctx: Arc<BindingContext>,
) -> Result<Action, ReconcileError> {
    if !ctx.shared.leading() || !ctx.shared.options.shard.owns(&object_key(parent.as_ref())) {
        return Ok(Action::await_change());
    }
    let _in_flight = ctx.start_reconcile();
    let timeout = ctx.shared.options.reconcile_timeout;
    let metrics = &ctx.shared.metrics;
    let queued = metrics.queued(&ctx.name);
    let _permit = ctx
        .shared
        .reconciles
        .acquire()
        .await
        .map_err(|_| ReconcileError::ShuttingDown)?;
    drop(queued);
    // Parsed once a reconcile may run: queued ones hold only the cache's copy.
    let parent = parent.to_object(&ctx.parent.resource);
    let _running = metrics.running(&ctx.name);
    let started = std::time::Instant::now();
    let span = tracing::info_span!(
        "reconcile",
        binding = %ctx.name,
        object = %object_key(&parent),
        trace_id = tracing::field::Empty,
    );
    crate::telemetry::record_trace_id(&span);
    let reconciling = ctx.begin_reconcile(&object_key(&parent));
    let inner = reconcile_inner(&parent, &ctx).instrument(span);
    let result = match tokio::time::timeout(timeout, inner).await {
        Ok(result) => result,
        Err(_) => Err(ReconcileError::Timeout(timeout)),
    };
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
        ctx.with_state(&object_key(&parent), ParentState::succeeded);
    }
    result
}

async fn reconcile_inner(
    parent: &DynamicObject,
    ctx: &BindingContext,
) -> Result<Action, ReconcileError> {
    let current = ctx.current();
    let spec = &current.spec;
    let key = object_key(parent);
    let trigger = ctx.take_trigger(parent, current.plugin.digest());
    let deleting = parent.meta().deletion_timestamp.is_some();
    let finalizer_name = spec.finalizer();
    match entry(
        deleting,
        spec.finalize,
        finalizer::has(parent, &finalizer_name),
    ) {
        Entry::Forget => {
            // Garbage collection removes the children through their owner references.
            ctx.forget(&key);
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

    let Settled {
        response,
        events,
        changes,
    } = match settle(ctx, parent, &current, trigger).await {
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
    report(ctx, parent, &changes, status_written).await;
    if deleting && response.finalized {
        finalizer::remove(ctx, parent, &finalizer_name).await?;
        ctx.forget(&key);
        return Ok(Action::await_change());
    }
    ctx.requested_requeue(&key, response.requeue_after.is_some());
    Ok(match requeue_delay(response.requeue_after, spec.resync()) {
        Some(delay) => Action::requeue(delay),
        None => Action::await_change(),
    })
}

/// What a reconcile's plugin calls came to.
struct Settled {
    /// The last answer.
    response: Response,
    /// The events of all answers.
    events: Vec<gantry_sdk::Event>,
    /// What the writes of all answers changed.
    changes: Changes,
}

/// Call the plugin, check its answer and write the children; again, on the
/// children as the API server returned them, while the writes change them
/// (see [`settle`](super::settle)).
async fn settle(
    ctx: &BindingContext,
    parent: &DynamicObject,
    current: &Current,
    mut trigger: Trigger,
) -> Result<Settled, ReconcileError> {
    let key = object_key(parent);
    let uid = parent.uid().unwrap_or_default();
    let mut written = Written::default();
    let mut events: Vec<gantry_sdk::Event> = Vec::new();
    for call in 1.. {
        let observed = written.observed(ctx.observed_children(&uid));
        for version in written.shown(&ctx.children) {
            ctx.note_own_child(&key, &version);
        }
        let request = request_observing(ctx, parent, &current.spec, trigger.clone(), &observed);
        let response = call_plugin(ctx, current, request).await?;
        for event in &response.events {
            if !events.contains(event) {
                events.push(event.clone());
            }
        }
        let intents = checked_intents(ctx, parent, &current.spec, &response).await?;
        write_children(ctx, parent, &intents, observed, &mut written).await?;
        match written.trigger(&ctx.children) {
            Some(next) if call < settle::MAX_CALLS && written.changed_since_call() => {
                trigger = next;
            }
            _ => {
                return Ok(Settled {
                    response,
                    events,
                    changes: written.changes,
                });
            }
        }
    }
    unreachable!("the loop returns by its last call")
}

/// Call the plugin in service, with its metrics and trace span.
async fn call_plugin(
    ctx: &BindingContext,
    current: &Current,
    request: Request,
) -> Result<Response, ReconcileError> {
    let plugin = &current.plugin;
    let called = std::time::Instant::now();
    let grants = super::grants::grants(ctx, &current.spec, plugin, false);
    let result = plugin
        .reconcile_with(request, current.spec.call_limits(), grants)
        .instrument(tracing::info_span!(
            "plugin_call",
            plugin = plugin.name(),
            digest = plugin.digest()
        ))
        .await;
    let metrics = &ctx.shared.metrics;
    metrics.record_plugin_call(plugin.name(), plugin.digest(), called.elapsed());
    result.map_err(|error| {
        metrics.record_plugin_failure(&ctx.name, error.kind(), error.is_limit_breach());
        ReconcileError::Plugin(error)
    })
}

/// The request the plugin of `spec` gets for `parent`: observed children and
/// related objects from the caches, the binding's config, `finalizing` when
/// the parent is going.
pub fn request(
    ctx: &BindingContext,
    parent: &DynamicObject,
    spec: &BindingSpec,
    trigger: gantry_sdk::Trigger,
) -> Request {
    let observed = ctx.observed_children(&parent.uid().unwrap_or_default());
    request_observing(ctx, parent, spec, trigger, &observed)
}

/// The request for `parent` with `observed` children (of the binding's
/// child kinds, by index).
fn request_observing(
    ctx: &BindingContext,
    parent: &DynamicObject,
    spec: &BindingSpec,
    trigger: gantry_sdk::Trigger,
    observed: &[(usize, Arc<CachedObject>)],
) -> Request {
    let observed = observed
        .iter()
        .map(|(index, obj)| obj.to_json(&ctx.children[*index].info.resource))
        .collect();
    Request {
        parent: ctx.parent.to_json(parent),
        observed,
        related: ctx.related_objects(parent.namespace().as_deref()),
        config: spec.config.clone(),
        finalizing: parent.meta().deletion_timestamp.is_some(),
        trigger,
    }
}

/// The intents of a plugin's `response` for `parent`, once the guardrails
/// and the binding's guardrail policies let them through.
pub async fn checked_intents(
    ctx: &BindingContext,
    parent: &DynamicObject,
    spec: &BindingSpec,
    response: &Response,
) -> Result<Vec<Intent>, ReconcileError> {
    let desired = check_guardrails(ctx, parent, response)
        .await
        .map_err(ReconcileError::Guardrails)?;
    let intents = apply::intents(ctx, parent, desired);
    judge(ctx, &spec.guardrail_policies, &intents).await?;
    Ok(intents)
}

/// How a reconcile begins, from the parent's deletion and finalizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
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
pub fn entry(deleting: bool, finalize: bool, holds_finalizer: bool) -> Entry {
    match (finalize, holds_finalizer, deleting) {
        (false, true, _) => Entry::RemoveFinalizer,
        (true, false, false) => Entry::AddFinalizer,
        (_, false, true) => Entry::Forget,
        _ => Entry::CallPlugin,
    }
}

/// The soonest a plugin may ask to be called again: `requeue-after-ms: 0`
/// must not turn into a hot loop.
pub const MIN_REQUEUE: Duration = Duration::from_secs(1);

/// When to reconcile again: the plugin's wish, no sooner than
/// [`MIN_REQUEUE`], or the resync.
pub fn requeue_delay(requested: Option<Duration>, resync: Option<Duration>) -> Option<Duration> {
    requested.map(|d| d.max(MIN_REQUEUE)).or(resync)
}

/// Run the guardrails on the blocking pool: up to the output cap of JSON to
/// walk is no work for the async executor.
async fn check_guardrails(
    ctx: &BindingContext,
    parent: &DynamicObject,
    response: &Response,
) -> Result<Vec<DesiredChild>, Vec<String>> {
    let children = response.children.clone();
    let parent_kind = ctx.parent.kind.clone();
    let parent_namespace = parent.namespace();
    let operator_namespace = ctx.shared.options.namespace.clone();
    let scopes = ctx.child_scopes.clone();
    tokio::task::spawn_blocking(move || {
        guardrails::check_children(
            children,
            &Rules {
                parent_kind: &parent_kind,
                parent_namespace: parent_namespace.as_deref(),
                operator_namespace: &operator_namespace,
                scopes: &scopes,
            },
        )
    })
    .await
    .unwrap_or_else(|e| Err(vec![format!("guardrail check failed: {e}")]))
}

/// Let the binding's guardrail policies judge the intents, as the API
/// server's webhooks would judge their applies.
async fn judge(
    ctx: &BindingContext,
    policies: &[String],
    intents: &[Intent],
) -> Result<(), ReconcileError> {
    if policies.is_empty() {
        return Ok(());
    }
    let children: Vec<ChildIntent<'_>> = intents
        .iter()
        .map(|intent| {
            let info = &ctx.children[intent.kind].info;
            ChildIntent {
                resource: &info.resource,
                namespaced: info.namespaced,
                name: &intent.child.name,
                namespace: intent.child.namespace.as_deref(),
                display: intent.child.display(),
                object: &intent.object,
                old: intent.cached(ctx).map(|live| live.to_json(&info.resource)),
            }
        })
        .collect();
    guardrail_policies::check(
        &ctx.shared.options.policies,
        &ctx.client,
        &ctx.name,
        policies,
        &children,
    )
    .await
    .map_err(ReconcileError::from)
}

async fn write_children(
    ctx: &BindingContext,
    parent: &DynamicObject,
    intents: &[Intent],
    observed: Vec<(usize, Arc<CachedObject>)>,
    written: &mut Written,
) -> Result<(), ReconcileError> {
    let stats = apply::apply_children(ctx, parent, intents, written).await?;
    let pruned = apply::prune_children(ctx, parent, intents, observed, written)
        .instrument(tracing::info_span!("prune"))
        .await?;
    ctx.shared
        .metrics
        .record_writes(&ctx.name, stats.applied, stats.skipped, pruned);
    tracing::debug!(binding = %ctx.name, parent = %object_key(parent), applied = stats.applied, skipped = stats.skipped, pruned, "children reconciled");
    Ok(())
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
    ctx.with_state(&object_key(parent), ParentState::failed);
    Err(error)
}

/// The plugin's events, one Event write per type and reason: repeats in
/// one response are folded into the first, with a count.
async fn publish_plugin_events(
    ctx: &BindingContext,
    parent: &DynamicObject,
    events: &[gantry_sdk::Event],
) {
    for (event, repeats) in super::events::aggregate(events) {
        let kind = match event.event_type {
            EventType::Normal => KubeEventType::Normal,
            EventType::Warning => KubeEventType::Warning,
        };
        let message = if repeats > 0 {
            format!(
                "{} (and {repeats} more {} events in the same response)",
                event.message, event.reason
            )
        } else {
            event.message.clone()
        };
        publish(ctx, parent, kind, &event.reason, &message).await;
    }
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
        if ctx.with_state(&object_key(parent), |s| s.take_normal_event(now)) {
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

/// Emit an Event on `parent` (deduplicated by the recorder).
pub async fn publish(
    ctx: &BindingContext,
    parent: &DynamicObject,
    kind: KubeEventType,
    reason: &str,
    message: &str,
) {
    let event = Event {
        type_: kind,
        reason: reason.chars().take(128).collect(),
        note: Some(message.chars().take(1024).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    let reference = parent.object_ref(&ctx.parent.resource);
    if let Err(e) = ctx.recorder.publish(&event, &reference).await {
        tracing::warn!(binding = %ctx.name, error = %e, "could not publish event");
    }
}

/// Exponential backoff with jitter, capped, from the binding's `backoff`;
/// an error the plugin calls permanent waits for the resync (or a change,
/// which triggers earlier).
// The signature kube-runtime's `Controller::run` asks for.
#[allow(clippy::needless_pass_by_value)]
pub fn error_policy(
    parent: Arc<CachedObject>,
    error: &ReconcileError,
    ctx: Arc<BindingContext>,
) -> Action {
    let (failures, rerun) = ctx.with_state(&object_key(parent.as_ref()), |s| {
        (s.failures(), s.take_rerun())
    });
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
pub fn backoff(base: Duration, max: Duration, failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(20);
    let delay = base.saturating_mul(1 << exponent).min(max);
    delay.mul_f64(0.8 + fastrand::f64() * 0.4)
}

#[cfg(test)]
mod tests {
    use super::*;

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
