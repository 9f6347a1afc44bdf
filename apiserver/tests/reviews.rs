//! `SubjectAccessReview`, `LocalSubjectAccessReview` and `TokenReview` on both
//! backends: answered for the user they name (JSON and protobuf bodies), refused
//! with kube's words when malformed, and RBAC'd like any create.

use std::time::Duration;

use gantry_test_support::{Backend, Cluster, backends, raw};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    LocalSubjectAccessReview, NonResourceAttributes, ResourceAttributes, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use prost::Message;
use serde_json::{Value, json};

const NS: &str = "reviews-ci";
const USER: &str = "system:serviceaccount:reviews-ci:builder";
const AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

async fn apply<K>(api: &Api<K>, name: &str, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::apply("reviews-test"),
        &Patch::Apply(&object),
    )
    .await
    .unwrap();
}

/// The namespace, the account `builder` and a `RoleBinding` letting it read Pods.
async fn setup(admin: &Client) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    apply(
        &namespaces,
        NS,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    apply(
        &accounts,
        "builder",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"}}),
    )
    .await;
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(admin.clone(), NS);
    apply(
        &roles,
        "pod-reader",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
    )
    .await;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(admin.clone(), NS);
    apply(
        &bindings,
        "read-pods",
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": NS}]}),
    )
    .await;
}

fn resource(verb: &str, resource: &str, namespace: &str) -> ResourceAttributes {
    ResourceAttributes {
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        namespace: Some(namespace.into()),
        ..ResourceAttributes::default()
    }
}

fn builder_spec(attributes: ResourceAttributes) -> SubjectAccessReviewSpec {
    SubjectAccessReviewSpec {
        resource_attributes: Some(attributes),
        user: Some(USER.into()),
        groups: Some(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{NS}"),
            "system:authenticated".into(),
        ]),
        ..SubjectAccessReviewSpec::default()
    }
}

/// POSTs `body` to `path`, returning the status code and the JSON answer.
async fn post(client: &Client, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    raw::request(client, "POST", path, content_type, "application/json", body).await
}

/// A protobuf body as kube's clients frame it.
fn protobuf(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: None,
        content_type: None,
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// Retries until RBAC (a real server's informers) sees the binding.
async fn eventually_allowed(
    reviews: &Api<SubjectAccessReview>,
    review: &SubjectAccessReview,
) -> SubjectAccessReview {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = reviews
            .create(&PostParams::default(), review)
            .await
            .unwrap();
        if answer.status.as_ref().is_some_and(|s| s.allowed) {
            return answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never allowed: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_reviews_answer_for_the_user_they_name(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let admin = cluster.client();
    setup(&admin).await;
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());

    let review = SubjectAccessReview {
        spec: builder_spec(resource("list", "pods", NS)),
        ..SubjectAccessReview::default()
    };
    let answer = eventually_allowed(&reviews, &review).await;
    let status = answer.status.unwrap();
    assert_eq!(
        status.reason.as_deref(),
        Some(
            "RBAC: allowed by RoleBinding \"read-pods/reviews-ci\" of Role \"pod-reader\" to ServiceAccount \"builder/reviews-ci\""
        )
    );
    assert_eq!(answer.spec.user.as_deref(), Some(USER));

    let denied = reviews
        .create(
            &PostParams::default(),
            &SubjectAccessReview {
                spec: builder_spec(resource("list", "secrets", NS)),
                ..SubjectAccessReview::default()
            },
        )
        .await
        .unwrap();
    let status = denied.status.unwrap();
    assert!(!status.allowed);
    assert_eq!(status.reason, None);

    // The privileged group may do anything; nonresource paths are asked too.
    let masters = SubjectAccessReviewSpec {
        non_resource_attributes: Some(NonResourceAttributes {
            path: Some("/metrics".into()),
            verb: Some("get".into()),
        }),
        groups: Some(vec!["system:masters".into()]),
        ..SubjectAccessReviewSpec::default()
    };
    let answer = reviews
        .create(
            &PostParams::default(),
            &SubjectAccessReview {
                spec: masters,
                ..SubjectAccessReview::default()
            },
        )
        .await
        .unwrap();
    assert!(answer.status.unwrap().allowed);

    // Nobody named: kube's 422.
    let (code, body) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        ".authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified"
    );

    // The same question as protobuf (client-go's protobuf clients).
    let raw = k8s_pb::api::authorization::v1::SubjectAccessReview {
        spec: Some(k8s_pb::api::authorization::v1::SubjectAccessReviewSpec {
            resource_attributes: Some(k8s_pb::api::authorization::v1::ResourceAttributes {
                namespace: Some(NS.into()),
                verb: Some("get".into()),
                resource: Some("pods".into()),
                ..Default::default()
            }),
            user: Some(USER.into()),
            groups: vec!["system:serviceaccounts".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let (code, body) = post(
        &admin,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        "application/vnd.kubernetes.protobuf",
        protobuf(
            "authorization.k8s.io/v1",
            "SubjectAccessReview",
            raw.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], true, "{body}");

    // Local reviews: within the namespace they are sent to.
    let locals: Api<LocalSubjectAccessReview> = Api::namespaced(admin.clone(), NS);
    let local = LocalSubjectAccessReview {
        metadata: kube::api::ObjectMeta {
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: builder_spec(resource("get", "pods", NS)),
        ..LocalSubjectAccessReview::default()
    };
    let answer = locals.create(&PostParams::default(), &local).await.unwrap();
    assert!(answer.status.unwrap().allowed);
    let (code, body) = post(
        &admin,
        &format!("/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews"),
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": NS},
            "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}, "user": USER}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        ".authorization.k8s.io \"\" is invalid: spec.nonResourceAttributes: Invalid value: {\"Path\":\"/healthz\",\"Verb\":\"get\"}: disallowed on this kind of request"
    );
    let (code, body) = post(&admin, &format!("/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews"),
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "metadata": {"namespace": "elsewhere"},
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": NS}, "user": USER}})).unwrap()).await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "the namespace of the provided object does not match the namespace sent on the request"
    );
    let (code, body) = post(&admin, &format!("/apis/authorization.k8s.io/v1/namespaces/{NS}/localsubjectaccessreviews"),
        "application/json",
        serde_json::to_vec(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "other"}, "user": USER}})).unwrap()).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        ".authorization.k8s.io \"\" is invalid: spec.resourceAttributes.namespace: Invalid value: \"other\": must match metadata.namespace"
    );

    // The account itself may not ask about others: RBAC, as for any create.
    let token = token_for(&admin).await;
    let builder = client_with_token(&cluster, &token).await;
    let theirs: Api<SubjectAccessReview> = Api::all(builder);
    let refused = theirs
        .create(&PostParams::default(), &review)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}")
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        format!(
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"{USER}\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        )
    );
    cluster.shutdown().await;
}

async fn token_for(admin: &Client) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let answer: TokenRequest = accounts
        .create_subresource(
            "token",
            "builder",
            &PostParams::default(),
            &TokenRequest::default(),
        )
        .await
        .unwrap();
    answer.status.expect("a token").token
}

async fn client_with_token(cluster: &Cluster, token: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..kube::config::AuthInfo::default()
    };
    Client::try_from(config).unwrap()
}

fn token_review(token: &str, audiences: Option<Vec<String>>) -> TokenReview {
    TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.into()),
            audiences,
        },
        ..TokenReview::default()
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_reviews_name_the_token_s_account(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let admin = cluster.client();
    setup(&admin).await;
    let token = token_for(&admin).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let uid = accounts.get("builder").await.unwrap().metadata.uid.unwrap();
    let reviews: Api<TokenReview> = Api::all(admin.clone());

    let answer = reviews
        .create(&PostParams::default(), &token_review(&token, None))
        .await
        .unwrap();
    let status = answer.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.audiences, Some(vec![AUDIENCE.to_string()]));
    let user = status.user.unwrap();
    assert_eq!(user.username.as_deref(), Some(USER));
    assert_eq!(user.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:reviews-ci",
            "system:authenticated"
        ]
    );

    // Another audience, or no token of this server: not authenticated.
    let answer = reviews
        .create(
            &PostParams::default(),
            &token_review(&token, Some(vec!["vault".into()])),
        )
        .await
        .unwrap();
    let status = answer.status.unwrap();
    assert_eq!(status.authenticated, None);
    assert_eq!(
        status.error.as_deref(),
        Some(
            "[invalid bearer token, token audiences [\"https://kubernetes.default.svc.cluster.local\"] is invalid for the target audiences [\"vault\"]]"
        )
    );
    let answer = reviews
        .create(&PostParams::default(), &token_review("not-a-token", None))
        .await
        .unwrap();
    let status = answer.status.unwrap();
    assert_eq!(status.authenticated, None);
    assert_eq!(status.error.as_deref(), Some("invalid bearer token"));
    assert_eq!(
        status.user,
        Some(k8s_openapi::api::authentication::v1::UserInfo::default())
    );

    // A token for other audiences, reviewed for them: the shared ones.
    let accounts_api: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let vault: TokenRequest = accounts_api
        .create_subresource(
            "token",
            "builder",
            &PostParams::default(),
            &TokenRequest {
                spec: k8s_openapi::api::authentication::v1::TokenRequestSpec {
                    audiences: vec!["vault".into()],
                    ..Default::default()
                },
                ..TokenRequest::default()
            },
        )
        .await
        .unwrap();
    let answer = reviews
        .create(
            &PostParams::default(),
            &token_review(
                &vault.status.unwrap().token,
                Some(vec!["vault".into(), "x".into()]),
            ),
        )
        .await
        .unwrap();
    let status = answer.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.audiences, Some(vec!["vault".to_string()]));

    // No token at all: 400.
    let (code, body) = post(
        &admin,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "application/json",
        serde_json::to_vec(
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}}),
        )
        .unwrap(),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(
        body["message"],
        "token is required for TokenReview in authentication"
    );

    // Protobuf, as client-go's protobuf clients send it.
    let raw = k8s_pb::api::authentication::v1::TokenReview {
        spec: Some(k8s_pb::api::authentication::v1::TokenReviewSpec {
            token: Some(token.clone()),
            audiences: vec![],
        }),
        ..Default::default()
    };
    let (code, body) = post(
        &admin,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        "application/vnd.kubernetes.protobuf",
        protobuf(
            "authentication.k8s.io/v1",
            "TokenReview",
            raw.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["user"]["username"], USER);

    // The account may not review tokens without a grant.
    let builder = client_with_token(&cluster, &token).await;
    let theirs: Api<TokenReview> = Api::all(builder);
    let refused = theirs
        .create(&PostParams::default(), &token_review(&token, None))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}")
    };
    assert_eq!(status.code, 403);
    cluster.shutdown().await;
}
