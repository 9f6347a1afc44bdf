//! Applying a parent's children, the one module that does. A plugin's
//! desired children, once the guardrails let them through, become
//! [`Intent`]s; for each, [`step`] decides from the cache and the ledger
//! alone whether to skip it, look it up, refuse it or [`apply`] it with
//! server-side apply (fields the binding lets go of first [`handover`]ed);
//! the children no longer desired are [`prune`]d. What
//! the writes returned is kept in [`Written`]: the next plugin call of the
//! reconcile sees it, and the reconcile records its [`report`] in the
//! parent's ledger once, as it ends. Nothing here changes the ledger.
//!
//! Read: [`intent`] → [`fingerprint`] → [`step`] → [`apply`] (with
//! [`handover`]) → [`prune`] → [`written`].
//!
//! [`report`]: Written::report

pub(crate) mod apply;
pub(crate) mod fingerprint;
pub(crate) mod handover;
pub(crate) mod intent;
pub(crate) mod prune;
pub(crate) mod step;
pub(crate) mod written;

use std::sync::Arc;

use kube::api::DynamicObject;
use tracing::Instrument;

pub(crate) use intent::{Intent, intents};
pub(crate) use written::Written;

use super::ReconcileError;
use super::cached::CachedObject;
use super::context::{BindingContext, object_key};

/// Apply the `intents` of `parent`, then prune the `observed` children no
/// intent wants; what the writes did goes into `written`.
pub(crate) async fn write(
    ctx: &BindingContext,
    parent: &DynamicObject,
    intents: &[Intent],
    observed: Vec<(usize, Arc<CachedObject>)>,
    written: &mut Written,
) -> Result<(), ReconcileError> {
    let stats = apply::apply_children(ctx, parent, intents, written).await?;
    let pruned = prune::prune_children(ctx, intents, observed, written)
        .instrument(tracing::info_span!("prune"))
        .await?;
    ctx.shared
        .metrics
        .record_writes(&ctx.name, stats.applied, stats.skipped, pruned);
    tracing::debug!(binding = %ctx.name, parent = %object_key(parent), applied = stats.applied, skipped = stats.skipped, pruned, "children reconciled");
    Ok(())
}
