//! Server-side apply of each intent with the binding's field manager,
//! skipping writes that would change nothing (see [`step`](super::step)).

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tracing::Instrument;

use super::fingerprint::fingerprint;
use super::intent::Intent;
use super::step::{Step, step};
use super::written::Written;
use crate::controller::ReconcileError;
use crate::controller::context::{BindingContext, controller_owner};
use crate::controller::guardrails::DesiredChild;
use crate::controller::report::Change;

/// What applying the children did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ApplyStats {
    /// Children written.
    pub applied: usize,
    /// Children left alone: unchanged intent, live object still shows it.
    pub skipped: usize,
}

/// Apply every intent of `parent`; what the API server returned goes into
/// `written`.
pub(crate) async fn apply_children(
    ctx: &BindingContext,
    parent: &DynamicObject,
    intents: &[Intent],
    written: &mut Written,
) -> Result<ApplyStats, ReconcileError> {
    let uid = parent.uid().unwrap_or_default();
    let manager = ctx.spec.field_manager();
    let mut stats = ApplyStats::default();
    for intent in intents {
        let (child, object) = (&intent.child, &intent.object);
        let kind = &ctx.children[intent.kind];
        let key = intent.key();
        let print = fingerprint(object);
        let api = kind.info.api(&ctx.client, child.namespace.as_deref());
        let cached = written
            .applied_object(intent.kind, child.namespace.as_deref(), &child.name)
            .or_else(|| intent.cached(ctx));
        let live = cached
            .as_deref()
            .map(|live| (live, live.to_json(&kind.info.resource)));
        let applied_before = written.applied_as(&key, print);
        let live = live.as_ref().map(|(object, json)| (*object, json));
        // The child as read when the cache lacks it, for the hand-over.
        let mut read = None;
        let before = match step(live, &ctx.name, &uid, applied_before, object) {
            Step::Skip => {
                stats.skipped += 1;
                continue;
            }
            Step::NotOurs => {
                let live = cached.as_deref().expect("only a cached child is not ours");
                return Err(not_ours(child, live));
            }
            Step::LookUp => {
                // Not in our (label-filtered) cache: it may still exist
                // without our label, and then it is not ours to change.
                let existing = api
                    .get_opt(&child.name)
                    .await
                    .map_err(ReconcileError::Kube)?;
                if let Some(existing) = &existing
                    && controller_owner(existing).is_none_or(|o| o.uid != uid)
                {
                    return Err(not_ours(child, existing));
                }
                read = existing.as_ref().and_then(|e| serde_json::to_value(e).ok());
                existing.and_then(|e| e.resource_version())
            }
            Step::Apply => cached.as_deref().and_then(ResourceExt::resource_version),
        };
        super::handover::hand_over(
            &api,
            &ctx.current().spec.hand_over,
            &ctx.name,
            &manager,
            &child.kind,
            object,
            read.as_ref().or(live.map(|(_, json)| json)),
        )
        .await
        .map_err(|e| ReconcileError::Apply {
            child: child.display(),
            source: e,
        })?;
        let returned = api
            .patch(
                &child.name,
                &PatchParams::apply(&manager).force(),
                &Patch::Apply(object),
            )
            .instrument(tracing::info_span!("apply", child = %child.display()))
            .await
            .map_err(|e| ReconcileError::Apply {
                child: child.display(),
                source: e,
            })?;
        // A no-op apply (the same resourceVersion back) changed nothing.
        let change = match before {
            None => Some(Change::Created),
            Some(version) => {
                (returned.resource_version() != Some(version)).then_some(Change::Updated)
            }
        };
        if let Some(change) = change {
            written
                .changes
                .record(child_name(&child.kind.kind, &child.name), change);
        }
        written.applied(intent.kind, &key, print, returned);
        stats.applied += 1;
    }
    Ok(stats)
}

/// A child as reports name it: `Kind name` (children are mostly in the
/// parent's namespace, and the kind's group rarely tells two apart).
pub(crate) fn child_name(kind: &str, name: &str) -> String {
    format!("{kind} {name}")
}

fn not_ours(child: &DesiredChild, live: &impl Resource) -> ReconcileError {
    let owner = controller_owner(live)
        .map_or_else(|| "nobody".into(), |o| format!("{} {}", o.kind, o.name));
    ReconcileError::NotOwned {
        child: child.display(),
        owner,
    }
}
