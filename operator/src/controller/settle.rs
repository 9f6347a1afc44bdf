//! A reconcile settles before it reports. The plugin is called, its answer
//! checked and its children written; when the writes changed children,
//! the plugin is called again with the children as the API server returned
//! them, until an answer writes nothing (at most [`MAX_CALLS`] calls). The
//! status is then written once, from children the plugin has seen, and the
//! watch events of those writes are not news (see `ParentState`). A
//! controller-runtime operator gets there through a reconcile per event
//! instead: one status write and one call per change of each child.

use gantry_sdk::{Request, Response, Trigger};
use kube::ResourceExt;
use kube::api::DynamicObject;
use tracing::Instrument;

use super::ReconcileError;
use super::children::{self, Intent, Written};
use super::context::{BindingContext, Current};
use super::guardrails;
use super::request::request_observing;
use super::spec::BindingSpec;

/// Plugin calls in one reconcile at most: one, and two more while its
/// applies change children. A plugin that builds children in stages (one
/// after another is observed) gets there over several reconciles.
pub(crate) const MAX_CALLS: usize = 3;

/// What a reconcile's plugin calls came to.
pub(crate) struct Settled {
    /// The last answer.
    pub response: Response,
    /// The events of all answers.
    pub events: Vec<gantry_sdk::Event>,
}

/// Call the plugin, check its answer and write the children, into
/// `written`; again, on the children as the API server returned them,
/// while the writes change them.
pub(crate) async fn settle(
    ctx: &BindingContext,
    parent: &DynamicObject,
    current: &Current,
    mut trigger: Trigger,
    written: &mut Written,
) -> Result<Settled, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let mut events: Vec<gantry_sdk::Event> = Vec::new();
    for call in 1.. {
        let observed = written.observed(ctx.observed_children(&uid));
        written.show(&ctx.children);
        let request = request_observing(ctx, parent, &current.spec, trigger.clone(), &observed);
        let response = call_plugin(ctx, current, request).await?;
        for event in &response.events {
            if !events.contains(event) {
                events.push(event.clone());
            }
        }
        let intents = checked_intents(ctx, parent, &current.spec, &response).await?;
        children::write(ctx, parent, &intents, observed, written).await?;
        match written.trigger(&ctx.children) {
            Some(next) if call < MAX_CALLS && written.changed_since_call() => {
                trigger = next;
            }
            _ => return Ok(Settled { response, events }),
        }
    }
    unreachable!("the loop returns by its last call")
}

/// The intents of a plugin's `response` for `parent`, once the guardrails
/// and the binding's guardrail policies let them through.
pub(crate) async fn checked_intents(
    ctx: &BindingContext,
    parent: &DynamicObject,
    spec: &BindingSpec,
    response: &Response,
) -> Result<Vec<Intent>, ReconcileError> {
    let desired = guardrails::check(ctx, parent, response).await?;
    let intents = children::intents(ctx, parent, desired);
    if !spec.guardrail_policies.is_empty() {
        let judged: Vec<_> = intents.iter().map(|intent| intent.judged(ctx)).collect();
        guardrails::judge(ctx, &spec.guardrail_policies, &judged).await?;
    }
    Ok(intents)
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
