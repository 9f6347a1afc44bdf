//! Which needs the operator's own identity lacks, asked of the API server
//! with `SelfSubjectAccessReviews`: one per verb and place.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

use super::{Need, Where};

/// Reviews in flight at once.
const CONCURRENT_REVIEWS: usize = 8;

/// The needs not allowed, one line each ("list apps/deployments in every
/// namespace"), in the order of `needs`.
pub(crate) async fn missing(client: &Client, needs: &[Need]) -> Result<Vec<String>, kube::Error> {
    let asks: Vec<(&Need, &'static str)> = needs
        .iter()
        .flat_map(|need| need.verbs.iter().map(move |verb| (need, *verb)))
        .collect();
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    // Owned, so that the futures borrow nothing (a stream of borrowing
    // futures does not satisfy tokio::spawn's bounds).
    let owned: Vec<(Need, String)> = asks
        .iter()
        .map(|(n, v)| ((*n).clone(), (*v).to_string()))
        .collect();
    let answers: Vec<bool> = futures::stream::iter(owned)
        .map(|(need, verb)| {
            let api = api.clone();
            async move { allowed(&api, &need, &verb).await }
        })
        .buffered(CONCURRENT_REVIEWS)
        .try_collect()
        .await?;
    Ok(asks
        .iter()
        .zip(answers)
        .filter(|(_, allowed)| !allowed)
        .map(|((need, verb), _)| describe(need, verb))
        .collect())
}

async fn allowed(
    api: &Api<SelfSubjectAccessReview>,
    need: &Need,
    verb: &str,
) -> Result<bool, kube::Error> {
    let (resource, subresource) = match need.resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub.to_string())),
        None => (need.resource.as_str(), None),
    };
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(need.group.clone()),
                resource: Some(resource.to_string()),
                subresource,
                verb: Some(verb.to_string()),
                namespace: match &need.place {
                    Where::Cluster => None,
                    Where::Namespace(ns) => Some(ns.clone()),
                },
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = api.create(&PostParams::default(), &review).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// "list apps/deployments in every namespace".
pub(crate) fn describe(need: &Need, verb: &str) -> String {
    let group = if need.group.is_empty() {
        String::new()
    } else {
        format!("{}/", need.group)
    };
    let place = match &need.place {
        Where::Cluster => "cluster-wide".to_string(),
        Where::Namespace(ns) => format!("in namespace {ns}"),
    };
    format!("{verb} {group}{} {place}", need.resource)
}
