//! Service accounts and RBAC, on both backends: a token from `TokenRequest`
//! names the account, the account may do what its bindings grant and no
//! more (refused with kube's words), the self-reviews answer for it, and
//! kubectl's `create token`, `auth can-i` and `auth whoami` work.

use std::path::Path;
use std::time::Duration;

use gantry_test_support::differential::scenarios::kubectl_minor;
use gantry_test_support::{Backend, Cluster, backends, kubectls};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ServiceAccount};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const NS: &str = "rbac-ci";
const USER: &str = "system:serviceaccount:rbac-ci:builder";

/// Retries `check` until it returns Some (a real server's RBAC and
/// service-account caches follow writes a moment later).
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn apply(client: &Client, object: serde_json::Value) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let api: Api<kube::api::DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), NS, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let name = object["metadata"]["name"].as_str().unwrap();
    let params = kube::api::PatchParams::apply("rbac-test");
    api.patch(name, &params, &kube::api::Patch::Apply(&object))
        .await
        .unwrap();
}

/// The namespace and its service account `builder`.
async fn create_builder(admin: &Client) {
    apply(
        admin,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )
    .await;
    apply(
        admin,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"}}),
    )
    .await;
}

async fn token_for(admin: &Client, account: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let answer: TokenRequest = accounts
        .create_subresource(
            "token",
            account,
            &PostParams::default(),
            &TokenRequest::default(),
        )
        .await
        .unwrap();
    assert_eq!(answer.spec.expiration_seconds, Some(3600));
    assert_eq!(
        answer.spec.audiences,
        vec!["https://kubernetes.default.svc.cluster.local".to_string()]
    );
    answer.status.expect("a token").token
}

/// A client of `cluster` that sends `token` instead of the admin's
/// credentials.
async fn client_with_token(cluster: &Cluster, token: &str) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(cluster.kubeconfig()).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..kube::config::AuthInfo::default()
    };
    Client::try_from(config).unwrap()
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(e) => *e,
        other => panic!("not an API error: {other}"),
    }
}

async fn may(client: &Client, verb: &str, resource: &str, namespace: &str) -> (bool, String) {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = reviews
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let status = answer.status.expect("status");
    (status.allowed, status.reason.unwrap_or_default())
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_accounts_are_held_to_their_bindings(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let admin = cluster.client();
    create_builder(&admin).await;
    let token = token_for(&admin, "builder").await;
    let builder = client_with_token(&cluster, &token).await;

    // Who am I, and discovery, with no grant of its own.
    let whoami: Api<SelfSubjectReview> = Api::all(builder.clone());
    let me = whoami
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = me.status.unwrap().user_info.unwrap();
    assert_eq!(user.username.as_deref(), Some(USER));
    let groups = user.groups.unwrap();
    for group in [
        "system:serviceaccounts",
        "system:serviceaccounts:rbac-ci",
        "system:authenticated",
    ] {
        assert!(groups.iter().any(|g| g == group), "{groups:?}");
    }
    builder.apiserver_version().await.unwrap();
    builder.list_core_api_versions().await.unwrap();

    // Nothing granted: refused, in kube's words.
    let pods: Api<Pod> = Api::namespaced(builder.clone(), NS);
    let refused = api_error(pods.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(refused.code, 403);
    assert_eq!(refused.reason, "Forbidden");
    assert_eq!(
        refused.message,
        format!(
            "pods is forbidden: User \"{USER}\" cannot list resource \"pods\" in API group \"\" in the namespace \"{NS}\""
        )
    );
    let maps: Api<ConfigMap> = Api::namespaced(builder.clone(), NS);
    let refused = api_error(maps.get("settings").await.unwrap_err());
    assert_eq!(
        refused.message,
        format!(
            "configmaps \"settings\" is forbidden: User \"{USER}\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"{NS}\""
        )
    );
    assert_eq!(
        may(&builder, "list", "pods", NS).await,
        (false, String::new())
    );

    // A Role and a RoleBinding grant reading pods in the namespace only.
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-pods", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": NS}]}),
    )
    .await;
    eventually("the binding takes effect", || async {
        pods.list(&ListParams::default()).await.ok()
    })
    .await;
    assert_eq!(
        may(&builder, "list", "pods", NS).await,
        (
            true,
            format!(
                "RBAC: allowed by RoleBinding \"read-pods/{NS}\" of Role \"pod-reader\" to ServiceAccount \"builder/{NS}\""
            )
        )
    );
    assert!(!may(&builder, "delete", "pods", NS).await.0);
    assert!(!may(&builder, "list", "pods", "default").await.0);
    let elsewhere: Api<Pod> = Api::namespaced(builder.clone(), "default");
    assert_eq!(
        api_error(elsewhere.list(&ListParams::default()).await.unwrap_err()).code,
        403
    );

    // The rules review lists the grant.
    let rules: Api<SelfSubjectRulesReview> = Api::all(builder.clone());
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(NS.into()),
        },
        ..SelfSubjectRulesReview::default()
    };
    let status = rules
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!status.incomplete);
    assert!(
        status.resource_rules.iter().any(|r| {
            r.resources.as_deref() == Some(&["pods".to_string()][..])
                && r.verbs == ["get", "list", "watch"]
        }),
        "{:?}",
        status.resource_rules
    );
    assert!(
        status.resource_rules.iter().any(|r| r
            .resources
            .iter()
            .flatten()
            .any(|r| r == "selfsubjectaccessreviews")),
        "every authenticated user may review itself: {:?}",
        status.resource_rules
    );

    // The admin may do anything.
    assert!(may(&admin, "delete", "nodes", "").await.0);

    // A deleted account's token is refused, even once an account of the
    // same name exists again.
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    accounts
        .delete("builder", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the token of a deleted account is refused", || async {
        match pods.list(&ListParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 401 => Some(()),
            _ => None,
        }
    })
    .await;
    apply(
        &admin,
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder"}}),
    )
    .await;
    assert_eq!(
        api_error(pods.list(&ListParams::default()).await.unwrap_err()).code,
        401,
        "a recreated account is another account"
    );
    cluster.shutdown().await;
}

/// A `TokenRequest` for an account that does not exist is a 404, and one
/// for less than ten minutes is invalid.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_are_checked(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let admin = cluster.client();
    create_builder(&admin).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NS);
    let request = |seconds| TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(seconds),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let missing = accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "nobody",
            &PostParams::default(),
            &request(3600),
        )
        .await
        .unwrap_err();
    let missing = api_error(missing);
    assert_eq!(
        (missing.code, missing.message.as_str()),
        (404, "serviceaccounts \"nobody\" not found")
    );
    let short = accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "builder",
            &PostParams::default(),
            &request(60),
        )
        .await
        .unwrap_err();
    let short = api_error(short);
    assert_eq!(short.code, 422);
    assert!(
        short
            .message
            .contains("may not specify a duration less than 10 minutes"),
        "{}",
        short.message
    );
    let long = accounts
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "builder",
            &PostParams::default(),
            &request(7200),
        )
        .await
        .unwrap();
    assert_eq!(long.spec.expiration_seconds, Some(7200));
    cluster.shutdown().await;
}

async fn kubectl(bin: &Path, kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// A copy of the kubeconfig at `admin` whose user sends only `token` (a
/// client certificate would win over it on a real server).
fn write_token_kubeconfig(admin: &Path, token: &str, to: &Path) {
    let mut config: serde_json::Value =
        serde_yaml::from_str(&std::fs::read_to_string(admin).unwrap()).unwrap();
    for user in config["users"].as_array_mut().unwrap() {
        user["user"] = json!({ "token": token });
    }
    std::fs::write(to, serde_yaml::to_string(&config).unwrap()).unwrap();
}

/// `kubectl create token`, `auth can-i` (with `--list`) and `auth whoami`
/// with every kubectl found.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_commands(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let admin = cluster.client();
    create_builder(&admin).await;
    apply(&admin, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "edit-maps", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "map-editor"},
        "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": NS}]}))
    .await;
    apply(
        &admin,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "map-editor"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}]}),
    )
    .await;
    let kubeconfig = cluster.kubeconfig();
    let dir = tempfile::tempdir().unwrap();
    for bin in kubectls() {
        let minor = kubectl_minor(&bin).await.unwrap();
        let (ok, out, err) = kubectl(&bin, kubeconfig, &["auth", "can-i", "delete", "nodes"]).await;
        assert!(
            ok && out == "yes",
            "{} admin can-i: {out} {err}",
            bin.display()
        );
        if minor < 24 {
            // `create token` came with kubectl 1.24.
            continue;
        }
        let (ok, token, err) =
            kubectl(&bin, kubeconfig, &["create", "token", "builder", "-n", NS]).await;
        assert!(ok, "{} create token: {err}", bin.display());
        let builder_config = dir.path().join(format!("builder-{minor}"));
        write_token_kubeconfig(kubeconfig, &token, &builder_config);
        let as_builder = |args: &[&str]| args.iter().map(ToString::to_string).collect::<Vec<_>>();
        let run = |args: Vec<String>| {
            let bin = bin.clone();
            let config = builder_config.clone();
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                kubectl(&bin, &config, &args).await
            }
        };
        let (_, out, err) = eventually("the binding takes effect", || {
            let args = as_builder(&["auth", "can-i", "create", "configmaps", "-n", NS]);
            async move {
                let answer = run(args).await;
                (answer.1 == "yes").then_some(answer)
            }
        })
        .await;
        assert_eq!(out, "yes", "{err}");
        let (ok, out, _) = run(as_builder(&[
            "auth",
            "can-i",
            "delete",
            "configmaps",
            "-n",
            NS,
        ]))
        .await;
        assert!(!ok && out == "no", "{out}");
        let (ok, out, err) = run(as_builder(&["auth", "can-i", "--list", "-n", NS])).await;
        assert!(ok, "{err}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("configmaps ") && l.contains("[create get]")),
            "{out}"
        );
        let (ok, _, err) = run(as_builder(&["get", "pods", "-n", NS])).await;
        assert!(
            !ok && err.contains("cannot list resource \"pods\""),
            "{err}"
        );
        if minor >= 28 {
            let (ok, out, err) = run(as_builder(&[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ]))
            .await;
            assert!(ok, "{err}");
            assert_eq!(out, USER);
        }
    }
    cluster.shutdown().await;
}
