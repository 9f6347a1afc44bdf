//! Server-side apply: merging with gantry-merge, and create-on-apply.

use serde_json::Value;

use std::sync::Arc;

use super::write::{WriteCtx, admit_new};
use crate::app::App;
use crate::error::{ApiError, ApiResult};
use crate::objects::{fieldmanager, meta};

/// Server-side apply of `body` onto `live`: the merged object (with managedFields
/// removed) and the new managedFields.
pub(super) fn run_apply(
    ctx: &WriteCtx,
    live: Option<&Value>,
    body: &Value,
    force: bool,
) -> ApiResult<(Value, Vec<gantry_merge::ManagedFieldsEntry>)> {
    let schema = fieldmanager::merge_schema(&ctx.info);
    let ignored = fieldmanager::ignored_fields(&ctx.info, ctx.subresource.as_deref());
    let live_mf = fieldmanager::managed_fields(live);
    let api_version = ctx.info.api_version();
    let merged = gantry_merge::apply(
        live,
        body,
        &gantry_merge::ApplyOptions {
            manager: &ctx.manager,
            force,
            subresource: ctx.subresource.as_deref(),
            api_version: &api_version,
            schema: &schema,
            now: fieldmanager::now(),
            managed_fields: &live_mf,
            ignored: &ignored,
        },
    )
    .map_err(|e| match e {
        gantry_merge::ApplyError::Conflicts(c) => {
            fieldmanager::conflict_error(&ctx.info, &ctx.name, &c)
        }
        gantry_merge::ApplyError::Invalid(m) => ApiError::bad_request(m),
        gantry_merge::ApplyError::ManagedFields(e) => ApiError::Internal(e.to_string()),
    })?;
    Ok((merged.object, merged.managed_fields))
}

/// Apply to a missing object creates it: the object to store and warnings.
pub(super) async fn apply_create(
    app: &Arc<App>,
    ctx: &WriteCtx,
    body: Value,
    force: bool,
) -> ApiResult<(Value, Vec<String>)> {
    if let Some(n) = meta::meta_str(&body, "name").filter(|n| *n != ctx.name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({})",
            ctx.name
        )));
    }
    let (mut obj, mf) = run_apply(ctx, None, &body, force)?;
    meta::meta_mut(&mut obj).insert("name".into(), Value::String(ctx.name.clone()));
    admit_new(app, ctx, obj, Some(mf)).await
}
