//! Request handlers, one module per verb family.

pub mod apply;
pub mod delete;
pub mod eviction;
pub mod output;
pub mod read;
pub mod scale;
pub mod watch;
pub mod write;

use std::sync::Arc;

use axum::response::Response;

use crate::app::App;
use crate::error::{ApiError, ApiResult};
use crate::http::request::{ResourceRequest, Verb};

/// Routes a parsed resource request to its handler.
pub async fn dispatch(app: &Arc<App>, r: ResourceRequest) -> ApiResult<Response> {
    if r.verb.is_write() && r.info.group == crate::apiservices::GROUP {
        return Err(ApiError::MethodNotAllowed(
            "APIServices are read-only here: the embedded server aggregates no API servers".into(),
        ));
    }
    if r.verb.is_write() {
        r.check_dry_run()?;
        r.check_field_manager()?;
    }
    match (r.verb, r.subresource.as_deref()) {
        (Verb::Get, Some("scale")) => scale::get(app, &r).await,
        (Verb::Update | Verb::Patch, Some("scale")) => scale::write(app, r).await,
        (Verb::Get, _) => read::get(app, &r).await,
        (Verb::List, None) => read::list(app, &r).await,
        (Verb::Watch, None) => watch::watch(app, r).await,
        (Verb::Create, None) => write::create(app, r).await,
        (Verb::Create, Some("eviction")) => eviction::evict(app, r).await,
        (Verb::Update, _) => write::update(app, r).await,
        (Verb::Patch, _) => write::patch(app, r).await,
        (Verb::Delete, None) => delete::delete(app, r).await,
        (Verb::DeleteCollection, None) => delete::delete_collection(app, r).await,
        _ => Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        )),
    }
}
