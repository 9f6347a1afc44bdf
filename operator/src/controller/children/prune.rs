//! Pruning: the parent's children that are no longer desired are deleted,
//! each with a UID precondition.

use std::collections::HashSet;
use std::sync::Arc;

use kube::api::{DeleteParams, Preconditions};
use kube::{Resource, ResourceExt};

use super::apply::child_name;
use super::intent::Intent;
use super::written::Written;
use crate::controller::ReconcileError;
use crate::controller::cached::CachedObject;
use crate::controller::context::BindingContext;
use crate::controller::ledger::ChildKey;
use crate::controller::report::Change;

/// Delete the `observed` children (carrying our label and controller
/// reference) that no `intents` want any more, noting each in `written`.
/// Returns how many were deleted.
pub(crate) async fn prune_children(
    ctx: &BindingContext,
    intents: &[Intent],
    observed: Vec<(usize, Arc<CachedObject>)>,
    written: &mut Written,
) -> Result<usize, ReconcileError> {
    // Kinds are told apart by group and kind: `v1 ConfigMap` and a custom
    // `ConfigMap` of another group are different children.
    let wanted: HashSet<(&str, &str, Option<&str>, &str)> = intents
        .iter()
        .map(|i| &i.child)
        .map(|d| {
            (
                d.kind.group(),
                d.kind.kind.as_str(),
                d.namespace.as_deref(),
                d.name.as_str(),
            )
        })
        .collect();
    let mut pruned = 0;
    for (index, obj) in observed {
        let kind = &ctx.children[index].info;
        let name = obj.name_any();
        let namespace = obj.namespace();
        if wanted.contains(&(
            kind.kind.group(),
            kind.kind.kind.as_str(),
            namespace.as_deref(),
            name.as_str(),
        )) || obj.meta().deletion_timestamp.is_some()
        {
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: obj.uid(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        let key: ChildKey = (kind.kind.clone(), namespace.clone(), name.clone());
        match kind
            .api(&ctx.client, namespace.as_deref())
            .delete(&name, &params)
            .await
        {
            Ok(_) => {
                pruned += 1;
                written
                    .changes
                    .record(child_name(&kind.kind.kind, &name), Change::Pruned);
                written.pruned(index, key);
            }
            // Already gone, or replaced by another object of that name.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => written.gone(&key),
            Err(e) => return Err(ReconcileError::Kube(e)),
        }
    }
    Ok(pruned)
}
