//! The operator in a Pod on a real node: `helm install` of deploy/helm/gantry
//! from the image `scripts/image` builds, with the chart's defaults unless a
//! test says otherwise and the chart's RBAC only. Runs on the `node` backend
//! (`GANTRY_TEST_BACKEND=node` or `all`); the tests share one node and take
//! turns, each in namespaces of its own.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gantry_test_support::NodeCluster;
use gantry_tests::deployed::{
    POD_WAIT, Release, empty_dir, field, images, node, plugin_file, pod_peak_memory, pod_ready,
};
use gantry_tests::{Backend, condition, eventually_within, get_json};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

/// The node, or `None` when `GANTRY_TEST_BACKEND` does not choose it. The
/// first call builds the image and starts the node.
async fn on_node() -> Option<tokio::sync::MutexGuard<'static, ()>> {
    if Backend::Node.skip() {
        return None;
    }
    let turn = NodeCluster::exclusive().await;
    tokio::task::spawn_blocking(node).await.expect("node task");
    Some(turn)
}

fn memcached_resource() -> ApiResource {
    ApiResource {
        group: "cache.example.com".into(),
        version: "v1alpha1".into(),
        api_version: "cache.example.com/v1alpha1".into(),
        kind: "Memcached".into(),
        plural: "memcacheds".into(),
    }
}

fn fanout_resource() -> ApiResource {
    ApiResource {
        group: "bench.gantry.dev".into(),
        version: "v1".into(),
        api_version: "bench.gantry.dev/v1".into(),
        kind: "Fanout".into(),
        plural: "fanouts".into(),
    }
}

/// Install example `name`'s CRD (once: CRDs are cluster-wide and kept).
async fn crd(client: &Client, name: &str) {
    let file = gantry::examples::source_dir(name).join("crd.yaml");
    gantry::dev::apply_file(client, &file).await.expect("CRD");
    let crd: Value = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    gantry::dev::wait_for_crd(client, crd["metadata"]["name"].as_str().unwrap())
        .await
        .expect("CRD established");
}

/// The chart values that install the memcached binding with its component.
async fn memcached_values(dir: &std::path::Path) -> Vec<String> {
    let component = tokio::task::spawn_blocking(|| gantry::dev::build_example("memcached"))
        .await
        .unwrap()
        .expect("memcached builds");
    let file = plugin_file(dir, "memcached", &component);
    vec![
        "--set-file".into(),
        format!("bindings.memcached.plugin.base64={}", file.display()),
    ]
}

async fn apply(client: &Client, object: Value) {
    gantry::dev::apply_object(client, &object)
        .await
        .unwrap_or_else(|e| panic!("apply {object}: {e:#}"));
}

fn memcached(namespace: &str, name: &str, size: u32, port: u32) -> Value {
    json!({"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": size, "containerPort": port}})
}

/// The parent's condition `type_` is True.
fn is_true(parent: &Value, type_: &str) -> bool {
    condition(parent, type_).is_some_and(|c| c["status"] == "True")
}

/// Install with the chart's defaults; the operator Pod becomes Ready with the
/// chart's hardening and limits unchanged; it reconciles the Memcached sample
/// into Pods the kubelet runs, until the sample is Ready from their real
/// status; `/metrics` answers through the metrics Service; the probes are
/// the chart's; and a new plugin version bound by ConfigMap is compiled into
/// the Pod's cache volume and shadow-run before it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_the_operator_which_runs_the_memcached_sample() {
    let Some(_turn) = on_node().await else { return };
    let client = node().client().await;
    crd(&client, "memcached").await;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let mut release = Release::install(
        "gantry-sample",
        "ic-sample",
        &memcached_values(dir.path()).await,
    )
    .await;
    let pods = release.ready_pods(1).await;
    eprintln!(
        "operator Pod Ready {:.1} s after helm install",
        started.elapsed().as_secs_f64()
    );
    let pod = &pods[0];
    let spec = pod.spec.as_ref().unwrap();
    let container = serde_json::to_value(&spec.containers[0]).unwrap();
    let values: Value = serde_yaml::from_str(
        &std::fs::read_to_string(gantry_tests::tools::chart_dir().join("values.yaml")).unwrap(),
    )
    .unwrap();
    // The hardening and limits the chart sets, as the Pod runs them.
    for key in [
        "readOnlyRootFilesystem",
        "runAsNonRoot",
        "allowPrivilegeEscalation",
        "capabilities",
    ] {
        assert_eq!(
            container["securityContext"][key], values["securityContext"][key],
            "securityContext.{key}"
        );
    }
    assert_eq!(
        container["resources"]["limits"]["memory"],
        values["resources"]["limits"]["memory"]
    );
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"],
        values["probes"]["readiness"]["path"]
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"],
        values["probes"]["liveness"]["path"]
    );
    assert_eq!(container["livenessProbe"]["httpGet"]["port"], "http-health");

    // The sample, as a user applies it (in a namespace of its own).
    let samples = "ic-sample-apps";
    release.namespace(samples).await;
    let mut sample: Value = serde_yaml::from_str(
        &std::fs::read_to_string(gantry::examples::source_dir("memcached").join("example.yaml"))
            .unwrap(),
    )
    .unwrap();
    sample["metadata"]["namespace"] = json!(samples);
    let size = usize::try_from(sample["spec"]["size"].as_u64().unwrap()).unwrap();
    apply(&client, sample).await;
    let parents: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), samples, &memcached_resource());
    let ready = eventually_within(POD_WAIT, "the sample Ready", || async {
        let parent = get_json(&parents, "memcached-sample").await?;
        is_true(&parent, "Ready").then_some(parent)
    })
    .await;
    eprintln!(
        "sample Ready {:.1} s after helm install: {}",
        started.elapsed().as_secs_f64(),
        field(&ready, "/status")
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), samples);
    let running = pods.list(&ListParams::default()).await.unwrap().items;
    let running: Vec<&Pod> = running.iter().filter(|p| pod_ready(p)).collect();
    assert_eq!(running.len(), size, "the sample's Pods run on the node");
    for pod in &running {
        assert_eq!(
            pod.spec.as_ref().unwrap().node_name.as_deref(),
            Some("gantry-node")
        );
    }

    // /metrics through the metrics Service (the API server's proxy to it).
    let request = http::Request::get(format!(
        "/api/v1/namespaces/{}/services/http:{}-metrics:http-metrics/proxy/metrics",
        release.namespace, release.name
    ))
    .body(Vec::new())
    .unwrap();
    let metrics = client
        .request_text(request)
        .await
        .expect("/metrics through the Service");
    assert!(metrics.contains("gantry_reconciles_total"), "{metrics}");

    // A new version by ConfigMap: compiled into the cache volume, shadow-run
    // on the sample, then served.
    let cache = empty_dir(node(), pod, "cache");
    let compiled_before = compiled_files(&cache);
    assert!(
        !compiled_before.is_empty(),
        "nothing compiled into {}",
        cache.display()
    );
    let bindings: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &release.namespace);
    let mut binding = bindings
        .get("memcached")
        .await
        .expect("the chart's binding");
    let component = gantry::dev::build_example("memcached").unwrap();
    let renewed = with_custom_section(&component, b"in-cluster swap");
    let renewed_cm =
        gantry::dev::binding_config_map("memcached", &release.namespace, "", &renewed, true)
            .unwrap();
    binding.binary_data = renewed_cm.binary_data;
    binding.metadata.managed_fields = None;
    bindings
        .replace("memcached", &kube::api::PostParams::default(), &binding)
        .await
        .expect("a new version of the binding");
    let digest = sha256_hex(&renewed);
    let note = eventually_within(POD_WAIT, "the new version loaded", || async {
        events(&client, &release.namespace, "memcached")
            .await
            .into_iter()
            .filter(|e| e["reason"] == "PluginLoaded")
            .filter_map(|e| e["note"].as_str().map(str::to_string))
            .find(|note| note.contains(&digest[..12]))
    })
    .await;
    assert!(
        note.contains("shadow"),
        "loaded without a shadow run: {note}"
    );
    let compiled_after = compiled_files(&cache);
    assert!(
        compiled_after.len() > compiled_before.len(),
        "the new version was not compiled into the cache volume: {compiled_after:?}"
    );

    release.assert_no_forbidden().await;
    release.uninstall().await;
}

/// Files in the compiled-plugin cache (the emptyDir on the node).
fn compiled_files(dir: &std::path::Path) -> Vec<String> {
    fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else {
                found.push(path.display().to_string());
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, &mut found);
    found
}

/// `component` with one more custom section: the same plugin, another
/// digest (a new version as far as the operator can tell).
fn with_custom_section(component: &[u8], payload: &[u8]) -> Vec<u8> {
    let name = b"gantry-test";
    let mut section = vec![u8::try_from(name.len()).unwrap()];
    section.extend_from_slice(name);
    section.extend_from_slice(payload);
    let mut out = component.to_vec();
    out.push(0);
    out.push(u8::try_from(section.len()).unwrap());
    out.extend_from_slice(&section);
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// The events.k8s.io Events about object `name` in `namespace`.
async fn events(client: &Client, namespace: &str, name: &str) -> Vec<Value> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&()),
    );
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["regarding"]["name"] == name)
        .collect()
}

/// Two replicas: deleting the leader's Pod (SIGTERM) while a slow binding's
/// reconciles are in flight and every Memcached changes ends it with exit 0
/// within the grace period, after it finished those reconciles; it releases
/// the Lease at once so the standby takes over without waiting for expiry;
/// the standby reconciles every parent changed in the gap; and no child is
/// written by two leaders at once (from the API server's audit log).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_leader_hands_over_to_the_standby() {
    let Some(_turn) = on_node().await else { return };
    let client = node().client().await;
    crd(&client, "memcached").await;
    crd(&client, "fanout").await;
    let dir = tempfile::tempdir().unwrap();
    let mut values = memcached_values(dir.path()).await;
    values.extend(["--set".into(), "replicas=2".into()]);
    values.extend(slow_fanout_values(dir.path()).await);
    let mut release = Release::install("gantry-failover", "ic-failover", &values).await;
    let pods = release.ready_pods(2).await;
    let leader = eventually_within(POD_WAIT, "a leader", || release.leader()).await;
    let standby = pods
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .find(|name| *name != leader)
        .expect("a standby");

    let apps = "ic-failover-apps";
    release.namespace(apps).await;
    let parents: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), apps, &memcached_resource());
    let count = 20;
    for i in 0..count {
        apply(&client, memcached(apps, &format!("m-{i}"), 1, 11211)).await;
    }
    let deployments: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        apps,
        &ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
    );
    let port_of = |d: &Value| {
        d.pointer("/spec/template/spec/containers/0/ports/0/containerPort")
            .and_then(Value::as_u64)
    };
    let children_with = |port: u64| {
        let deployments = deployments.clone();
        async move {
            let list = deployments.list(&ListParams::default()).await.ok()?;
            let ports: Vec<u64> = list
                .items
                .iter()
                .filter_map(|d| port_of(&serde_json::to_value(d).unwrap()))
                .collect();
            (ports.len() == count && ports.iter().all(|p| *p == port)).then_some(())
        }
    };
    eventually_within(POD_WAIT, "every child written by the leader", || {
        children_with(11211)
    })
    .await;

    // The leader goes (SIGTERM) while slow reconciles are in flight and
    // every Memcached changes.
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), &release.namespace);
    let leader_log = follow_log(&operator_pods, &leader).await;
    let fanouts: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), apps, &fanout_resource());
    let slow_parents = 3;
    for i in 0..slow_parents {
        let parent = json!({"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout",
            "metadata": {"name": format!("s-{i}"), "namespace": apps}, "spec": {"value": "x"}});
        fanouts
            .patch(
                &format!("s-{i}"),
                &PatchParams::apply("in-cluster-test"),
                &Patch::Apply(&parent),
            )
            .await
            .expect("create a slow parent");
    }
    // Each slow reconcile takes two calls of SLOW_CALL: one second in, all
    // three are in the first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deleted_at = Instant::now();
    operator_pods
        .delete(&leader, &DeleteParams::default())
        .await
        .expect("delete the leader's Pod");
    for i in 0..count {
        apply(&client, memcached(apps, &format!("m-{i}"), 1, 11300)).await;
    }
    let exit = eventually_within(POD_WAIT, "the old leader's container exits", || async {
        let pod = operator_pods.get_opt(&leader).await.ok()??;
        let status = pod.status?.container_statuses?.into_iter().next()?;
        status.state?.terminated
    })
    .await;
    let stopped_in = deleted_at.elapsed();
    assert_eq!(exit.exit_code, 0, "the old leader's exit: {exit:?}");
    let grace = release
        .deployment()
        .await
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .termination_grace_period_seconds
        .unwrap();
    assert!(stopped_in < Duration::from_secs(u64::try_from(grace).unwrap()));
    let log = tokio::time::timeout(POD_WAIT, leader_log)
        .await
        .expect("the old leader's log ends with its container")
        .expect("log task");
    assert!(
        log.iter()
            .any(|l| l["message"] == "shutting down: finishing in-flight reconciles"),
        "the old leader did not say it was shutting down"
    );
    let stopped = log
        .iter()
        .find(|l| l["message"] == "binding stopped" && l["binding"] == "slow")
        .unwrap_or_else(|| panic!("the old leader did not stop the slow binding: {log:?}"));
    assert!(
        stopped["in_flight"].as_u64() >= Some(1),
        "no reconcile was in flight at SIGTERM: {stopped}"
    );
    assert_eq!(
        stopped["finished"], stopped["in_flight"],
        "in-flight reconciles were abandoned: {stopped}"
    );
    let new_leader = eventually_within(POD_WAIT, "a new holder of the Lease", || async {
        release.leader().await.filter(|holder| *holder != leader)
    })
    .await;
    let takeover = deleted_at.elapsed();
    assert_eq!(
        new_leader,
        standby,
        "the Lease went to another Pod than the standby; the Pods: {:?}",
        operator_pods.list(&ListParams::default()).await.map(|l| l
            .items
            .into_iter()
            .map(|p| (p.metadata.name, p.status.and_then(|s| s.container_statuses)))
            .collect::<Vec<_>>())
    );
    eprintln!(
        "leader {leader} stopped {:.1} s after its Pod was deleted; {new_leader} held the Lease after {:.1} s",
        stopped_in.as_secs_f64(),
        takeover.as_secs_f64()
    );
    // Released, not expired: well within the Lease's duration of 15 s.
    assert!(
        takeover < Duration::from_secs(10),
        "the standby waited {takeover:?}: the Lease was not released"
    );
    eventually_within(
        POD_WAIT,
        "every parent changed in the gap reconciled",
        || children_with(11300),
    )
    .await;
    let slow_children: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), apps);
    for i in 0..slow_parents {
        eventually_within(POD_WAIT, "a slow parent's child", || async {
            slow_children.get_opt(&format!("s-{i}-fine")).await.ok()?
        })
        .await;
    }
    for i in 0..count {
        let parent = get_json(&parents, &format!("m-{i}")).await.unwrap();
        assert!(
            is_true(&parent, "Synced"),
            "m-{i}: {}",
            field(&parent, "/status")
        );
    }

    // One writer at a time: the old leader's last write to a child comes
    // before the new leader's first, by source address (the Pods' IPs).
    let writes = child_writes(node(), apps);
    let sources: Vec<&String> = writes.iter().map(|(_, source)| source).collect();
    let mut spans: BTreeMap<&String, (i64, i64)> = BTreeMap::new();
    for (at, source) in &writes {
        let span = spans.entry(source).or_insert((*at, *at));
        span.0 = span.0.min(*at);
        span.1 = span.1.max(*at);
    }
    assert_eq!(spans.len(), 2, "writers of the children: {sources:?}");
    let mut ordered: Vec<(i64, i64)> = spans.values().copied().collect();
    ordered.sort_unstable();
    assert!(
        ordered[0].1 < ordered[1].0,
        "two leaders wrote children at once: {spans:?}"
    );

    release.assert_no_forbidden().await;
    release.uninstall().await;
}

/// How long each call of the slow binding's plugin blocks.
const SLOW_CALL: Duration = Duration::from_secs(2);

/// The chart values that add binding `slow`: Fanouts reconciled by the
/// hostile plugin, each call blocking for [`SLOW_CALL`].
async fn slow_fanout_values(dir: &std::path::Path) -> Vec<String> {
    let component = tokio::task::spawn_blocking(|| gantry::dev::build_example("hostile"))
        .await
        .unwrap()
        .expect("the hostile plugin builds");
    let plugin = plugin_file(dir, "slow", &component);
    let millis = u64::try_from(SLOW_CALL.as_millis()).unwrap();
    let binding = json!({
        "parent": {"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout", "resource": "fanouts"},
        "children": [{"apiVersion": "v1", "kind": "ConfigMap", "resource": "configmaps"}],
        "config": {"behaviour": "sleep", "millis": millis},
        "limits": {"deadlineMs": millis * 4},
        "plugin": {"key": "plugin.wasm.zst"},
    });
    vec![
        "--set-json".into(),
        format!("bindings.slow={binding}"),
        "--set-file".into(),
        format!("bindings.slow.plugin.base64={}", plugin.display()),
    ]
}

/// The JSON lines Pod `name` logs from now until its container ends.
async fn follow_log(pods: &Api<Pod>, name: &str) -> tokio::task::JoinHandle<Vec<Value>> {
    use futures::{AsyncBufReadExt, TryStreamExt};
    let params = kube::api::LogParams {
        follow: true,
        ..kube::api::LogParams::default()
    };
    let stream = pods
        .log_stream(name, &params)
        .await
        .expect("follow the leader's log");
    tokio::spawn(async move {
        stream
            .lines()
            .try_filter_map(|line| async move { Ok(serde_json::from_str::<Value>(&line).ok()) })
            .try_collect::<Vec<Value>>()
            .await
            .unwrap_or_default()
    })
}

/// The (time in milliseconds, source IP) of every successful write to a Deployment in
/// `namespace` by a service account, from the audit log.
fn child_writes(node: &NodeCluster, namespace: &str) -> Vec<(i64, String)> {
    node.audit_events()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["objectRef"]["resource"] == "deployments"
                && e["objectRef"]["namespace"] == namespace
                && e["objectRef"]["subresource"].is_null()
                && e["user"]["username"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("system:serviceaccount:"))
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| (200..300).contains(&c))
        })
        .filter_map(|e| {
            let at = e["stageTimestamp"].as_str()?;
            let at = at.parse::<k8s_openapi::jiff::Timestamp>().ok()?;
            let source = e["sourceIPs"][0].as_str()?.to_string();
            Some((at.as_millisecond(), source))
        })
        .collect()
}

/// `helm upgrade` to a new image tag with an admission policy
/// (`failurePolicy: Fail`) served by two replicas, with the chart's default
/// certificates: a client creating Pods all through the rolling update
/// gets every answer from the policy, never a refusal for want of a
/// webhook. The webhook configuration's CA bundle is the one in the
/// operator-made Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_with_a_fail_closed_policy_refuses_nothing() {
    let Some(_turn) = on_node().await else { return };
    let client = node().client().await;
    let mut release = Release::install(
        "gantry-upgrade",
        "ic-upgrade",
        &[
            "--set".into(),
            "replicas=2".into(),
            "--set".into(),
            "policies.enabled=true".into(),
            "--set".into(),
            "policies.configurationName=ic-upgrade-policies".into(),
        ],
    )
    .await;
    release.ready_pods(2).await;
    let component =
        tokio::task::spawn_blocking(|| gantry::dev::build_example("disallow-privileged"))
            .await
            .unwrap()
            .unwrap();
    let apps = "ic-upgrade-apps";
    release.namespace(apps).await;
    let policy = format!(
        "name: disallow-privileged\nrules:\n  - apiGroups: [\"\"]\n    apiVersions: [v1]\n    resources: [pods]\n    operations: [CREATE]\nnamespaceSelector:\n  matchLabels:\n    kubernetes.io/metadata.name: {apps}\nmode: enforce\nfailurePolicy: Fail\ntimeoutSeconds: 5\nlimits: {{deadlineMs: 500, memoryMiB: 64}}\n"
    );
    let cm = gantry::dev::policy_config_map(
        "disallow-privileged",
        &release.namespace,
        &policy,
        &component,
        true,
    )
    .expect("policy ConfigMap");
    gantry::dev::apply_binding(&client, &cm)
        .await
        .expect("apply the policy");

    let webhooks: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::erase::<
            k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
        >(&()),
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), &release.namespace);
    eventually_within(
        POD_WAIT,
        "the webhook configuration with the Secret's CA",
        || async {
            let config = get_json(&webhooks, "ic-upgrade-policies").await?;
            let bundle = config
                .pointer("/webhooks/0/clientConfig/caBundle")?
                .as_str()?
                .to_string();
            let secret = secrets
                .get_opt("gantry-upgrade-webhook-cert")
                .await
                .ok()??;
            let ca = secret.data?.get("ca.crt")?.clone();
            (serde_json::to_value(ca).ok()? == json!(bundle)).then_some(())
        },
    )
    .await;

    // The policy answers: a privileged Pod is denied, a plain one admitted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), apps);
    eventually_within(POD_WAIT, "the policy enforced", || async {
        let denied = attempt(&pods, 0, true).await.err()?;
        denied.to_string().contains("privileged").then_some(())
    })
    .await;

    // Upgrade while creating Pods; every answer must come from the policy.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client_loop = {
        let stop = stop.clone();
        let pods = pods.clone();
        tokio::spawn(async move {
            let mut failures = Vec::new();
            let mut i = 1;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Err(e) = attempt(&pods, i, false).await {
                    failures.push(format!("good-{i}: {e}"));
                }
                match attempt(&pods, i, true).await {
                    Ok(_) => failures.push(format!("bad-{i} admitted")),
                    Err(e) if e.to_string().contains("privileged") => {}
                    Err(e) => failures.push(format!("bad-{i}: {e}")),
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (i - 1, failures)
        })
    };
    let before: Vec<String> = release
        .pods()
        .await
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let out = release
        .upgrade(&[
            "--set".into(),
            format!("image.tag={}", images().second.rsplit_once(':').unwrap().1),
        ])
        .await;
    assert!(out.contains("STATUS: deployed"), "{out}");
    let after = eventually_within(POD_WAIT, "the rollout done", || async {
        let pods = release.pods().await;
        let done = pods.len() == 2
            && pods
                .iter()
                .all(|p| pod_ready(p) && !before.contains(p.metadata.name.as_ref().unwrap()));
        done.then_some(pods)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (attempts, failures) = client_loop.await.unwrap();
    eprintln!("{attempts} pairs of Pod creations during the rolling update");
    assert!(
        failures.is_empty(),
        "refusals during the upgrade: {failures:#?}"
    );
    assert!(
        attempts >= 10,
        "only {attempts} attempts during the upgrade"
    );
    for pod in &after {
        let image = &pod.spec.as_ref().unwrap().containers[0].image;
        assert_eq!(image.as_deref(), Some(images().second.as_str()));
    }

    release.assert_no_forbidden().await;
    release.uninstall().await;
}

/// Create a Pod (privileged or not) that is never scheduled: only its
/// admission is under test.
async fn attempt(pods: &Api<Pod>, i: usize, privileged: bool) -> Result<Pod, kube::Error> {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("{}-{i}", if privileged { "bad" } else { "good" })},
        "spec": {
            "nodeSelector": {"gantry.dev/no-such-node": "true"},
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10.2",
                "securityContext": {"privileged": privileged}}]}
    }))
    .unwrap();
    pods.create(&kube::api::PostParams::default(), &pod).await
}

/// With 1,000 parents the operator stays under the chart's memory limit
/// (measured from the Pod's cgroup on the node); with a limit below what
/// it needs, the kubelet OOM-kills it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_with_a_thousand_parents_and_an_oom_kill_below_the_minimum() {
    let Some(_turn) = on_node().await else { return };
    let client = node().client().await;
    crd(&client, "fanout").await;
    let dir = tempfile::tempdir().unwrap();
    let component = tokio::task::spawn_blocking(|| gantry::dev::build_example("fanout"))
        .await
        .unwrap()
        .unwrap();
    let plugin = plugin_file(dir.path(), "fanout", &component);
    let binding = json!({
        "parent": {"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout", "resource": "fanouts"},
        "children": [{"apiVersion": "v1", "kind": "ConfigMap", "resource": "configmaps"}],
        "config": {"children": 3},
        "plugin": {"key": "plugin.wasm.zst"},
    });
    let values = vec![
        "--set-json".into(),
        format!("bindings={}", json!({"fanout": binding})),
        "--set-file".into(),
        format!("bindings.fanout.plugin.base64={}", plugin.display()),
    ];
    let mut release = Release::install("gantry-memory", "ic-memory", &values).await;
    release.ready_pods(1).await;
    let apps = "ic-memory-apps";
    release.namespace(apps).await;
    let parents = 1000;
    let fanouts: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), apps, &fanout_resource());
    for i in 0..parents {
        let parent = json!({"apiVersion": "bench.gantry.dev/v1", "kind": "Fanout",
            "metadata": {"name": format!("f-{i}"), "namespace": apps}, "spec": {"value": "x"}});
        fanouts
            .patch(
                &format!("f-{i}"),
                &PatchParams::apply("in-cluster-test"),
                &Patch::Apply(&parent),
            )
            .await
            .expect("create a parent");
    }
    let children: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), apps);
    eventually_within(
        Duration::from_mins(10),
        "every parent's children",
        || async {
            let list = children
                .list_metadata(&ListParams::default().labels(""))
                .await
                .ok()?;
            // kube-root-ca.crt is there too.
            (list.items.len() > parents * 3).then_some(())
        },
    )
    .await;
    let pod = &release.ready_pods(1).await[0];
    let peak = pod_peak_memory(pod).expect("the Pod's cgroup");
    let limit = 1024 * 1024 * 1024;
    eprintln!(
        "peak memory of the operator Pod with {parents} parents x 3 children: {:.1} MiB",
        f64::from(u32::try_from(peak / 1024).unwrap()) / 1024.0
    );
    assert!(peak < limit, "peak {peak} over the chart's limit");
    release.assert_no_forbidden().await;

    // Below what it needs: the kubelet OOM-kills the container.
    let low = (peak / 1_048_576 / 3).max(8);
    release
        .upgrade(&[
            "--set".into(),
            format!("resources.limits.memory={low}Mi"),
            "--set".into(),
            format!("resources.requests.memory={low}Mi"),
        ])
        .await;
    let operator_pods: Api<Pod> = Api::namespaced(client.clone(), &release.namespace);
    eventually_within(POD_WAIT, "an OOM kill", || async {
        let pods = operator_pods.list(&ListParams::default()).await.ok()?;
        pods.items.into_iter().find_map(|p| {
            let status = p.status?.container_statuses?.into_iter().next()?;
            let terminated = status
                .last_state
                .and_then(|s| s.terminated)
                .or_else(|| status.state.and_then(|s| s.terminated))?;
            (terminated.reason.as_deref() == Some("OOMKilled")).then_some(())
        })
    })
    .await;
    release.uninstall().await;
}
