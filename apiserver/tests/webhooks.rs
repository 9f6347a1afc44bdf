//! Admission webhooks: the API server calls an in-test HTTPS webhook (certificates
//! from rcgen, its CA as caBundle) the way kube-apiserver does.

mod common;
#[path = "common/webhook.rs"]
mod webhook_server;

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use common::*;
use serde_json::{Value, json};
use webhook_server::*;

const CM: &str = "/api/v1/namespaces/default/configmaps";
const MWC: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const VWC: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

async fn install(a: SocketAddr, mutating: bool, name: &str, hooks: Vec<Value>) {
    let (path, kind) = if mutating {
        (MWC, "MutatingWebhookConfiguration")
    } else {
        (VWC, "ValidatingWebhookConfiguration")
    };
    let r = req(a, "POST", path, Some(&configuration(kind, name, hooks))).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

fn cm(name: &str) -> Value {
    configmap(name, json!({"k": "v"}))
}

// ---------------------------------------------------------------------------------

#[tokio::test]
async fn denied_create_returns_the_webhooks_status_and_stores_nothing() {
    let hook = start_hook(|path, r| match path {
        "/forbid" => deny(
            r,
            json!({"code": 403, "message": "no configmaps today", "reason": "Forbidden"}),
        ),
        _ => deny(r, json!({})),
    })
    .await;
    let s = server().await;
    let a = s.addr();
    install(
        a,
        false,
        "deny",
        vec![webhook(
            "deny.example.com",
            &hook.url("/forbid"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    let st = assert_status(&r, 403, "Forbidden");
    assert_eq!(
        st["message"],
        "admission webhook \"deny.example.com\" denied the request: no configmaps today"
    );
    assert_eq!(req(a, "GET", &format!("{CM}/x"), None).await.status, 404);
    assert_eq!(s.writes().get("create", "configmaps"), 0);

    // Without a status: kube's 400 and "without explanation".
    let r = req(a, "DELETE", &format!("{VWC}/deny"), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    install(
        a,
        false,
        "deny2",
        vec![webhook(
            "deny2.example.com",
            &hook.url("/bare"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("y"))).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.json()["message"],
        "admission webhook \"deny2.example.com\" denied the request without explanation"
    );
    assert_eq!(req(a, "GET", &format!("{CM}/y"), None).await.status, 404);
}

#[tokio::test]
async fn mutating_patch_is_stored_and_the_review_is_complete() {
    let hook = start_hook(|_, r| {
        patch(
            r,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
                        {"op": "replace", "path": "/data/k", "value": "patched"}]),
        )
    })
    .await;
    let s = server().await;
    let a = s.addr();
    install(
        a,
        true,
        "mutate",
        vec![webhook("mutate.example.com", &hook.url("/m"), &hook.ca_b64)],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["metadata"]["labels"]["mutated"], "yes");
    let got = req(a, "GET", &format!("{CM}/x"), None).await.json();
    assert_eq!(got["metadata"]["labels"]["mutated"], "yes");
    assert_eq!(got["data"]["k"], "patched");

    let reviews = hook.received("/m");
    assert_eq!(reviews.len(), 1);
    let rv = &reviews[0];
    assert_eq!(rv["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(rv["kind"], "AdmissionReview");
    let q = &rv["request"];
    assert_eq!(q["uid"].as_str().unwrap().len(), 36);
    assert_eq!(
        q["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        q["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(q["requestKind"], q["kind"]);
    assert_eq!(q["requestResource"], q["resource"]);
    assert_eq!(q["name"], "x");
    assert_eq!(q["namespace"], "default");
    assert_eq!(q["operation"], "CREATE");
    // Requests carry the server's token: the admin user.
    assert_eq!(q["userInfo"]["username"], "gantry-admin");
    assert_eq!(q["object"]["data"]["k"], "v");
    assert_eq!(q["object"]["metadata"]["namespace"], "default");
    assert!(q["oldObject"].is_null());
    assert_eq!(q["dryRun"], false);
    assert_eq!(q["options"]["kind"], "CreateOptions");
    assert!(q.get("subResource").is_none());

    // An update is reviewed with its old object; each review gets a fresh uid.
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/x"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"data":{"other":"1"}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let reviews = hook.received("/m");
    assert_eq!(reviews.len(), 2);
    let q = &reviews[1]["request"];
    assert_eq!(q["operation"], "UPDATE");
    assert_eq!(q["options"]["kind"], "UpdateOptions");
    assert_eq!(q["oldObject"]["data"]["k"], "patched");
    assert_eq!(q["object"]["data"]["other"], "1");
    assert_ne!(q["uid"], reviews[0]["request"]["uid"]);

    // Server-side apply creating an object is a CREATE.
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/applied?fieldManager=test"),
        &[("Content-Type", "application/apply-patch+yaml")],
        b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v\n",
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["metadata"]["labels"]["mutated"], "yes");
    assert_eq!(hook.received("/m")[2]["request"]["operation"], "CREATE");
}

#[tokio::test]
async fn mutations_run_in_name_order_and_validation_sees_the_result() {
    let hook = start_hook(|path, r| {
        let obj = &r["request"]["object"];
        let order = obj["metadata"]["annotations"]["order"].as_str().unwrap_or("");
        match path {
            "/a" | "/b" => {
                let me = &path[1..];
                let value = if order.is_empty() { me.to_string() } else { format!("{order},{me}") };
                let op = if obj["metadata"]["annotations"].is_object() {
                    json!([{"op": "add", "path": "/metadata/annotations/order", "value": value}])
                } else {
                    json!([{"op": "add", "path": "/metadata/annotations", "value": {"order": value}}])
                };
                patch(r, op)
            }
            _ => allow(r),
        }
    })
    .await;
    let s = server().await;
    let a = s.addr();
    // Created in reverse order: kube sorts configurations by name.
    install(
        a,
        true,
        "b-second",
        vec![webhook("b.example.com", &hook.url("/b"), &hook.ca_b64)],
    )
    .await;
    install(
        a,
        true,
        "a-first",
        vec![webhook("a.example.com", &hook.url("/a"), &hook.ca_b64)],
    )
    .await;
    install(
        a,
        false,
        "check",
        vec![webhook("check.example.com", &hook.url("/v"), &hook.ca_b64)],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["metadata"]["annotations"]["order"], "a,b");
    let seen = hook.received("/v");
    assert_eq!(seen.len(), 1);
    let obj = &seen[0]["request"]["object"];
    assert_eq!(obj["metadata"]["annotations"]["order"], "a,b");
    // Validating webhooks see the object as stored: uid and creationTimestamp set.
    assert!(obj["metadata"]["uid"].is_string(), "{obj}");
    assert!(obj["metadata"]["creationTimestamp"].is_string(), "{obj}");
}

#[tokio::test]
async fn if_needed_webhooks_are_reinvoked_after_later_changes() {
    let hook = start_hook(|path, r| match path {
        "/label" => {
            let has = r["request"]["object"]["metadata"]["labels"]["late"].is_string();
            if has {
                allow(r)
            } else {
                patch(
                    r,
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"late": "x"}}]),
                )
            }
        }
        _ => allow(r),
    })
    .await;
    let s = server().await;
    let a = s.addr();
    let mut again = webhook("again.example.com", &hook.url("/again"), &hook.ca_b64);
    again["reinvocationPolicy"] = json!("IfNeeded");
    let once = webhook("once.example.com", &hook.url("/once"), &hook.ca_b64);
    install(a, true, "a", vec![again, once]).await;
    install(
        a,
        true,
        "b",
        vec![webhook(
            "label.example.com",
            &hook.url("/label"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(hook.count("/again"), 2, "IfNeeded is called again");
    assert_eq!(hook.count("/once"), 1, "Never is not");
    assert_eq!(
        hook.count("/label"),
        1,
        "the changing webhook is not reinvoked"
    );
    assert!(
        hook.received("/again")[1]["request"]["object"]["metadata"]["labels"]["late"].is_string()
    );

    // Nothing changed after it: no reinvocation.
    let r = req(a, "DELETE", &format!("{MWC}/b"), None).await;
    assert_eq!(r.status, 200);
    let r = req(a, "POST", CM, Some(&cm("y"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(hook.count("/again"), 3);
}

#[tokio::test]
async fn rules_that_do_not_match_are_not_called() {
    let hook = start_hook(|_, r| deny(r, json!({"message": "called"}))).await;
    let s = server().await;
    let a = s.addr();
    let rule = |groups: Value, resources: Value, ops: Value, scope: &str| {
        let mut h = webhook("x.example.com", &hook.url("/x"), &hook.ca_b64);
        h["rules"] = json!([{ "apiGroups": groups, "apiVersions": ["*"], "operations": ops, "resources": resources, "scope": scope }]);
        h
    };
    let mut hooks = vec![
        rule(json!(["apps"]), json!(["*"]), json!(["*"]), "*"),
        rule(json!([""]), json!(["secrets"]), json!(["*"]), "*"),
        rule(json!([""]), json!(["configmaps"]), json!(["DELETE"]), "*"),
        rule(json!([""]), json!(["configmaps"]), json!(["*"]), "Cluster"),
        rule(json!([""]), json!(["configmaps/status"]), json!(["*"]), "*"),
        rule(json!(["*"]), json!(["*"]), json!(["*"]), "Namespaced"),
    ];
    for (i, h) in hooks.iter_mut().enumerate() {
        h["name"] = json!(format!("h{i}.example.com"));
    }
    // The last rule matches namespaced objects: kept apart to test namespaces.
    let namespaced = hooks.pop().unwrap();
    install(a, false, "nomatch", hooks).await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(hook.count("/x"), 0);

    install(a, false, "namespaced", vec![namespaced]).await;
    // Namespaces are cluster-scoped: not sent to a Namespaced rule.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces", Some(&ns)).await.status,
        201
    );
    assert_eq!(hook.count("/x"), 0);
    let r = req(a, "POST", CM, Some(&cm("y"))).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(hook.count("/x"), 1);
    // Webhook configurations themselves are never sent to webhooks.
    assert_eq!(
        req(a, "DELETE", &format!("{VWC}/nomatch"), None)
            .await
            .status,
        200
    );
    assert_eq!(hook.count("/x"), 1);
}

#[tokio::test]
async fn namespace_and_object_selectors() {
    let hook = start_hook(|_, r| allow(r)).await;
    let s = server().await;
    let a = s.addr();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"env": "prod"}}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces", Some(&ns)).await.status,
        201
    );
    let mut by_ns = webhook("ns.example.com", &hook.url("/ns"), &hook.ca_b64);
    by_ns["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]});
    by_ns["rules"][0]["resources"] = json!(["configmaps", "namespaces"]);
    let mut by_obj = webhook("obj.example.com", &hook.url("/obj"), &hook.ca_b64);
    by_obj["objectSelector"] = json!({"matchLabels": {"app": "web"}});
    install(a, false, "selectors", vec![by_ns, by_obj]).await;

    assert_eq!(req(a, "POST", CM, Some(&cm("plain"))).await.status, 201);
    assert_eq!((hook.count("/ns"), hook.count("/obj")), (0, 0));
    let r = req(
        a,
        "POST",
        "/api/v1/namespaces/prod/configmaps",
        Some(&cm("in-prod")),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!((hook.count("/ns"), hook.count("/obj")), (1, 0));
    let mut labelled = cm("web");
    labelled["metadata"]["labels"] = json!({"app": "web"});
    assert_eq!(req(a, "POST", CM, Some(&labelled)).await.status, 201);
    assert_eq!((hook.count("/ns"), hook.count("/obj")), (1, 1));
    // Removing the label still matches (the old object has it).
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/web"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"metadata":{"labels":null}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(hook.count("/obj"), 2);
    // A Namespace is matched by its own labels.
    let ns2 = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod2", "labels": {"env": "prod"}}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces", Some(&ns2))
            .await
            .status,
        201
    );
    let ns3 = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "labels": {"env": "dev"}}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces", Some(&ns3))
            .await
            .status,
        201
    );
    let ns_reviews: Vec<Value> = hook
        .received("/ns")
        .into_iter()
        .filter(|r| r["request"]["resource"]["resource"] == "namespaces")
        .collect();
    assert_eq!(ns_reviews.len(), 1);
    assert_eq!(ns_reviews[0]["request"]["name"], "prod2");
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn delete_reviews_carry_the_old_object() {
    let hook = start_hook(|path, r| match path {
        "/patching" => patch(
            r,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]),
        ),
        "/deny" if r["request"]["name"] == "keep" => {
            deny(r, json!({"code": 403, "message": "kept"}))
        }
        _ => allow(r),
    })
    .await;
    let s = server().await;
    let a = s.addr();
    let mut v = webhook("del.example.com", &hook.url("/deny"), &hook.ca_b64);
    v["rules"][0]["operations"] = json!(["DELETE"]);
    install(a, false, "del", vec![v]).await;
    for n in ["x", "keep", "y"] {
        assert_eq!(req(a, "POST", CM, Some(&cm(n))).await.status, 201);
    }
    let r = req(a, "DELETE", &format!("{CM}/x"), None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let q = hook.received("/deny")[0]["request"].clone();
    assert_eq!(q["operation"], "DELETE");
    assert!(q["object"].is_null());
    assert_eq!(q["oldObject"]["metadata"]["name"], "x");
    assert_eq!(q["options"]["kind"], "DeleteOptions");
    let r = req(a, "DELETE", &format!("{CM}/keep"), None).await;
    assert_eq!(r.status, 403, "{}", r.body);
    // The webhook's status is returned as is (it set no reason).
    let st = r.json();
    assert!(st.get("reason").is_none(), "{st}");
    assert_eq!(
        st["message"],
        "admission webhook \"del.example.com\" denied the request: kept"
    );
    assert_eq!(req(a, "GET", &format!("{CM}/keep"), None).await.status, 200);
    // A collection delete with a denied member deletes nothing.
    let r = req(a, "DELETE", CM, None).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(req(a, "GET", &format!("{CM}/y"), None).await.status, 200);

    // A mutating webhook may not patch a DELETE.
    let mut m = webhook(
        "patch-del.example.com",
        &hook.url("/patching"),
        &hook.ca_b64,
    );
    m["rules"][0]["operations"] = json!(["DELETE"]);
    install(a, true, "patch-del", vec![m]).await;
    let r = req(a, "DELETE", &format!("{CM}/y"), None).await;
    let st = assert_status(&r, 500, "InternalError");
    assert_eq!(
        st["message"],
        "Internal error occurred: admission webhook \"patch-del.example.com\" attempted to modify the object, which is not supported for this operation"
    );
    assert_eq!(req(a, "GET", &format!("{CM}/y"), None).await.status, 200);
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn status_subresource_rules() {
    let hook = start_hook(|_, r| allow(r)).await;
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let mut h = webhook("status.example.com", &hook.url("/s"), &hook.ca_b64);
    h["rules"] = json!([{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["widgets/status"]}]);
    install(a, false, "status", vec![h]).await;
    let w = "/apis/example.com/v1/namespaces/default/widgets";
    assert_eq!(
        req(a, "POST", w, Some(&widget("w", json!({"replicas": 1}))))
            .await
            .status,
        201
    );
    let r = raw(
        a,
        "PATCH",
        &format!("{w}/w"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"spec":{"replicas":2}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(hook.count("/s"), 0);
    let r = raw(
        a,
        "PATCH",
        &format!("{w}/w/status"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"status":{"replicas":2}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let q = hook.received("/s")[0]["request"].clone();
    assert_eq!(q["subResource"], "status");
    assert_eq!(q["kind"]["kind"], "Widget");
    assert_eq!(q["operation"], "UPDATE");
    assert_eq!(q["object"]["status"]["replicas"], 2);
}

#[tokio::test]
async fn timeouts_follow_the_failure_policy() {
    let hook = start_hook(|_, r| Reply {
        delay: Duration::from_secs(4),
        ..allow(r)
    })
    .await;
    let s = server().await;
    let a = s.addr();
    let mut slow = webhook("slow.example.com", &hook.url("/slow"), &hook.ca_b64);
    slow["timeoutSeconds"] = json!(1);
    install(a, false, "slow", vec![slow.clone()]).await;
    let started = std::time::Instant::now();
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "timeoutSeconds is enforced"
    );
    let st = assert_status(&r, 500, "InternalError");
    assert_eq!(
        st["message"],
        format!(
            "Internal error occurred: failed calling webhook \"slow.example.com\": failed to call webhook: Post \"{}?timeout=1s\": context deadline exceeded",
            hook.url("/slow")
        )
    );
    assert_eq!(req(a, "GET", &format!("{CM}/x"), None).await.status, 404);

    slow["failurePolicy"] = json!("Ignore");
    let cfg = req(a, "GET", &format!("{VWC}/slow"), None).await.json();
    let mut cfg2 = cfg.clone();
    cfg2["webhooks"] = json!([slow]);
    let r = req(a, "PUT", &format!("{VWC}/slow"), Some(&cfg2)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

#[tokio::test]
async fn unreachable_and_untrusted_webhooks_follow_the_failure_policy() {
    let hook = start_hook(|_, r| allow(r)).await;
    let other_ca = start_hook(|_, r| allow(r)).await.ca_b64.clone();
    let s = server().await;
    let a = s.addr();
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closed_url = format!(
        "https://127.0.0.1:{}/x",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    install(
        a,
        false,
        "down",
        vec![webhook("down.example.com", &closed_url, &hook.ca_b64)],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    let st = assert_status(&r, 500, "InternalError");
    let msg = st["message"].as_str().unwrap();
    assert!(msg.starts_with(&format!("Internal error occurred: failed calling webhook \"down.example.com\": failed to call webhook: Post \"{closed_url}?timeout=10s\": ")), "{msg}");
    assert!(msg.to_lowercase().contains("connection refused"), "{msg}");
    assert_eq!(req(a, "GET", &format!("{CM}/x"), None).await.status, 404);
    assert_eq!(
        req(a, "DELETE", &format!("{VWC}/down"), None).await.status,
        200
    );

    // The right server, the wrong CA: a TLS failure.
    install(
        a,
        false,
        "tls",
        vec![webhook("tls.example.com", &hook.url("/t"), &other_ca)],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    let st = assert_status(&r, 500, "InternalError");
    let msg = st["message"].as_str().unwrap();
    assert!(
        msg.contains("failed calling webhook \"tls.example.com\""),
        "{msg}"
    );
    assert!(msg.contains("certificate"), "{msg}");
    assert_eq!(hook.count("/t"), 0);
    // With Ignore the write goes through.
    let mut ignore = webhook("tls.example.com", &hook.url("/t"), &other_ca);
    ignore["failurePolicy"] = json!("Ignore");
    let mut cfg = req(a, "GET", &format!("{VWC}/tls"), None).await.json();
    cfg["webhooks"] = json!([ignore]);
    assert_eq!(
        req(a, "PUT", &format!("{VWC}/tls"), Some(&cfg))
            .await
            .status,
        200
    );
    assert_eq!(req(a, "POST", CM, Some(&cm("x"))).await.status, 201);
    // A caBundle that is not PEM.
    let mut junk = webhook(
        "junk.example.com",
        &hook.url("/t"),
        &base64::engine::general_purpose::STANDARD.encode("not a pem"),
    );
    junk["rules"][0]["operations"] = json!(["*"]);
    install(a, false, "junk", vec![junk]).await;
    let r = req(a, "POST", CM, Some(&cm("z"))).await;
    let st = assert_status(&r, 500, "InternalError");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("could not get REST client: unable to load root certificates"),
        "{st}"
    );
}

#[tokio::test]
async fn invalid_responses_are_failures() {
    let hook = start_hook(|path, r| match path {
        "/patch" => patch(r, json!([])),
        "/uid" => reply(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": {"uid": "not-the-uid", "allowed": true}})),
        "/garbage" => Reply { delay: Duration::ZERO, status: 200, body: b"<html>".to_vec() },
        "/huge" => Reply { delay: Duration::ZERO, status: 200, body: vec![b' '; 9 << 20] },
        "/500" => Reply { delay: Duration::ZERO, status: 500, body: vec![] },
        "/code" => deny(r, json!({"code": 1000, "message": "weird code"})),
        "/badpatch" => reply(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": {"uid": uid(r), "allowed": true, "patchType": "JSONPatch",
                                            "patch": base64::engine::general_purpose::STANDARD.encode(br#"[{"op":"remove","path":"/nope"}]"#)}})),
        _ => allow(r),
    })
    .await;
    let s = server().await;
    let a = s.addr();
    let cases = [
        (
            "/patch",
            false,
            "received invalid webhook response: validating webhook may not return response.patch",
        ),
        (
            "/uid",
            false,
            "received invalid webhook response: expected response.uid=",
        ),
        (
            "/garbage",
            false,
            "received invalid webhook response: couldn't decode response",
        ),
        ("/huge", false, "webhook response was larger than"),
        (
            "/500",
            false,
            "the server responded with the status code 500",
        ),
    ];
    for (i, (path, mutating, want)) in cases.iter().enumerate() {
        let name = format!("case{i}");
        install(
            a,
            *mutating,
            &name,
            vec![webhook(
                &format!("{name}.example.com"),
                &hook.url(path),
                &hook.ca_b64,
            )],
        )
        .await;
        let r = req(a, "POST", CM, Some(&cm(&name))).await;
        let st = assert_status(&r, 500, "InternalError");
        let msg = st["message"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!(
                "Internal error occurred: failed calling webhook \"{name}.example.com\": "
            )),
            "{msg}"
        );
        assert!(msg.contains(want), "{path}: {msg}");
        assert_eq!(
            req(a, "GET", &format!("{CM}/{name}"), None).await.status,
            404
        );
        assert_eq!(
            req(a, "DELETE", &format!("{VWC}/{name}"), None)
                .await
                .status,
            200
        );
    }
    // A denial with an impossible HTTP code is a 400.
    install(
        a,
        false,
        "code",
        vec![webhook(
            "code.example.com",
            &hook.url("/code"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("c"))).await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(
        r.json()["message"],
        "admission webhook \"code.example.com\" denied the request: weird code"
    );
    assert_eq!(
        req(a, "DELETE", &format!("{VWC}/code"), None).await.status,
        200
    );
    // A patch that does not apply is an internal error, whatever the failure policy.
    let mut bad = webhook("badpatch.example.com", &hook.url("/badpatch"), &hook.ca_b64);
    bad["failurePolicy"] = json!("Ignore");
    install(a, true, "badpatch", vec![bad]).await;
    let r = req(a, "POST", CM, Some(&cm("p"))).await;
    assert_status(&r, 500, "InternalError");
    assert_eq!(req(a, "GET", &format!("{CM}/p"), None).await.status, 404);
}

#[tokio::test]
async fn dry_run_and_side_effects() {
    let hook = start_hook(|_, r| {
        patch(
            r,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"dry": "run"}}]),
        )
    })
    .await;
    let s = server().await;
    let a = s.addr();
    // v1 accepts only None and NoneOnDryRun for new configurations.
    let mut unknown = webhook("unknown.example.com", &hook.url("/u"), &hook.ca_b64);
    unknown["sideEffects"] = json!("Unknown");
    let r = req(
        a,
        "POST",
        MWC,
        Some(&configuration(
            "MutatingWebhookConfiguration",
            "unknown",
            vec![unknown],
        )),
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(
        st["message"],
        "MutatingWebhookConfiguration.admissionregistration.k8s.io \"unknown\" is invalid: webhooks[0].sideEffects: Unsupported value: \"Unknown\": supported values: \"None\", \"NoneOnDryRun\""
    );
    let mut dry = webhook("dry.example.com", &hook.url("/d"), &hook.ca_b64);
    dry["sideEffects"] = json!("NoneOnDryRun");
    install(a, true, "dry", vec![dry]).await;
    let r = req(a, "POST", &format!("{CM}?dryRun=All"), Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["metadata"]["labels"]["dry"], "run");
    let q = hook.received("/d")[0]["request"].clone();
    assert_eq!(q["dryRun"], true);
    assert_eq!(q["options"]["dryRun"], json!(["All"]));
    assert_eq!(req(a, "GET", &format!("{CM}/x"), None).await.status, 404);
}

#[tokio::test]
async fn warnings_become_warning_headers() {
    let hook = start_hook(|_, r| {
        reply(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "response": {"uid": uid(r), "allowed": true, "warnings": ["be \"careful\"", "second"],
                                  "auditAnnotations": {"ignored": "yes"}}}))
    })
    .await;
    let s = server().await;
    let a = s.addr();
    install(
        a,
        false,
        "warn",
        vec![webhook("warn.example.com", &hook.url("/w"), &hook.ca_b64)],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.header("Warning"),
        vec!["299 - \"be \\\"careful\\\"\"", "299 - \"second\""]
    );
}

#[tokio::test]
async fn invalid_configurations_are_rejected_and_defaults_applied() {
    let s = server().await;
    let a = s.addr();
    let ca = base64::engine::general_purpose::STANDARD.encode("x");
    let good = webhook("good.example.com", "https://127.0.0.1:1/x", &ca);
    let cases: Vec<(Value, &str)> = vec![
        (
            {
                let mut h = good.clone();
                h["clientConfig"]["url"] = json!("http://127.0.0.1:1/x");
                h
            },
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        ),
        (
            {
                let mut h = good.clone();
                h["timeoutSeconds"] = json!(31);
                h
            },
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
        (
            {
                let mut h = good.clone();
                h["clientConfig"]["service"] = json!({"namespace": "default", "name": "hook"});
                h
            },
            "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
        ),
        (
            {
                let mut h = good.clone();
                h.as_object_mut().unwrap().remove("sideEffects");
                h
            },
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        ),
        (
            {
                let mut h = good.clone();
                h["rules"][0]["operations"] = json!(["CREATE", "PATCH"]);
                h
            },
            "webhooks[0].rules[0].operations[1]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
        ),
        (
            {
                let mut h = good.clone();
                h["failurePolicy"] = json!("Sometimes");
                h
            },
            "webhooks[0].failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
        ),
        (
            {
                let mut h = good.clone();
                h["rules"][0]["scope"] = json!("Galaxy");
                h
            },
            "webhooks[0].rules[0].scope: Unsupported value: \"Galaxy\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
        ),
        (
            {
                let mut h = good.clone();
                h["admissionReviewVersions"] = json!(["v2"]);
                h
            },
            "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, v1beta1",
        ),
        (
            {
                let mut h = good.clone();
                h["name"] = json!("short");
                h
            },
            "webhooks[0].name: Invalid value: \"short\": should be a domain with at least three segments separated by dots",
        ),
        (
            {
                let mut h = good.clone();
                h["matchConditions"] = json!([{"name": "c", "expression": "object.("}]);
                h
            },
            "webhooks[0].matchConditions[0].expression: Invalid value: \"object.(\": compilation failed: ",
        ),
        (
            {
                let mut h = good.clone();
                h["namespaceSelector"] =
                    json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
                h
            },
            "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
    ];
    for (h, want) in cases {
        let r = req(
            a,
            "POST",
            VWC,
            Some(&configuration(
                "ValidatingWebhookConfiguration",
                "bad",
                vec![h],
            )),
        )
        .await;
        let st = assert_status(&r, 422, "Invalid");
        let msg = st["message"].as_str().unwrap();
        let prefix =
            "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: ";
        assert!(
            msg.starts_with(&format!("{prefix}{want}")),
            "want {want}\n got {msg}"
        );
        assert!(
            st["details"]["causes"][0]["field"]
                .as_str()
                .unwrap()
                .starts_with("webhooks[0]"),
            "{st}"
        );
    }
    let r = req(
        a,
        "POST",
        VWC,
        Some(&configuration(
            "ValidatingWebhookConfiguration",
            "dup",
            vec![good.clone(), good.clone()],
        )),
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .ends_with("webhooks[1].name: Duplicate value: \"good.example.com\""),
        "{st}"
    );

    // Defaults, as kube sets them.
    let mut svc = good.clone();
    svc["clientConfig"] = json!({"service": {"namespace": "default", "name": "hook"}});
    let r = req(
        a,
        "POST",
        MWC,
        Some(&configuration(
            "MutatingWebhookConfiguration",
            "defaults",
            vec![svc],
        )),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let h = &r.json()["webhooks"][0];
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["matchPolicy"], "Equivalent");
    assert_eq!(h["timeoutSeconds"], 10);
    assert_eq!(h["namespaceSelector"], json!({}));
    assert_eq!(h["objectSelector"], json!({}));
    assert_eq!(h["reinvocationPolicy"], "Never");
    assert_eq!(h["rules"][0]["scope"], "*");
    assert_eq!(h["clientConfig"]["service"]["port"], 443);
}

#[tokio::test]
async fn configuration_changes_apply_to_the_next_request() {
    let hook = start_hook(|path, r| match path {
        "/deny" => deny(r, json!({"code": 403, "message": "now denied"})),
        _ => allow(r),
    })
    .await;
    let s = server().await;
    let a = s.addr();
    install(
        a,
        false,
        "switch",
        vec![webhook(
            "switch.example.com",
            &hook.url("/allow"),
            &hook.ca_b64,
        )],
    )
    .await;
    assert_eq!(req(a, "POST", CM, Some(&cm("one"))).await.status, 201);
    let patch_body = json!([{"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": hook.url("/deny")}]);
    let r = raw(
        a,
        "PATCH",
        &format!("{VWC}/switch"),
        &[("Content-Type", "application/json-patch+json")],
        &serde_json::to_vec(&patch_body).unwrap(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(req(a, "POST", CM, Some(&cm("two"))).await.status, 403);
    assert_eq!(
        req(a, "DELETE", &format!("{VWC}/switch"), None)
            .await
            .status,
        200
    );
    assert_eq!(req(a, "POST", CM, Some(&cm("two"))).await.status, 201);
    assert_eq!((hook.count("/allow"), hook.count("/deny")), (1, 1));
}

#[tokio::test]
async fn service_references_resolve_through_endpoints() {
    let hook = start_hook(|_, r| {
        patch(
            r,
            json!([{"op": "add", "path": "/metadata/labels", "value": {"via": "service"}}]),
        )
    })
    .await;
    let s = server().await;
    let a = s.addr();
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"},
                     "spec": {"ports": [{"name": "https", "port": 443, "targetPort": hook.addr.port()}]}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces/default/services", Some(&svc))
            .await
            .status,
        201
    );
    let mut h = webhook("svc.example.com", "", &hook.ca_b64);
    h["clientConfig"] = json!({"service": {"namespace": "default", "name": "hook", "path": "/svc"}, "caBundle": hook.ca_b64});
    install(a, true, "svc", vec![h]).await;
    // No endpoints yet: a failure.
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    let st = assert_status(&r, 500, "InternalError");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("service \"default/hook\" has no endpoints"),
        "{st}"
    );
    let ep = json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hook"},
                    "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": hook.addr.port()}]}]});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces/default/endpoints", Some(&ep))
            .await
            .status,
        201
    );
    // The certificate is for hook.default.svc: TLS verifies the service name.
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["metadata"]["labels"]["via"], "service");
    assert_eq!(hook.count("/svc"), 1);
}

#[tokio::test]
async fn match_conditions_select_requests() {
    let hook = start_hook(|_, r| deny(r, json!({"code": 403, "message": "matched"}))).await;
    let s = server().await;
    let a = s.addr();
    let mut h = webhook("cond.example.com", &hook.url("/c"), &hook.ca_b64);
    h["matchConditions"] = json!([
        {"name": "not-exempt", "expression": "object.metadata.name != 'exempt'"},
        {"name": "create", "expression": "request.operation == 'CREATE'"},
    ]);
    install(a, false, "cond", vec![h]).await;
    assert_eq!(req(a, "POST", CM, Some(&cm("exempt"))).await.status, 201);
    assert_eq!(hook.count("/c"), 0);
    assert_eq!(req(a, "POST", CM, Some(&cm("other"))).await.status, 403);
    assert_eq!(hook.count("/c"), 1);

    // Hostile expressions: deep nesting neither crashes compilation nor evaluation;
    // an over-long one is rejected.
    let deep = format!("{}true{}", "(".repeat(2000), ")".repeat(2000));
    let negations = format!("{}true", "!".repeat(4000));
    for (i, expr) in [deep, negations].into_iter().enumerate() {
        let mut h = webhook("deep.example.com", &hook.url("/deep"), &hook.ca_b64);
        h["matchConditions"] = json!([{"name": "deep", "expression": expr}]);
        let name = format!("deep{i}");
        let r = req(
            a,
            "POST",
            VWC,
            Some(&configuration(
                "ValidatingWebhookConfiguration",
                &name,
                vec![h],
            )),
        )
        .await;
        assert!(r.status == 201 || r.status == 422, "{}", r.body);
        let r = req(a, "POST", CM, Some(&cm(&format!("after-{name}")))).await;
        assert!(r.status == 201 || r.status == 403, "{}", r.body);
        req(a, "DELETE", &format!("{VWC}/{name}"), None).await;
    }
    let mut h = webhook("long.example.com", &hook.url("/deep"), &hook.ca_b64);
    h["matchConditions"] =
        json!([{"name": "long", "expression": format!("true{}", " && true".repeat(1000))}]);
    let r = req(
        a,
        "POST",
        VWC,
        Some(&configuration(
            "ValidatingWebhookConfiguration",
            "long",
            vec![h],
        )),
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("expression is longer than"),
        "{st}"
    );
}

/// A matchCondition worth 20^6 comprehension iterations is stopped at kube's
/// per-expression cost limit, promptly; the failure policy decides.
#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn costly_match_conditions_are_stopped() {
    let hook = start_hook(|_, r| allow(r)).await;
    let s = server().await;
    let a = s.addr();
    let l = format!(
        "[{}]",
        (0..20).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    );
    let bomb =
        format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, {l}.all(e, {l}.all(f, true))))))");
    let mut h = webhook("costly.example.com", &hook.url("/c"), &hook.ca_b64);
    h["matchConditions"] = json!([{"name": "costly", "expression": bomb}]);
    install(a, false, "costly", vec![h]).await;
    let started = std::time::Instant::now();
    let r = req(a, "POST", CM, Some(&cm("x"))).await;
    let st = assert_status(&r, 500, "InternalError");
    assert_eq!(
        st["message"],
        "Internal error occurred: failed calling webhook \"costly.example.com\": failed to evaluate matchCondition \"costly\": operation cancelled: actual cost limit exceeded"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(hook.count("/c"), 0);
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn scale_subresource_sends_scale_objects() {
    let hook = start_hook(|_, r| {
        let replicas = r["request"]["object"]["spec"]["replicas"]
            .as_i64()
            .unwrap_or(0);
        if replicas > 5 {
            deny(r, json!({"code": 403, "message": "at most 5 replicas"}))
        } else {
            allow(r)
        }
    })
    .await;
    let s = server().await;
    let a = s.addr();
    let mut h = webhook("cap.example.com", &hook.url("/cap"), &hook.ca_b64);
    h["rules"] = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments/scale"]}]);
    install(a, false, "cap", vec![h]).await;
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let dp = "/apis/apps/v1/namespaces/default/deployments";
    assert_eq!(req(a, "POST", dp, Some(&d)).await.status, 201);
    let scale = |n: i64| serde_json::to_vec(&json!({"spec": {"replicas": n}})).unwrap();
    let ct = [("Content-Type", "application/merge-patch+json")];
    let r = raw(a, "PATCH", &format!("{dp}/d/scale"), &ct, &scale(9)).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(
        r.json()["message"],
        "admission webhook \"cap.example.com\" denied the request: at most 5 replicas"
    );
    let got = req(a, "GET", &format!("{dp}/d"), None).await.json();
    assert_eq!(got["spec"]["replicas"], 1);
    let r = raw(a, "PATCH", &format!("{dp}/d/scale"), &ct, &scale(3)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let q = hook.received("/cap")[1]["request"].clone();
    assert_eq!(
        q["kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert_eq!(
        q["resource"],
        json!({"group": "apps", "version": "v1", "resource": "deployments"})
    );
    assert_eq!(q["subResource"], "scale");
    assert_eq!(q["oldObject"]["spec"]["replicas"], 1);
    // A plain update of the deployment is not a scale request.
    let r = raw(
        a,
        "PATCH",
        &format!("{dp}/d"),
        &ct,
        br#"{"spec":{"replicas":8}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(hook.count("/cap"), 2);
}

#[tokio::test]
// `s` the server and `a` its address, as throughout these tests.
#[allow(clippy::many_single_char_names)]
async fn equivalent_match_policy_matches_other_versions() {
    let hook = start_hook(|_, r| allow(r)).await;
    let s = server().await;
    let a = s.addr();
    install_widgets(a).await;
    let rule = json!([{"apiGroups": ["example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]);
    let mut eq = webhook("eq.example.com", &hook.url("/eq"), &hook.ca_b64);
    eq["rules"] = rule.clone();
    let mut exact = webhook("exact.example.com", &hook.url("/exact"), &hook.ca_b64);
    exact["rules"] = rule;
    exact["matchPolicy"] = json!("Exact");
    install(a, false, "versions", vec![eq, exact]).await;
    let mut w = widget("old", json!({"replicas": 1}));
    w["apiVersion"] = json!("example.com/v1beta1");
    let r = req(
        a,
        "POST",
        "/apis/example.com/v1beta1/namespaces/default/widgets",
        Some(&w),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(hook.count("/exact"), 0);
    let q = hook.received("/eq")[0]["request"].clone();
    assert_eq!(q["kind"]["version"], "v1");
    assert_eq!(q["requestKind"]["version"], "v1beta1");
    assert_eq!(q["resource"]["version"], "v1");
    assert_eq!(q["requestResource"]["version"], "v1beta1");
    assert_eq!(q["object"]["apiVersion"], "example.com/v1");
}

#[tokio::test]
async fn hostile_mutations_are_contained() {
    let hook = start_hook(|path, r| {
        let op = r["request"]["operation"].as_str().unwrap_or("");
        match (path, op) {
            ("/rename", "UPDATE") => patch(
                r,
                json!([{"op": "replace", "path": "/metadata/name", "value": "renamed"}]),
            ),
            ("/rekind", _) => patch(
                r,
                json!([{"op": "replace", "path": "/kind", "value": "Secret"}]),
            ),
            ("/move", "CREATE") => patch(
                r,
                json!([{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}]),
            ),
            _ => allow(r),
        }
    })
    .await;
    let s = server().await;
    let a = s.addr();
    assert_eq!(req(a, "POST", CM, Some(&cm("x"))).await.status, 201);
    let before = req(a, "GET", &format!("{CM}/x"), None).await.json();
    let ct = [("Content-Type", "application/merge-patch+json")];

    install(
        a,
        true,
        "rename",
        vec![webhook(
            "rename.example.com",
            &hook.url("/rename"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/x"),
        &ct,
        br#"{"data":{"n":"1"}}"#,
    )
    .await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(
        st["message"],
        "ConfigMap \"x\" is invalid: metadata.name: Invalid value: \"renamed\": field is immutable"
    );
    assert_eq!(
        req(a, "GET", &format!("{CM}/renamed"), None).await.status,
        404
    );
    assert_eq!(
        req(a, "DELETE", &format!("{MWC}/rename"), None)
            .await
            .status,
        200
    );

    install(
        a,
        true,
        "rekind",
        vec![webhook(
            "rekind.example.com",
            &hook.url("/rekind"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = raw(
        a,
        "PATCH",
        &format!("{CM}/x"),
        &ct,
        br#"{"data":{"n":"1"}}"#,
    )
    .await;
    assert_status(&r, 500, "InternalError");
    assert_eq!(
        req(a, "DELETE", &format!("{MWC}/rekind"), None)
            .await
            .status,
        200
    );

    install(
        a,
        true,
        "move",
        vec![webhook(
            "move.example.com",
            &hook.url("/move"),
            &hook.ca_b64,
        )],
    )
    .await;
    let r = req(a, "POST", CM, Some(&cm("moved"))).await;
    assert_status(&r, 400, "BadRequest");
    assert_eq!(
        req(
            a,
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/moved",
            None
        )
        .await
        .status,
        404
    );

    let after = req(a, "GET", &format!("{CM}/x"), None).await.json();
    assert_eq!(before, after, "nothing was half-applied");
}

#[tokio::test]
async fn namespace_object_requests_carry_their_name_as_namespace() {
    let hook = start_hook(|_, r| allow(r)).await;
    let s = server().await;
    let a = s.addr();
    let mut h = webhook("ns.example.com", &hook.url("/ns"), &hook.ca_b64);
    h["rules"] = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["namespaces"], "scope": "Cluster"}]);
    install(a, false, "ns", vec![h]).await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}});
    assert_eq!(
        req(a, "POST", "/api/v1/namespaces", Some(&ns)).await.status,
        201
    );
    assert_eq!(
        req(a, "DELETE", "/api/v1/namespaces/team", None)
            .await
            .status,
        200
    );
    let got = hook.received("/ns");
    assert_eq!(got.len(), 2);
    assert!(got[0]["request"].get("namespace").is_none(), "{}", got[0]);
    assert_eq!(got[1]["request"]["operation"], "DELETE");
    assert_eq!(got[1]["request"]["namespace"], "team");
}

#[tokio::test]
async fn connections_are_reused() {
    let hook = start_hook(|_, r| allow(r)).await;
    let s = server().await;
    let a = s.addr();
    install(
        a,
        false,
        "reuse",
        vec![webhook("reuse.example.com", &hook.url("/r"), &hook.ca_b64)],
    )
    .await;
    for i in 0..5 {
        assert_eq!(
            req(a, "POST", CM, Some(&cm(&format!("c{i}")))).await.status,
            201
        );
    }
    assert_eq!(hook.count("/r"), 5);
    assert_eq!(
        hook.connections.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[tokio::test]
async fn concurrent_writes_during_slow_webhooks_are_not_lost() {
    let hook = start_hook(|_, r| Reply {
        delay: Duration::from_millis(300),
        ..allow(r)
    })
    .await;
    let s = server().await;
    let a = s.addr();
    assert_eq!(req(a, "POST", CM, Some(&cm("shared"))).await.status, 201);
    install(
        a,
        false,
        "slowish",
        vec![webhook(
            "slowish.example.com",
            &hook.url("/s"),
            &hook.ca_b64,
        )],
    )
    .await;
    let ct = [("Content-Type", "application/merge-patch+json")];
    let path = format!("{CM}/shared");
    let (r1, r2) = tokio::join!(
        raw(a, "PATCH", &path, &ct, br#"{"data":{"one":"1"}}"#),
        raw(a, "PATCH", &path, &ct, br#"{"data":{"two":"2"}}"#),
    );
    assert_eq!(
        (r1.status, r2.status),
        (200, 200),
        "{} {}",
        r1.body,
        r2.body
    );
    let got = req(a, "GET", &path, None).await.json();
    assert_eq!(got["data"]["one"], "1", "{got}");
    assert_eq!(got["data"]["two"], "2", "{got}");
    // The write that lost the race was admitted again on the new object.
    assert!(hook.count("/s") >= 3, "{}", hook.count("/s"));
}

#[tokio::test]
async fn stored_configurations_with_unsafe_side_effects_refuse_dry_run() {
    // v1 rejects sideEffects Unknown on create, so such a configuration can only come
    // from stored data: seed a durable store with one, then start the server on it.
    let hook = start_hook(|_, r| allow(r)).await;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = gantry_apiserver::storage::Store::open(Some(dir.path()), 100).unwrap();
        let mut h = webhook("unsafe.example.com", &hook.url("/u"), &hook.ca_b64);
        h["sideEffects"] = json!("Unknown");
        let mut cfg = configuration("ValidatingWebhookConfiguration", "unsafe", vec![h]);
        cfg["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000001");
        let key =
            "admissionregistration.k8s.io/validatingwebhookconfigurations//unsafe".to_string();
        store
            .commit(|_| {
                Ok::<_, std::convert::Infallible>((
                    (),
                    vec![gantry_apiserver::storage::Write::Put(key, cfg)],
                ))
            })
            .unwrap()
            .unwrap();
    }
    let s = server_with(gantry_apiserver::Config {
        data_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    })
    .await;
    let a = s.addr();
    let r = req(a, "POST", &format!("{CM}?dryRun=All"), Some(&cm("x"))).await;
    let st = assert_status(&r, 400, "BadRequest");
    assert_eq!(
        st["message"],
        "admission webhook \"unsafe.example.com\" does not support dry run"
    );
    assert_eq!(hook.count("/u"), 0);
    // Real requests call it.
    assert_eq!(req(a, "POST", CM, Some(&cm("x"))).await.status, 201);
    assert_eq!(hook.count("/u"), 1);
    // Updating the configuration keeps the value it already had (kube's ratcheting).
    let mut cfg = req(a, "GET", &format!("{VWC}/unsafe"), None).await.json();
    cfg["webhooks"][0]["timeoutSeconds"] = json!(5);
    let r = req(a, "PUT", &format!("{VWC}/unsafe"), Some(&cfg)).await;
    assert_eq!(r.status, 200, "{}", r.body);
}
