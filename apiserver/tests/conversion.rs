//! CRD conversion webhooks: the API server stores custom resources at the storage
//! version and serves other versions through an in-test HTTPS conversion webhook
//! (certificates from rcgen, its CA as caBundle), as kube-apiserver does.

mod common;
#[path = "common/webhook.rs"]
mod webhook_server;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use webhook_server::*;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const V1: &str = "/apis/example.com/v1/namespaces/default/gadgets";
const V1ALPHA1: &str = "/apis/example.com/v1alpha1/namespaces/default/gadgets";

/// How the test webhook answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// Renames `spec.oldField` (v1alpha1) to `spec.newField` (v1) and back.
    Convert,
    /// `result.status: Failure` with a message.
    Fail,
    /// Converts, but renames the object.
    Rename,
    /// Converts, but answers every object twice.
    Twice,
    /// Answers after kube's timeout.
    Hang,
}

/// One object converted to `desired` by renaming the field.
fn rename_field(obj: &Value, desired: &str) -> Value {
    let mut o = obj.clone();
    let (from, to) = if desired.ends_with("/v1") {
        ("oldField", "newField")
    } else {
        ("newField", "oldField")
    };
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
        && let Some(v) = spec.remove(from)
    {
        spec.insert(to.into(), v);
    }
    o["apiVersion"] = json!(desired);
    o
}

fn answer(mode: Mode, review: &Value) -> Reply {
    let req = &review["request"];
    let desired = req["desiredAPIVersion"].as_str().unwrap();
    let mut objects: Vec<Value> = req["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| rename_field(o, desired))
        .collect();
    let mut result = json!({ "status": "Success" });
    match mode {
        Mode::Convert | Mode::Hang => {}
        Mode::Fail => {
            result = json!({ "status": "Failure", "message": "gadgets cannot be converted today" });
        }
        Mode::Rename => objects[0]["metadata"]["name"] = json!("other"),
        Mode::Twice => objects.extend(objects.clone()),
    }
    let mut r = reply(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": { "uid": req["uid"], "result": result, "convertedObjects": objects },
    }));
    if mode == Mode::Hang {
        r.delay = Duration::from_secs(40);
    }
    r
}

/// A webhook whose mode the test switches.
async fn converter() -> (Hook, Arc<Mutex<Mode>>) {
    let mode = Arc::new(Mutex::new(Mode::Convert));
    let m = mode.clone();
    let hook = start_hook(move |_, review| answer(*m.lock().unwrap(), review)).await;
    (hook, mode)
}

/// gadgets.example.com: v1alpha1 (served, `spec.oldField`, `spec.size` defaults to 3)
/// and v1 (served, storage, `spec.newField`), both with status and scale subresources.
fn gadget_crd(hook: &Hook) -> Value {
    let version = |name: &str, field: &str, storage: bool| {
        let mut props = json!({
            field: { "type": "string" }, "size": { "type": "integer" }, "replicas": { "type": "integer" },
        });
        if name == "v1alpha1" {
            props["size"]["default"] = json!(3);
        }
        json!({
            "name": name, "served": true, "storage": storage,
            "subresources": { "status": {}, "scale": {
                "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            }},
            "schema": { "openAPIV3Schema": { "type": "object", "properties": {
                "spec": { "type": "object", "properties": props },
                "status": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
            }}},
        })
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "gadgets.example.com" },
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": { "plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList" },
            "conversion": { "strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": { "url": hook.url("/convert"), "caBundle": hook.ca_b64 },
            }},
            "versions": [version("v1alpha1", "oldField", false), version("v1", "newField", true)],
        },
    })
}

async fn install(a: SocketAddr, hook: &Hook) {
    let r = req(a, "POST", CRDS, Some(&gadget_crd(hook))).await;
    assert_eq!(r.status, 201, "{}", r.body);
}

// Takes a `json!` literal by value so each call reads as data.
#[allow(clippy::needless_pass_by_value)]
fn gadget(version: &str, name: &str, spec: Value) -> Value {
    json!({ "apiVersion": format!("example.com/{version}"), "kind": "Gadget",
            "metadata": { "name": name }, "spec": spec })
}

/// The reviews the webhook received, as (desiredAPIVersion, number of objects).
fn reviews(hook: &Hook) -> Vec<(String, usize)> {
    hook.received("/convert")
        .iter()
        .map(|r| {
            (
                r["request"]["desiredAPIVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                r["request"]["objects"].as_array().unwrap().len(),
            )
        })
        .collect()
}

#[tokio::test]
async fn create_at_a_non_storage_version_is_stored_at_the_storage_version() {
    let (hook, _) = converter().await;
    let s = server().await;
    let a = s.addr();
    install(a, &hook).await;

    let r = req(
        a,
        "POST",
        V1ALPHA1,
        Some(&gadget("v1alpha1", "g", json!({ "oldField": "x" }))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let created = r.json();
    assert_eq!(created["apiVersion"], "example.com/v1alpha1");
    assert_eq!(
        created["spec"],
        json!({ "oldField": "x", "size": 3 }),
        "defaults of v1alpha1"
    );
    assert_eq!(
        reviews(&hook),
        vec![
            ("example.com/v1".into(), 1),
            ("example.com/v1alpha1".into(), 1)
        ],
        "to the storage version, then back for the answer"
    );
    let sent = &hook.received("/convert")[0];
    assert_eq!(sent["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(sent["kind"], "ConversionReview");
    assert_eq!(
        sent["request"]["objects"][0]["apiVersion"],
        "example.com/v1alpha1"
    );

    // Stored at v1: read there without the webhook.
    let before = hook.count("/convert");
    let stored = req(a, "GET", &format!("{V1}/g"), None).await.json();
    assert_eq!(stored["apiVersion"], "example.com/v1");
    assert_eq!(stored["spec"], json!({ "newField": "x", "size": 3 }));
    assert_eq!(stored["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        hook.count("/convert"),
        before,
        "an object at the desired version is not sent"
    );

    let back = req(a, "GET", &format!("{V1ALPHA1}/g"), None).await.json();
    assert_eq!(back["spec"], json!({ "oldField": "x", "size": 3 }));
    assert_eq!(
        back["metadata"]["resourceVersion"],
        stored["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn updates_and_patches_at_a_non_storage_version_convert_both_ways() {
    let (hook, _) = converter().await;
    let s = server().await;
    let a = s.addr();
    install(a, &hook).await;
    let r = req(
        a,
        "POST",
        V1,
        Some(&gadget("v1", "g", json!({ "newField": "x" }))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);

    let mut live = req(a, "GET", &format!("{V1ALPHA1}/g"), None).await.json();
    live["spec"]["oldField"] = json!("put");
    let r = req(a, "PUT", &format!("{V1ALPHA1}/g"), Some(&live)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["oldField"], "put");
    let stored = req(a, "GET", &format!("{V1}/g"), None).await.json();
    assert_eq!(stored["spec"]["newField"], "put");
    assert!(stored["spec"].get("oldField").is_none(), "{stored}");

    let r = raw(
        a,
        "PATCH",
        &format!("{V1ALPHA1}/g"),
        &[("Content-Type", "application/merge-patch+json")],
        br#"{"spec":{"oldField":"merged"}}"#,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let stored = req(a, "GET", &format!("{V1}/g"), None).await.json();
    assert_eq!(stored["spec"]["newField"], "merged");

    let applied =
        serde_json::to_vec(&gadget("v1alpha1", "g", json!({ "oldField": "applied" }))).unwrap();
    let r = raw(
        a,
        "PATCH",
        &format!("{V1ALPHA1}/g?fieldManager=test&force=true"),
        &[("Content-Type", "application/apply-patch+yaml")],
        &applied,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["oldField"], "applied");
    let stored = req(a, "GET", &format!("{V1}/g"), None).await.json();
    assert_eq!(stored["spec"]["newField"], "applied");

    // The status subresource at v1alpha1.
    let mut live = req(a, "GET", &format!("{V1ALPHA1}/g"), None).await.json();
    live["status"] = json!({ "phase": "Ready" });
    let r = req(a, "PUT", &format!("{V1ALPHA1}/g/status"), Some(&live)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["apiVersion"], "example.com/v1alpha1");
    assert_eq!(r.json()["spec"]["oldField"], "applied");
    let stored = req(a, "GET", &format!("{V1}/g/status"), None).await.json();
    assert_eq!(stored["status"]["phase"], "Ready");
    assert_eq!(stored["spec"]["newField"], "applied", "{stored}");
}

#[tokio::test]
async fn the_scale_subresource_at_a_non_storage_version_converts_both_ways() {
    let (hook, _) = converter().await;
    let s = server().await;
    let a = s.addr();
    install(a, &hook).await;
    let body = gadget("v1", "g", json!({ "newField": "x", "replicas": 1 }));
    assert_eq!(req(a, "POST", V1, Some(&body)).await.status, 201);
    let scale = req(a, "GET", &format!("{V1ALPHA1}/g/scale"), None)
        .await
        .json();
    assert_eq!(scale["spec"]["replicas"], 1, "{scale}");
    assert_eq!(reviews(&hook), vec![("example.com/v1alpha1".into(), 1)]);
    let mut scale = scale;
    scale["spec"]["replicas"] = json!(5);
    let r = req(a, "PUT", &format!("{V1ALPHA1}/g/scale"), Some(&scale)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["spec"]["replicas"], 5);
    let stored = req(a, "GET", &format!("{V1}/g"), None).await.json();
    assert_eq!(stored["spec"]["newField"], "x", "stored at v1: {stored}");
    assert_eq!(stored["spec"]["replicas"], 5);
    assert!(stored["spec"].get("oldField").is_none(), "{stored}");
}

#[tokio::test]
async fn a_list_converts_each_item_and_a_watch_each_event() {
    let (hook, mode) = converter().await;
    let s = server().await;
    let a = s.addr();
    install(a, &hook).await;
    for name in ["a", "b"] {
        let r = req(
            a,
            "POST",
            V1,
            Some(&gadget("v1", name, json!({ "newField": name }))),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    assert_eq!(hook.count("/convert"), 0, "created at the storage version");

    let list = req(a, "GET", V1ALPHA1, None).await.json();
    assert_eq!(list["apiVersion"], "example.com/v1alpha1");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["apiVersion"], "example.com/v1alpha1");
    assert_eq!(items[1]["spec"], json!({ "oldField": "b", "size": 3 }));
    // As kube-apiserver decodes a list read from etcd: one review per item.
    assert_eq!(
        reviews(&hook),
        vec![
            ("example.com/v1alpha1".into(), 1),
            ("example.com/v1alpha1".into(), 1)
        ]
    );
    *mode.lock().unwrap() = Mode::Fail;
    let r = req(a, "GET", V1ALPHA1, None).await;
    assert_eq!(
        conversion_failure(&r),
        "conversion webhook for example.com/v1, Kind=Gadget failed: gadgets cannot be converted today"
    );
    *mode.lock().unwrap() = Mode::Convert;

    let mut watch = RawWatch::open(a, &format!("{V1ALPHA1}?watch=1")).await;
    assert_eq!(watch.status, 200);
    for _ in 0..2 {
        let event = watch.next().await.unwrap();
        assert_eq!(event["type"], "ADDED");
        assert_eq!(event["object"]["apiVersion"], "example.com/v1alpha1");
        assert!(event["object"]["spec"]["oldField"].is_string(), "{event}");
    }
    let r = req(
        a,
        "POST",
        V1,
        Some(&gadget("v1", "c", json!({ "newField": "c" }))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "ADDED");
    assert_eq!(event["object"]["metadata"]["name"], "c");
    assert_eq!(
        event["object"]["spec"],
        json!({ "oldField": "c", "size": 3 })
    );

    // An event that fails to convert ends the watch with an ERROR event.
    *mode.lock().unwrap() = Mode::Fail;
    let r = req(
        a,
        "POST",
        V1,
        Some(&gadget("v1", "d", json!({ "newField": "d" }))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 500);
    assert_eq!(
        event["object"]["message"],
        "conversion webhook for example.com/v1, Kind=Gadget failed: gadgets cannot be converted today"
    );
    assert!(watch.next().await.is_none(), "the watch ended");
}

/// The Status of a failed conversion: kube's 500 without a reason.
#[track_caller]
fn conversion_failure(r: &Raw) -> String {
    assert_eq!(r.status, 500, "{}", r.body);
    let s = r.json();
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["code"], 500);
    assert!(s.get("reason").is_none(), "{s}");
    s["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn refused_conversions_answer_as_kube_and_store_nothing() {
    let (hook, mode) = converter().await;
    let s = server().await;
    let a = s.addr();
    install(a, &hook).await;
    let r = req(
        a,
        "POST",
        V1,
        Some(&gadget("v1", "kept", json!({ "newField": "k" }))),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let cases = [
        (Mode::Fail, "failed: gadgets cannot be converted today"),
        (
            Mode::Rename,
            "returned invalid object: must have the same name: new != other",
        ),
        (Mode::Twice, "returned 2 objects, expected 1"),
    ];
    for (m, what) in cases {
        *mode.lock().unwrap() = m;
        let r = req(
            a,
            "POST",
            V1ALPHA1,
            Some(&gadget("v1alpha1", "new", json!({ "oldField": "x" }))),
        )
        .await;
        assert_eq!(
            conversion_failure(&r),
            format!("conversion webhook for example.com/v1alpha1, Kind=Gadget {what}"),
            "{m:?}"
        );
        let g = req(a, "GET", &format!("{V1}/new"), None).await;
        assert_eq!(g.status, 404, "{m:?}: nothing stored: {}", g.body);
        // Reads at v1alpha1 fail the same way (the object is at v1).
        let r = req(a, "GET", &format!("{V1ALPHA1}/kept"), None).await;
        let what = what.replace("new != other", "kept != other");
        assert_eq!(
            conversion_failure(&r),
            format!("conversion webhook for example.com/v1, Kind=Gadget {what}"),
            "{m:?}"
        );
    }
    // An update that fails to convert changes nothing.
    *mode.lock().unwrap() = Mode::Convert;
    let mut live = req(a, "GET", &format!("{V1ALPHA1}/kept"), None)
        .await
        .json();
    *mode.lock().unwrap() = Mode::Fail;
    live["spec"]["oldField"] = json!("changed");
    let r = req(a, "PUT", &format!("{V1ALPHA1}/kept"), Some(&live)).await;
    conversion_failure(&r);
    let stored = req(a, "GET", &format!("{V1}/kept"), None).await.json();
    assert_eq!(stored["spec"]["newField"], "k");
}

#[tokio::test]
async fn a_webhook_that_hangs_fails_after_kubes_30_seconds() {
    let (hook, mode) = converter().await;
    let s = server().await;
    let a = s.addr();
    install(a, &hook).await;
    *mode.lock().unwrap() = Mode::Hang;
    let started = std::time::Instant::now();
    let r = req(
        a,
        "POST",
        V1ALPHA1,
        Some(&gadget("v1alpha1", "slow", json!({}))),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(
        conversion_failure(&r),
        format!(
            "conversion webhook for example.com/v1alpha1, Kind=Gadget failed: Post \"{}?timeout=30s\": net/http: request canceled (Client.Timeout exceeded while awaiting headers)",
            hook.url("/convert")
        )
    );
    assert!(
        took >= Duration::from_secs(30) && took < Duration::from_secs(39),
        "{took:?}"
    );
    assert_eq!(req(a, "GET", &format!("{V1}/slow"), None).await.status, 404);
}

#[tokio::test]
async fn crd_conversion_settings_are_validated_as_kube() {
    let (hook, _) = converter().await;
    let s = server().await;
    let a = s.addr();
    let mut no_webhook = gadget_crd(&hook);
    no_webhook["spec"]["conversion"] = json!({ "strategy": "Webhook" });
    let r = req(a, "POST", CRDS, Some(&no_webhook)).await;
    let st = assert_status(&r, 422, "Invalid");
    assert_eq!(
        st["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: [spec.conversion.webhookClientConfig: Required value: required when strategy is set to Webhook, spec.conversion.conversionReviewVersions: Required value]"
    );

    let mut none_with_webhook = gadget_crd(&hook);
    none_with_webhook["spec"]["conversion"]["strategy"] = json!("None");
    let st = assert_status(
        &req(a, "POST", CRDS, Some(&none_with_webhook)).await,
        422,
        "Invalid",
    );
    let causes = st["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 2, "{st}");
    assert_eq!(
        causes[0]["message"],
        "Forbidden: should not be set when strategy is not set to Webhook"
    );

    let mut preserve = gadget_crd(&hook);
    preserve["spec"]["preserveUnknownFields"] = json!(true);
    let st = assert_status(&req(a, "POST", CRDS, Some(&preserve)).await, 422, "Invalid");
    let messages: Vec<&str> = st["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"].as_str().unwrap())
        .collect();
    assert_eq!(
        messages,
        [
            "Invalid value: true: must be false in order to use defaults in the schema",
            "Invalid value: \"Webhook\": must be None if spec.preserveUnknownFields is true",
            "Invalid value: true: cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ]
    );
    let mut http = gadget_crd(&hook);
    http["spec"]["conversion"]["webhook"]["clientConfig"]["url"] = json!("http://127.0.0.1:1/x");
    let st = assert_status(&req(a, "POST", CRDS, Some(&http)).await, 422, "Invalid");
    assert_eq!(
        st["message"],
        "CustomResourceDefinition.apiextensions.k8s.io \"gadgets.example.com\" is invalid: spec.conversion.webhookClientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]"
    );
    // Stored with the service port defaulted, as kube.
    let mut svc = gadget_crd(&hook);
    svc["spec"]["conversion"]["webhook"]["clientConfig"] =
        json!({ "service": { "namespace": "default", "name": "hook" } });
    let r = req(a, "POST", CRDS, Some(&svc)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.json()["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"],
        443
    );
}

/// One request through a kube client: the JSON answer, or (code, reason, message).
async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, (u16, String, String)> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", "application/json")
        .body(
            body.map(|b| serde_json::to_vec(b).unwrap())
                .unwrap_or_default(),
        )
        .unwrap();
    client.request::<Value>(req).await.map_err(|e| match e {
        kube::Error::Api(s) => (s.code, s.reason, s.message),
        other => panic!("{other}"),
    })
}

/// The same requests to the embedded server and to a real kube-apiserver get the same
/// answers: create at v1alpha1 and read at v1, and a webhook answering Failure, renaming
/// the object or answering too many objects.
#[gantry_test_support::backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_answers_as_kube_apiserver(backend: gantry_test_support::Backend) {
    let (hook, mode) = converter().await;
    let cluster = gantry_test_support::Cluster::start(backend).await;
    let client = cluster.client();
    call(&client, "POST", CRDS, Some(&gadget_crd(&hook)))
        .await
        .unwrap();
    // Served once the CRD is established (the real server takes a moment).
    for _ in 0..100 {
        if call(&client, "GET", V1ALPHA1, None).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let created = call(
        &client,
        "POST",
        V1ALPHA1,
        Some(&gadget("v1alpha1", "g", json!({ "oldField": "x" }))),
    )
    .await
    .unwrap();
    assert_eq!(created["apiVersion"], "example.com/v1alpha1");
    assert_eq!(created["spec"], json!({ "oldField": "x", "size": 3 }));
    let stored = call(&client, "GET", &format!("{V1}/g"), None)
        .await
        .unwrap();
    assert_eq!(stored["apiVersion"], "example.com/v1");
    assert_eq!(stored["spec"], json!({ "newField": "x", "size": 3 }));
    assert_eq!(
        stored["metadata"]["managedFields"][0]["apiVersion"],
        "example.com/v1alpha1"
    );

    *mode.lock().unwrap() = Mode::Fail;
    let failed = |input: &str| {
        (
            500,
            String::new(),
            format!(
                "conversion webhook for {input}, Kind=Gadget failed: gadgets cannot be converted today"
            ),
        )
    };
    assert_eq!(
        call(&client, "GET", &format!("{V1ALPHA1}/g"), None)
            .await
            .unwrap_err(),
        failed("example.com/v1")
    );
    assert_eq!(
        call(
            &client,
            "POST",
            V1ALPHA1,
            Some(&gadget("v1alpha1", "new", json!({ "oldField": "y" })))
        )
        .await
        .unwrap_err(),
        failed("example.com/v1alpha1")
    );
    for (m, what) in [
        (
            Mode::Rename,
            "returned invalid object: must have the same name: g != other",
        ),
        (Mode::Twice, "returned 2 objects, expected 1"),
    ] {
        *mode.lock().unwrap() = m;
        assert_eq!(
            call(&client, "GET", &format!("{V1ALPHA1}/g"), None)
                .await
                .unwrap_err(),
            (
                500,
                String::new(),
                format!("conversion webhook for example.com/v1, Kind=Gadget {what}")
            ),
            "{m:?}"
        );
    }
    let (code, reason, _) = call(&client, "GET", &format!("{V1}/new"), None)
        .await
        .unwrap_err();
    assert_eq!((code, reason.as_str()), (404, "NotFound"), "nothing stored");
    cluster.shutdown().await;
}
