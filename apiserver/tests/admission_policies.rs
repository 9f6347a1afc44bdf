//! `ValidatingAdmissionPolicy` and its bindings, on both backends: served and
//! validated as kube serves them, and enforced on writes with kube's statuses,
//! messages and `Warning` headers; costly expressions are stopped at kube's limit.

use std::time::{Duration, Instant};

use gantry_test_support::{Backend, Cluster, backends};
use http_body_util::BodyExt;
use serde_json::{Value, json};

const NS: &str = "vap-ci";
const AR: &str = "/apis/admissionregistration.k8s.io/v1";

/// The answer to one request: status code, JSON body, `Warning` headers.
struct Answer {
    code: u16,
    body: Value,
    warnings: Vec<String>,
}

async fn send(client: &kube::Client, method: &str, path: &str, body: Option<&Value>) -> Answer {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type)
        .header("Accept", "application/json")
        .body(kube::client::Body::from(bytes))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    Answer {
        code,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        warnings,
    }
}

async fn create(client: &kube::Client, path: &str, obj: Value) {
    let a = send(client, "POST", path, Some(&obj)).await;
    assert_eq!(a.code, 201, "{obj}\n{}", a.body);
}

fn configmap(name: &str, labels: Value, data: Value) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    cm["metadata"]["labels"] = labels;
    cm["data"] = data;
    cm
}

fn policy(name: &str, spec: Value) -> Value {
    let mut p = json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}});
    p["spec"] = spec;
    p
}

fn binding(name: &str, spec: Value) -> Value {
    let mut b = json!({"apiVersion": "admissionregistration.k8s.io/v1",
                       "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}});
    b["spec"] = spec;
    b
}

fn rules(resources: &str, operations: Value) -> Value {
    let mut rule = json!({"apiGroups": [""], "apiVersions": ["v1"], "resources": [resources]});
    rule["operations"] = operations;
    json!([rule])
}

/// Sends the request until its answer has `code` (a real server's policies take
/// effect a moment after they are written); the last answer.
async fn until_code(
    client: &kube::Client,
    code: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Answer {
    until(client, method, path, body, |a| a.code == code).await
}

/// Sends the request until `done` holds for its answer (a real server's policies
/// and their params take effect a moment after they are written); the last answer.
async fn until(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
    done: impl Fn(&Answer) -> bool,
) -> Answer {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let a = send(client, method, path, body).await;
        if done(&a) || Instant::now() > deadline {
            return a;
        }
        // Undo what got through meanwhile.
        if a.code == 201
            && let Some(name) = body
                .and_then(|b| b.pointer("/metadata/name"))
                .and_then(Value::as_str)
        {
            send(client, "DELETE", &format!("{path}/{name}"), None).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn forbidden(resource: &str, name: &str, message: &str) -> String {
    format!("{resource} \"{name}\" is forbidden: {message}")
}

async fn setup(client: &kube::Client) {
    for (ns, labels) in [(NS, json!({"env": "prod"})), ("vap-other", json!({}))] {
        create(
            client,
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": ns, "labels": labels}}),
        )
        .await;
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_deny_and_warn_as_kube(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let c = cluster.client();
    setup(&c).await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicies"),
        policy(
            "cm-rules",
            json!({
                "matchConstraints": {
                    "resourceRules": rules("configmaps", json!(["CREATE", "UPDATE"])),
                    "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                        "operations": ["*"], "resources": ["configmaps"],
                        "resourceNames": ["skipped"]}],
                    "namespaceSelector": {"matchLabels": {"env": "prod"}},
                },
                "matchConditions": [{"name": "not-exempt",
                    "expression": "!('exempt' in object.metadata.?labels.orValue({}))"}],
                "variables": [{"name": "keys", "expression": "has(object.data) ? object.data.size() : 0"}],
                "validations": [
                    {"expression": "variables.keys <= 2", "message": "at most two keys"},
                    {"expression": "object.metadata.name.size() < 10",
                     "messageExpression": "'name ' + object.metadata.name + ' is too long'",
                     "reason": "Forbidden"},
                    {"expression": "!has(object.data) || !('secret' in object.data)"},
                ],
            }),
        ),
    )
    .await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding(
            "cm-rules-deny",
            json!({"policyName": "cm-rules", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    let cms = format!("/api/v1/namespaces/{NS}/configmaps");

    // message → Invalid, 422.
    let big = configmap("big", json!({}), json!({"a": "1", "b": "2", "c": "3"}));
    let a = until_code(&c, 422, "POST", &cms, Some(&big)).await;
    let denial = "ValidatingAdmissionPolicy 'cm-rules' with binding 'cm-rules-deny' denied request: at most two keys";
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["message"], forbidden("configmaps", "big", denial));
    assert_eq!(a.body["reason"], "Invalid");
    assert_eq!(a.body["details"]["causes"], json!([{"message": denial}]));
    assert_eq!(a.body["details"]["name"], "big");

    // messageExpression and reason Forbidden → 403.
    let long = configmap("averylongname", json!({}), json!({}));
    let a = send(&c, "POST", &cms, Some(&long)).await;
    assert_eq!(a.code, 403, "{}", a.body);
    assert_eq!(
        a.body["message"],
        forbidden(
            "configmaps",
            "averylongname",
            "ValidatingAdmissionPolicy 'cm-rules' with binding 'cm-rules-deny' denied request: name averylongname is too long"
        )
    );
    // Without a message: the expression.
    let a = send(
        &c,
        "POST",
        &cms,
        Some(&configmap("s", json!({}), json!({"secret": "x"}))),
    )
    .await;
    assert_eq!(a.code, 422);
    assert!(
        a.body["message"].as_str().unwrap().ends_with(
            "denied request: failed expression: !has(object.data) || !('secret' in object.data)"
        ),
        "{}",
        a.body
    );

    // Not matched: excluded by name, matchConditions false, namespace not selected.
    let skipped = configmap("skipped", json!({}), json!({"a": "1", "b": "2", "c": "3"}));
    assert_eq!(send(&c, "POST", &cms, Some(&skipped)).await.code, 201);
    let exempt = configmap(
        "exempt",
        json!({"exempt": "yes"}),
        json!({"a": "1", "b": "2", "c": "3"}),
    );
    assert_eq!(send(&c, "POST", &cms, Some(&exempt)).await.code, 201);
    let other = "/api/v1/namespaces/vap-other/configmaps";
    assert_eq!(send(&c, "POST", other, Some(&big)).await.code, 201);

    // Updates are held to it too; an allowed one passes.
    let ok = configmap("ok", json!({}), json!({"a": "1"}));
    assert_eq!(send(&c, "POST", &cms, Some(&ok)).await.code, 201);
    let patch = json!({"data": {"b": "2", "c": "3"}});
    let a = send(&c, "PATCH", &format!("{cms}/ok"), Some(&patch)).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(a.body["message"], forbidden("configmaps", "ok", denial));

    // Deletes: `object` is null, `oldObject` the live object.
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicies"),
        policy(
            "keep",
            json!({"matchConstraints": {"resourceRules": rules("configmaps", json!(["DELETE"]))},
                   "validations": [{"expression": "object == null && oldObject.data.a != '1'",
                                    "message": "keep it"}]}),
        ),
    )
    .await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding(
            "keep-b",
            json!({"policyName": "keep", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    // A dry run waits for the policy to be in force (a real server's takes a moment).
    until_code(&c, 422, "DELETE", &format!("{cms}/ok?dryRun=All"), None).await;
    let a = send(&c, "DELETE", &format!("{cms}/ok"), None).await;
    assert_eq!(
        a.body["message"],
        forbidden(
            "configmaps",
            "ok",
            "ValidatingAdmissionPolicy 'keep' with binding 'keep-b' denied request: keep it"
        ),
        "{}",
        a.body
    );
    let gone = configmap("gone", json!({}), json!({"a": "2"}));
    assert_eq!(send(&c, "POST", &cms, Some(&gone)).await.code, 201);
    assert_eq!(
        send(&c, "DELETE", &format!("{cms}/gone"), None).await.code,
        200
    );

    // Warn: admitted, with kube's Warning header.
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding("cm-rules-warn", json!({"policyName": "cm-rules", "validationActions": ["Warn"],
            "matchResources": {"namespaceSelector": {}, "objectSelector": {"matchLabels": {"warn": "me"}}}})),
    )
    .await;
    send(
        &c,
        "DELETE",
        &format!("{AR}/validatingadmissionpolicybindings/cm-rules-deny"),
        None,
    )
    .await;
    let warned = configmap(
        "warned",
        json!({"warn": "me"}),
        json!({"a": "1", "b": "2", "c": "3"}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let a = loop {
        let a = send(&c, "POST", &cms, Some(&warned)).await;
        if a.code == 201 && !a.warnings.is_empty() || Instant::now() > deadline {
            break a;
        }
        send(&c, "DELETE", &format!("{cms}/warned"), None).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(a.code, 201, "{}", a.body);
    assert_eq!(
        a.warnings,
        vec![
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'cm-rules' with binding 'cm-rules-warn': at most two keys\""
        ]
    );
    cluster.shutdown().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_take_their_params(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let c = cluster.client();
    setup(&c).await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicies"),
        policy(
            "max-keys",
            json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": rules("secrets", json!(["CREATE"]))},
                "validations": [{"expression": "size(object.data) <= int(params.data.max)",
                                 "messageExpression": "'at most ' + params.data.max + ' keys'"}],
            }),
        ),
    )
    .await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding(
            "max-keys-b",
            json!({"policyName": "max-keys", "validationActions": ["Deny"],
            "paramRef": {"name": "limits", "namespace": NS, "parameterNotFoundAction": "Deny"}}),
        ),
    )
    .await;
    let secrets = format!("/api/v1/namespaces/{NS}/secrets");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "two"},
                        "data": {"a": "Yg==", "b": "Yg=="}});

    // No param and Deny: a configuration error, under failurePolicy Fail.
    let a = until_code(&c, 422, "POST", &secrets, Some(&secret)).await;
    assert_eq!(
        a.body["message"],
        forbidden(
            "secrets",
            "two",
            "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-b' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        ),
        "{}",
        a.body
    );
    create(
        &c,
        &format!("/api/v1/namespaces/{NS}/configmaps"),
        configmap("limits", json!({}), json!({"max": "1"})),
    )
    .await;
    // A real server sees the new param through an informer, a moment later.
    let a = until(&c, "POST", &secrets, Some(&secret), |a| {
        a.code == 422
            && a.body["message"]
                .as_str()
                .is_some_and(|m| !m.contains("no params found"))
    })
    .await;
    assert_eq!(
        a.body["message"],
        forbidden(
            "secrets",
            "two",
            "ValidatingAdmissionPolicy 'max-keys' with binding 'max-keys-b' denied request: at most 1 keys"
        ),
        "{}",
        a.body
    );
    send(
        &c,
        "PATCH",
        &format!("/api/v1/namespaces/{NS}/configmaps/limits"),
        Some(&json!({"data": {"max": "2"}})),
    )
    .await;
    assert_eq!(
        until_code(&c, 201, "POST", &secrets, Some(&secret))
            .await
            .code,
        201
    );

    // A selector selecting nothing, with Allow: not evaluated.
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding("max-keys-sel", json!({"policyName": "max-keys", "validationActions": ["Deny"],
            "paramRef": {"selector": {"matchLabels": {"none": "such"}}, "parameterNotFoundAction": "Allow"}})),
    )
    .await;
    let three = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "three"},
                       "data": {"a": "Yg==", "b": "Yg==", "c": "Yg=="}});
    let a = until_code(&c, 422, "POST", &secrets, Some(&three)).await;
    assert!(
        a.body["message"]
            .as_str()
            .unwrap()
            .contains("binding 'max-keys-b'"),
        "{}",
        a.body
    );
    cluster.shutdown().await;
}

/// Nested comprehensions worth 20^6 iterations: kube stops them at its per-expression
/// limit; so does the embedded server, promptly, and failurePolicy decides.
#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costly_expressions_are_stopped(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let c = cluster.client();
    setup(&c).await;
    let l = format!(
        "[{}]",
        (0..20).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    );
    let bomb =
        format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, {l}.all(e, {l}.all(f, true))))))");
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicies"),
        policy(
            "costly",
            json!({"matchConstraints": {"resourceRules": rules("secrets", json!(["CREATE"]))},
                   "validations": [{"expression": bomb}]}),
        ),
    )
    .await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding(
            "costly-b",
            json!({"policyName": "costly", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    let secrets = format!("/api/v1/namespaces/{NS}/secrets");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let started = Instant::now();
    let a = until_code(&c, 422, "POST", &secrets, Some(&secret)).await;
    assert_eq!(
        a.body["message"],
        forbidden(
            "secrets",
            "s",
            &format!(
                "ValidatingAdmissionPolicy 'costly' with binding 'costly-b' denied request: expression '{bomb}' resulted in error: operation cancelled: actual cost limit exceeded"
            )
        ),
        "{}",
        a.body
    );
    assert!(started.elapsed() < Duration::from_secs(30));

    // failurePolicy Ignore: the error admits.
    let patch = json!({"spec": {"failurePolicy": "Ignore"}});
    let a = send(
        &c,
        "PATCH",
        &format!("{AR}/validatingadmissionpolicies/costly"),
        Some(&patch),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(
        until_code(&c, 201, "POST", &secrets, Some(&secret))
            .await
            .code,
        201
    );
    cluster.shutdown().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_and_bindings_are_validated_and_served(backend: Backend) {
    let cluster = Cluster::start(backend).await;
    let c = cluster.client();
    let policies = format!("{AR}/validatingadmissionpolicies");
    let bindings = format!("{AR}/validatingadmissionpolicybindings");
    let bad = policy(
        "bad",
        json!({"failurePolicy": "Sometimes",
               "matchConstraints": {"resourceRules": rules("configmaps", json!(["CREATE"]))},
               "variables": [{"name": "1x", "expression": "true"}],
               "validations": [{"expression": "true", "reason": "Teapot", "message": "  "}]}),
    );
    let a = send(&c, "POST", &policies, Some(&bad)).await;
    assert_eq!(a.code, 422);
    assert_eq!(
        a.body["message"],
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"bad\" is invalid: [spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\", spec.variables[0].name: Invalid value: \"1x\": must be a valid CEL identifier, spec.validations[0].message: Invalid value: \"  \": must be non-empty if specified, spec.validations[0].reason: Unsupported value: \"Teapot\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"]"
    );
    let empty = policy(
        "empty",
        json!({"matchConstraints": {"resourceRules": rules("configmaps", json!(["CREATE"]))}}),
    );
    let a = send(&c, "POST", &policies, Some(&empty)).await;
    assert_eq!(
        a.body["message"],
        "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"empty\" is invalid: [spec.validations: Required value: validations or auditAnnotations must contain at least one item, spec.auditAnnotations: Required value: validations or auditAnnotations must contain at least one item]"
    );
    let a = send(
        &c,
        "POST",
        &policies,
        Some(&policy(
            "syntax",
            json!({
        "matchConstraints": {"resourceRules": rules("configmaps", json!(["CREATE"]))},
        "validations": [{"expression": "object.x ==== 1"}]}),
        )),
    )
    .await;
    assert_eq!(a.code, 422);
    assert!(
        a.body["message"].as_str().unwrap().starts_with(
            "ValidatingAdmissionPolicy.admissionregistration.k8s.io \"syntax\" is invalid: spec.validations[0].expression: Invalid value: \"object.x ==== 1\": compilation failed: "
        ),
        "{}",
        a.body
    );
    let badb = binding(
        "badb",
        json!({"paramRef": {"name": "x", "selector": {}},
               "validationActions": ["Deny", "Warn", "Deny"],
               "matchResources": {"matchPolicy": "Sometimes"}}),
    );
    let a = send(&c, "POST", &bindings, Some(&badb)).await;
    assert_eq!(a.code, 422);
    assert_eq!(
        a.body["message"],
        "ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io \"badb\" is invalid: [spec.policyName: Required value, spec.paramRef.name: Forbidden: name and selector are mutually exclusive, spec.paramRef.selector: Forbidden: name and selector are mutually exclusive, spec.paramRef.parameterNotFoundAction: Required value, spec.matchResources.matchPolicy: Unsupported value: \"Sometimes\": supported values: \"Equivalent\", \"Exact\", spec.validationActions[2]: Duplicate value: \"Deny\", spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)]"
    );

    // Served: defaults, status, tables, discovery.
    let good = policy(
        "good",
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
               "matchConstraints": {"resourceRules": rules("configmaps", json!(["CREATE"]))},
               "validations": [{"expression": "true"}, {"expression": "1 == 1"}]}),
    );
    create(&c, &policies, good).await;
    create(
        &c,
        &bindings,
        binding(
            "good-b",
            json!({"policyName": "good", "validationActions": ["Audit"],
            "paramRef": {"name": "p", "parameterNotFoundAction": "Allow"}}),
        ),
    )
    .await;
    let got = send(&c, "GET", &format!("{policies}/good"), None)
        .await
        .body;
    assert_eq!(got["spec"]["failurePolicy"], "Fail");
    assert_eq!(
        got["spec"]["matchConstraints"],
        json!({"matchPolicy": "Equivalent", "namespaceSelector": {}, "objectSelector": {},
               "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                   "operations": ["CREATE"], "resources": ["configmaps"], "scope": "*"}]})
    );
    let st = send(&c, "GET", &format!("{policies}/good/status"), None).await;
    assert_eq!(st.code, 200, "{}", st.body);
    assert_eq!(st.body["metadata"]["name"], "good");

    for (path, cells) in [
        (&policies, json!(["good", 2, "v1/ConfigMap"])),
        (&bindings, json!(["good-b", "good", "*/p"])),
    ] {
        let req = http::Request::builder()
            .uri(path.as_str())
            .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
            .body(kube::client::Body::empty())
            .unwrap();
        let resp = c.send(req).await.unwrap();
        let table: Value =
            serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
        let row = &table["rows"][0]["cells"];
        assert_eq!(
            row.as_array().unwrap()[..3],
            cells.as_array().unwrap()[..],
            "{table}"
        );
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }
    let discovery = send(&c, "GET", AR, None).await.body;
    for plural in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    ] {
        assert!(
            discovery["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == plural),
            "{discovery}"
        );
    }
    assert!(
        discovery["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == "validatingadmissionpolicies/status")
    );
    cluster.shutdown().await;
}

/// Eleven validations each just under the per-expression limit spend the policy's
/// budget: kube's error, under the failure policy. Embedded only: the costs are
/// not cel-go's, so kube stops these expressions at another point.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_s_budget_is_shared_by_its_expressions() {
    let cluster = Cluster::start(Backend::Embedded).await;
    let c = cluster.client();
    setup(&c).await;
    let l = format!(
        "[{}]",
        (0..98).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
    );
    let costly = format!("{l}.all(a, {l}.all(b, {l}.all(c, true)))");
    let validations: Vec<Value> = (0..11).map(|_| json!({"expression": costly})).collect();
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicies"),
        policy(
            "spender",
            json!({"matchConstraints": {"resourceRules": rules("secrets", json!(["CREATE"]))},
                   "validations": validations}),
        ),
    )
    .await;
    create(
        &c,
        &format!("{AR}/validatingadmissionpolicybindings"),
        binding(
            "spender-b",
            json!({"policyName": "spender", "validationActions": ["Deny"]}),
        ),
    )
    .await;
    let secrets = format!("/api/v1/namespaces/{NS}/secrets");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
    let a = send(&c, "POST", &secrets, Some(&secret)).await;
    assert_eq!(a.code, 422, "{}", a.body);
    assert_eq!(
        a.body["message"],
        forbidden(
            "secrets",
            "s",
            "ValidatingAdmissionPolicy 'spender' with binding 'spender-b' denied request: validation failed due to running out of cost budget, no further validation rules will be run"
        )
    );
    // Ten of them fit.
    let patch = json!({"spec": {"validations": &validations[..10]}});
    let a = send(
        &c,
        "PATCH",
        &format!("{AR}/validatingadmissionpolicies/spender"),
        Some(&patch),
    )
    .await;
    assert_eq!(a.code, 200, "{}", a.body);
    assert_eq!(send(&c, "POST", &secrets, Some(&secret)).await.code, 201);
    cluster.shutdown().await;
}
