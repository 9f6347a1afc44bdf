//! The chart under real Helm (built from helm.sh/helm/v3 by
//! `scripts/go-tool`): `helm lint`, `helm template` with the values users
//! change, the default rendering equal to deploy/manifests/gantry.yaml, and
//! `helm install` with the image `scripts/image` pushed to a local registry.

use std::path::Path;
use std::process::Command;

use gantry_tests::sources::Registry;
use gantry_tests::tools::{
    Helm, build_image, chart_dir, repo_root, run, run_blocking, run_failing,
};
use gantry_tests::{Backend, Cluster, backends};
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use serde::Deserialize;
use serde_json::{Value, json};

/// The documents of a multi-document YAML stream (empty ones dropped).
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|de| Value::deserialize(de).expect("YAML"))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn all<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn args_of(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn env(deployment: &Value, name: &str) -> Option<Value> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| e["value"].clone())
}

/// `--set`/`--set-file` arguments for every value the tests change.
const USER_VALUES: &[&str] = &[
    "--set",
    "sharding.count=2",
    "--set",
    "leaderElection.leaseDurationSecs=30",
    "--set",
    "policies.enabled=true",
    "--set",
    "policies.certSecret=gantry-webhook-tls",
    "--set",
    "operator.otlpEndpoint=http://otel-collector.observability:4318",
    "--set",
    "watchNamespaces={team-a,team-b}",
    "--set",
    "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
];

#[test]
fn chart_lints_with_default_and_user_values() {
    let helm = Helm::new();
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let out = run(&mut helm.command(&["lint", "--strict", chart]));
    assert!(
        out.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{out}"
    );
    let mut args = vec!["lint", "--strict", chart];
    args.extend_from_slice(USER_VALUES);
    let out = run(&mut helm.command(&args));
    assert!(out.contains("0 chart(s) failed"), "{out}");
    // The check can fail: a copy of the chart with a broken template.
    let copy = tempfile::tempdir().unwrap();
    run(Command::new("cp").arg("-r").arg(chart).arg(copy.path()));
    let broken = copy.path().join("gantry/templates/service.yaml");
    let text = std::fs::read_to_string(&broken).unwrap();
    std::fs::write(&broken, text.replacen("{{- end }}", "", 1)).unwrap();
    let copied = copy.path().join("gantry");
    let out = helm
        .command(&["lint", "--strict", copied.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("[ERROR] templates/"),
        "{out:?}"
    );
}

/// deploy/manifests/gantry.yaml is the chart rendered with its defaults.
#[test]
fn default_rendering_is_the_plain_manifests() {
    let rendered = Helm::new().template(&[]);
    let file = repo_root().join("deploy/manifests/gantry.yaml");
    let manifests = std::fs::read_to_string(&file).unwrap();
    let without_header: String = manifests
        .split_inclusive('\n')
        .skip_while(|l| l.starts_with('#'))
        .collect();
    assert!(
        rendered == without_header,
        "{} is not the chart's default rendering; regenerate it (docs/running-in-a-cluster.md, \"Re-rendering the manifests\")",
        file.display()
    );
}

#[test]
fn sharding_and_leader_election() {
    let helm = Helm::new();
    let docs = documents(&helm.template(&[
        "--set",
        "sharding.count=3",
        "--set",
        "leaderElection.leaseDurationSecs=30",
    ]));
    let deployments = all(&docs, "Deployment");
    assert_eq!(deployments.len(), 3);
    for (i, d) in deployments.iter().enumerate() {
        assert_eq!(d["metadata"]["name"], format!("gantry-shard-{i}"));
        let shard = json!(i.to_string());
        assert_eq!(
            d["spec"]["selector"]["matchLabels"]["gantry.dev/shard"],
            shard
        );
        assert_eq!(
            d["spec"]["template"]["metadata"]["labels"]["gantry.dev/shard"],
            shard
        );
        let args = args_of(d);
        for expected in [
            "--shard-count=3".to_string(),
            format!("--shard-index={i}"),
            "--leader-elect".to_string(),
            "--lease-duration-secs=30".to_string(),
        ] {
            assert!(args.contains(&expected), "{expected} not in {args:?}");
        }
    }

    // A rolling update keeps a Ready Pod (a standby until the Lease is
    // released) all through an upgrade.
    assert_eq!(
        deployments[0]["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    );

    let docs = documents(&helm.template(&["--set", "leaderElection.enabled=false"]));
    assert_eq!(
        all(&docs, "Deployment")[0]["spec"]["strategy"],
        json!({"type": "Recreate"})
    );
    let args = args_of(all(&docs, "Deployment")[0]);
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--lease") || a == "--leader-elect"),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a.starts_with("--shard")), "{args:?}");
}

#[test]
fn policies_otlp_and_digest() {
    let docs = documents(&Helm::new().template(USER_VALUES));
    let d = named(&docs, "Deployment", "gantry-shard-0");
    let args = args_of(d);
    for expected in [
        "--webhook-listen=0.0.0.0:9443",
        "--webhook-service=gantry-system/gantry-webhook:443",
        "--webhook-configuration-name=gantry-policies",
        "--sync-webhook-configurations",
        "--webhook-cert=/etc/gantry/webhook/tls.crt",
        "--webhook-ca=/etc/gantry/webhook/ca.crt",
    ] {
        assert!(
            args.iter().any(|a| a == expected),
            "{expected} not in {args:?}"
        );
    }
    let service = named(&docs, "Service", "gantry-webhook");
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "https-webhook", "port": 443, "targetPort": "https-webhook", "protocol": "TCP"}])
    );
    let pod = &d["spec"]["template"]["spec"];
    assert!(pod["volumes"].as_array().unwrap().contains(
        &json!({"name": "webhook-cert", "secret": {"secretName": "gantry-webhook-tls"}})
    ));
    assert_eq!(
        env(d, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        Some(json!("http://otel-collector.observability:4318"))
    );
    assert_eq!(
        pod["containers"][0]["image"],
        "gantry@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    // Without those values: no webhook, no OTLP, the image by tag.
    let plain = documents(&Helm::new().template(&[]));
    let d = named(&plain, "Deployment", "gantry");
    assert_eq!(env(d, "OTEL_EXPORTER_OTLP_ENDPOINT"), None);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "gantry:0.1.0"
    );
    assert!(!args_of(d).iter().any(|a| a.starts_with("--webhook")));
    assert!(all(&plain, "Service").len() == 1);
}

/// Policies without `policies.certSecret`: the operator keeps the
/// certificates in `<fullname>-webhook-cert`, with rights on that Secret
/// alone (and create, which RBAC cannot limit by name, in the release
/// namespace), and pods roll one at a time so a webhook always answers.
/// With `certSecret` none of it: the files of the user's Secret.
#[test]
fn generated_webhook_certificates_get_their_secret_and_nothing_more() {
    let helm = Helm::new();
    let docs = documents(&helm.template(&[
        "--set",
        "policies.enabled=true",
        "--set",
        "replicas=2",
        "--set",
        "bindingsNamespace=gantry-bindings",
    ]));
    let d = named(&docs, "Deployment", "gantry");
    let args = args_of(d);
    assert!(
        args.contains(&"--webhook-cert-secret=gantry-system/gantry-webhook-cert".to_string()),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a.starts_with("--webhook-cert=")));
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    );
    let role = named(&docs, "Role", "gantry-webhook-cert");
    assert_eq!(role["metadata"]["namespace"], "gantry-system");
    assert_eq!(
        role["rules"],
        json!([
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["gantry-webhook-cert"],
                "verbs": ["get", "list", "watch", "update", "patch"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        ])
    );
    let binding = named(&docs, "RoleBinding", "gantry-webhook-cert");
    assert_eq!(binding["roleRef"]["name"], "gantry-webhook-cert");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "gantry", "namespace": "gantry-system"}])
    );
    // No other rule names Secrets.
    for role in all(&docs, "Role")
        .into_iter()
        .chain(all(&docs, "ClusterRole"))
    {
        if role["metadata"]["name"] != "gantry-webhook-cert" {
            assert!(!role.to_string().contains("secrets"), "{role}");
        }
    }

    let docs = documents(&helm.template(USER_VALUES));
    assert!(
        !docs
            .iter()
            .any(|d| d["metadata"]["name"] == "gantry-webhook-cert"),
        "no Role for a Secret the operator does not keep"
    );
    let args = args_of(named(&docs, "Deployment", "gantry-shard-0"));
    assert!(!args.iter().any(|a| a.starts_with("--webhook-cert-secret")));
    // Without leader election a surge would run two reconcilers.
    let docs = documents(&helm.template(&[
        "--set",
        "policies.enabled=true",
        "--set",
        "leaderElection.enabled=false",
    ]));
    assert_eq!(
        named(&docs, "Deployment", "gantry")["spec"]["strategy"],
        json!({"type": "Recreate"})
    );
}

/// `converters`: each CRD's rules in the ClusterRole, and a clear refusal
/// without the webhook server they are served on.
#[test]
fn converters_get_their_crd_rights_and_need_the_webhook_server() {
    let helm = Helm::new();
    let docs = documents(&helm.template(&[
        "--set",
        "policies.enabled=true",
        "--set",
        "converters={myresources.example.com}",
    ]));
    let rules = named(&docs, "ClusterRole", "gantry")["rules"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        rules.contains(&json!({"apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "resourceNames": ["myresources.example.com"], "verbs": ["get", "patch"]})),
        "{rules:?}"
    );
    assert!(
        rules.contains(&json!({"apiGroups": ["example.com"],
            "resources": ["myresources"], "verbs": ["list"]})),
        "{rules:?}"
    );
    let chart = chart_dir();
    let out = helm
        .command(&[
            "template",
            "gantry",
            chart.to_str().unwrap(),
            "--set",
            "converters={myresources.example.com}",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("set policies.enabled=true"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The memcached binding's rules, as the chart derives them from values.yaml.
fn memcached_rules() -> Value {
    json!([
        {"apiGroups": ["cache.example.com"], "resources": ["memcacheds"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": ["cache.example.com"], "resources": ["memcacheds/status"], "verbs": ["patch"]},
        {"apiGroups": ["cache.example.com"], "resources": ["memcacheds/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    ])
}

fn events_rule() -> Value {
    json!({"apiGroups": ["events.k8s.io", ""], "resources": ["events"], "verbs": ["create", "patch"]})
}

fn webhooks_rule() -> Value {
    json!({"apiGroups": ["admissionregistration.k8s.io"],
        "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"]})
}

fn with(first: &[Value], rest: &Value) -> Value {
    let mut all = first.to_vec();
    all.extend(rest.as_array().unwrap().iter().cloned());
    Value::Array(all)
}

#[test]
fn watch_namespaces_grant_roles_instead_of_a_cluster_role() {
    let helm = Helm::new();
    let docs = documents(&helm.template(&["--set", "watchNamespaces={team-a,team-b}"]));
    let d = all(&docs, "Deployment")[0];
    assert!(args_of(d).contains(&"--watch-namespaces=team-a,team-b".to_string()));
    // Nothing cluster-wide is left without policies.
    assert!(all(&docs, "ClusterRole").is_empty());
    assert!(all(&docs, "ClusterRoleBinding").is_empty());
    for ns in ["team-a", "team-b"] {
        let role = all(&docs, "Role")
            .into_iter()
            .find(|r| r["metadata"]["namespace"] == ns)
            .unwrap_or_else(|| panic!("no Role in {ns}"));
        assert_eq!(role["metadata"]["name"], "gantry-watch");
        assert_eq!(role["rules"], with(&[events_rule()], &memcached_rules()));
        let binding = all(&docs, "RoleBinding")
            .into_iter()
            .find(|b| b["metadata"]["namespace"] == ns)
            .unwrap_or_else(|| panic!("no RoleBinding in {ns}"));
        assert_eq!(binding["roleRef"]["name"], "gantry-watch");
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "gantry", "namespace": "gantry-system"}])
        );
    }
    // The bindings namespace keeps its Role (ConfigMaps, Leases), now with
    // Events for the binding ConfigMaps.
    let home = named(&docs, "Role", "gantry");
    assert_eq!(home["metadata"]["namespace"], "gantry-system");
    assert!(home["rules"].as_array().unwrap().contains(&events_rule()));

    // With policies the webhook configurations stay cluster-wide, alone.
    let docs = documents(&helm.template(&[
        "--set",
        "watchNamespaces={team-a}",
        "--set",
        "policies.enabled=true",
    ]));
    assert_eq!(
        named(&docs, "ClusterRole", "gantry")["rules"],
        json!([webhooks_rule()])
    );
    assert_eq!(
        named(&docs, "ClusterRoleBinding", "gantry")["roleRef"]["name"],
        "gantry"
    );

    // Without watchNamespaces, all of it is in the ClusterRole.
    let docs = documents(&helm.template(&[]));
    assert_eq!(
        named(&docs, "ClusterRole", "gantry")["rules"],
        with(&[events_rule()], &memcached_rules())
    );
    assert!(
        !args_of(all(&docs, "Deployment")[0])
            .iter()
            .any(|a| a.starts_with("--watch"))
    );
}

#[test]
fn rbac_rules_replace_the_derived_rules() {
    // What `gantry rbac --helm-values` prints, fed with -f.
    let rules = json!([
        {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
    ]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rbac.yaml");
    std::fs::write(
        &file,
        serde_yaml::to_string(&json!({"rbac": {"rules": rules}})).unwrap(),
    )
    .unwrap();
    let helm = Helm::new();
    let docs = documents(&helm.template(&["-f", file.to_str().unwrap()]));
    assert_eq!(
        named(&docs, "ClusterRole", "gantry")["rules"],
        with(&[events_rule()], &rules)
    );
    // The same rules go into each watched namespace's Role.
    let docs = documents(&helm.template(&[
        "-f",
        file.to_str().unwrap(),
        "--set",
        "watchNamespaces={team-a}",
    ]));
    assert_eq!(
        named(&docs, "Role", "gantry-watch")["rules"],
        with(&[events_rule()], &rules)
    );
}

#[test]
fn crds_from_values() {
    let helm = Helm::new();
    let crd_file = repo_root().join("plugins/memcached/crd.yaml");
    let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(&crd_file).unwrap()).unwrap();
    // As a file (--set-file), and as an object in a values file.
    let dir = tempfile::tempdir().unwrap();
    let mut widget = crd.clone();
    widget["metadata"]["name"] = json!("widgets.example.com");
    widget["metadata"]["annotations"] = json!({"team": "a"});
    let values = dir.path().join("crds.yaml");
    std::fs::write(
        &values,
        serde_yaml::to_string(&json!({"crds": [widget]})).unwrap(),
    )
    .unwrap();
    let docs = documents(&helm.template(&[
        "-f",
        values.to_str().unwrap(),
        "--set-file",
        &format!("crds[1]={}", crd_file.display()),
    ]));
    let crds = all(&docs, "CustomResourceDefinition");
    assert_eq!(crds.len(), 2);
    let mut expected = crd.clone();
    expected["metadata"]["annotations"] = json!({"helm.sh/resource-policy": "keep"});
    assert_eq!(crds[1], &expected);
    assert_eq!(
        crds[0]["metadata"]["annotations"],
        json!({"team": "a", "helm.sh/resource-policy": "keep"})
    );
    assert_eq!(crds[0]["spec"], crd["spec"]);

    // Anything but a CRD is refused.
    let not_a_crd = dir.path().join("cm.yaml");
    std::fs::write(
        &not_a_crd,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    )
    .unwrap();
    let chart = chart_dir();
    let err = run_failing(&mut helm.command(&[
        "template",
        "gantry",
        chart.to_str().unwrap(),
        "--set-file",
        &format!("crds[0]={}", not_a_crd.display()),
    ]));
    assert!(
        err.contains("crds[0] is not an apiextensions.k8s.io/v1 CustomResourceDefinition"),
        "{err}"
    );

    // Helm's fromYaml would read the first of several documents and drop
    // the rest without a word: refused instead.
    let two = dir.path().join("two.yaml");
    let text = std::fs::read_to_string(&crd_file).unwrap();
    std::fs::write(&two, format!("---\n{text}\n---\n{text}")).unwrap();
    let err = run_failing(&mut helm.command(&[
        "template",
        "gantry",
        chart.to_str().unwrap(),
        "--set-file",
        &format!("crds[0]={}", two.display()),
    ]));
    assert!(
        err.contains("crds[0] holds several YAML documents"),
        "{err}"
    );
}

/// Whether every field of `rendered` is in `live` with the same value
/// (the server adds defaults, status and metadata of its own). The path of
/// the first difference.
fn differs(rendered: &Value, live: &Value, path: &str) -> Option<String> {
    match (rendered, live) {
        (Value::Object(r), Value::Object(l)) => r.iter().find_map(|(k, v)| {
            let path = format!("{path}.{k}");
            match l.get(k) {
                Some(lv) => differs(v, lv, &path),
                None if v.is_null() => None,
                None => Some(format!("{path}: missing")),
            }
        }),
        (Value::Array(r), Value::Array(l)) if r.len() == l.len() => r
            .iter()
            .zip(l)
            .enumerate()
            .find_map(|(i, (r, l))| differs(r, l, &format!("{path}[{i}]"))),
        (r, l) if r == l => None,
        (r, l) => Some(format!("{path}: rendered {r}, live {l}")),
    }
}

#[backends]
#[tokio::test]
async fn helm_install_with_the_project_image(backend: Backend) {
    let Some(registry) = Registry::start().await else {
        return;
    };
    let pinned = build_image(&format!("{}/gantry:test", registry.host));
    let (repository, digest) = pinned.split_once('@').unwrap();
    let server = Cluster::start(backend).await;
    let kubeconfig = server.kubeconfig().to_str().unwrap().to_string();

    let helm = Helm::new();
    let chart = chart_dir();
    let crd = repo_root().join("plugins/memcached/crd.yaml");
    let out = run_blocking(helm.command(&[
        "install",
        "gantry",
        chart.to_str().unwrap(),
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        "gantry-system",
        "--create-namespace",
        "--set",
        &format!("image.repository={repository}"),
        "--set",
        &format!("image.digest={digest}"),
        "--set",
        "policies.enabled=true",
        "--set",
        // Stands for a component: nothing runs it here (no kubelet).
        "bindings.memcached.plugin.base64=AGFzbQ0AAQA=",
        "--set-file",
        &format!("crds[0]={}", crd.display()),
    ]))
    .await;
    assert!(out.contains("STATUS: deployed"), "{out}");

    let manifest = run_blocking(helm.command(&[
        "get",
        "manifest",
        "gantry",
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        "gantry-system",
    ]))
    .await;
    let docs = documents(&manifest);
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    for kind in [
        "Deployment",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Service",
        "PodDisruptionBudget",
        "ConfigMap",
        "CustomResourceDefinition",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in the release: {kinds:?}");
    }
    let deployment = named(&docs, "Deployment", "gantry");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        pinned
    );
    named(&docs, "Service", "gantry-webhook");
    assert!(
        named(&docs, "ClusterRole", "gantry")["rules"]
            .as_array()
            .unwrap()
            .contains(&webhooks_rule())
    );

    // Each object is in the cluster as rendered...
    let client = server.client();
    let discovery = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    for doc in &docs {
        let api_version = doc["apiVersion"].as_str().unwrap();
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = doc["kind"].as_str().unwrap();
        let (ar, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
            .unwrap_or_else(|| panic!("{kind} is not served"));
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                doc["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("gantry-system"),
                &ar,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        let name = doc["metadata"]["name"].as_str().unwrap();
        let live = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
        let live = serde_json::to_value(live).unwrap();
        if let Some(difference) = differs(doc, &live, "") {
            panic!("{kind} {name} is not as rendered: {difference}");
        }
    }

    // ... and a server-side dry run of each passes.
    // kubectl of the real control plane's version: Debian's (1.20) checks
    // dry-run support in /openapi/v2, which the embedded server leaves
    // empty (apiserver/src/openapi.rs), and refuses before asking.
    let kubectl = &run_blocking({
        let mut c = Command::new(repo_root().join("scripts/real-cluster"));
        c.arg("build");
        c
    })
    .await;
    let kubectl = Path::new(kubectl.trim()).join("kubectl");
    let dir = tempfile::tempdir().unwrap();
    for (i, doc) in docs.iter().enumerate() {
        let file = dir.path().join(format!("{i}.yaml"));
        std::fs::write(&file, serde_yaml::to_string(doc).unwrap()).unwrap();
        dry_run(&kubectl, &kubeconfig, &file).await;
    }
    server.shutdown().await;
}

async fn dry_run(kubectl: &Path, kubeconfig: &str, file: &Path) {
    let mut command = Command::new(kubectl);
    command
        .args([
            "--kubeconfig",
            kubeconfig,
            "apply",
            "--dry-run=server",
            "-f",
        ])
        .arg(file);
    let out = run_blocking(command).await;
    assert!(out.contains("(server dry run)"), "{out}");
}
