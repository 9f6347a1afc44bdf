//! Simulated workloads on the embedded server: Deployments roll out and scale
//! through ReplicaSets whose Pods become Running and Ready on the simulated Node,
//! StatefulSets get their ordinal Pods, each DaemonSet its one Pod, Jobs complete,
//! disruption budgets get their status and limit evictions, autoscalers scale
//! from the load set by hand; and kubectl's
//! `rollout status` and `wait` see it. Embedded only: on a real cluster kube's
//! controllers do this.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use gantry_apiserver::simulate::{NODE_NAME, Settings, Simulation};
use gantry_apiserver::{ApiServer, ApiServerHandle, Config};
use gantry_test_support::differential::scenarios::kubectl_minor;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde_json::json;

async fn start() -> (ApiServerHandle, Simulation, Client) {
    start_with(Duration::from_millis(100)).await
}

/// A server and a simulation whose Pods are Ready `pod_ready_after` their start.
async fn start_with(pod_ready_after: Duration) -> (ApiServerHandle, Simulation, Client) {
    let server = ApiServer::start(Config::default())
        .await
        .expect("server starts");
    let simulation = Simulation::start(
        server.client(),
        Settings {
            pod_ready_after,
            ..Settings::default()
        },
    );
    let client = server.client();
    (server, simulation, client)
}

/// Polls `check` until it returns a value; a minute at most (a guard against
/// hanging, not a timing assertion).
async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}]}
            }
        }
    }))
    .unwrap()
}

fn condition<T: serde::Serialize>(
    conditions: Option<&Vec<T>>,
    kind: &str,
) -> Option<serde_json::Value> {
    serde_json::to_value(conditions?)
        .ok()?
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .cloned()
}

/// The Pods controlled by the object with `uid`.
async fn pods_of(pods: &Api<Pod>, uid: &str) -> Vec<Pod> {
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| r.uid == uid && r.controller == Some(true))
        })
        .collect()
}

fn is_running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && condition(status.and_then(|s| s.conditions.as_ref()), "Ready")
            .is_some_and(|c| c["status"] == "True")
}

/// Waits until the Deployment `name` has rolled out its current generation:
/// `replicas` updated, available and ready, nothing else left, Available and
/// `NewReplicaSetAvailable`. The Deployment then.
async fn rolled_out(api: &Api<Deployment>, name: &str, replicas: i32) -> Deployment {
    eventually(
        &format!("deployment {name} rolled out to {replicas}"),
        async || {
            let d = api.get(name).await.ok()?;
            let status = d.status.as_ref()?;
            let conditions = status.conditions.as_ref();
            let done = status.observed_generation == d.metadata.generation
                && status.replicas.unwrap_or(0) == replicas
                && status.updated_replicas.unwrap_or(0) == replicas
                && status.ready_replicas.unwrap_or(0) == replicas
                && status.available_replicas.unwrap_or(0) == replicas
                && condition(conditions, "Available").is_some_and(|c| c["status"] == "True")
                && condition(conditions, "Progressing")
                    .is_some_and(|c| c["reason"] == "NewReplicaSetAvailable");
            done.then_some(d)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_roll_out_and_scale_through_replica_sets() {
    let (_server, _simulation, client) = start().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    // The simulated Node is there and Ready.
    let nodes: Api<Node> = Api::all(client.clone());
    eventually("the simulated node Ready", async || {
        let node = nodes.get_opt(NODE_NAME).await.ok()??;
        let ready = condition(node.status?.conditions.as_ref(), "Ready")?;
        (ready["status"] == "True").then_some(())
    })
    .await;

    deployments
        .create(&PostParams::default(), &deployment("web", 2, "nginx:1.27"))
        .await
        .unwrap();
    let d = rolled_out(&deployments, "web", 2).await;
    let available = condition(d.status.as_ref().unwrap().conditions.as_ref(), "Available").unwrap();
    assert_eq!(available["reason"], "MinimumReplicasAvailable");
    assert_eq!(
        d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "1"
    );

    // One ReplicaSet, named with its pod-template-hash, controlled by the Deployment.
    let uid = d.meta().uid.clone().unwrap();
    let owned =
        |list: Vec<ReplicaSet>, uid: &str| -> Vec<ReplicaSet> {
            list.into_iter()
                .filter(|rs| {
                    rs.metadata.owner_references.iter().flatten().any(|r| {
                        r.uid == uid && r.controller == Some(true) && r.kind == "Deployment"
                    })
                })
                .collect()
        };
    let first = owned(sets.list(&ListParams::default()).await.unwrap().items, &uid);
    assert_eq!(first.len(), 1, "{first:?}");
    let first = &first[0];
    let hash = first.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    assert_eq!(
        first.metadata.name.as_deref(),
        Some(format!("web-{hash}").as_str())
    );
    let first_uid = first.metadata.uid.clone().unwrap();
    let first_pods = pods_of(&pods, &first_uid).await;
    assert_eq!(first_pods.len(), 2);
    for pod in &first_pods {
        assert!(is_running_and_ready(pod), "{pod:?}");
        assert!(
            pod.metadata
                .name
                .as_deref()
                .unwrap()
                .starts_with(&format!("web-{hash}-"))
        );
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap()["pod-template-hash"],
            hash
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(NODE_NAME));
        let status = pod.status.as_ref().unwrap();
        assert!(
            status
                .pod_ip
                .as_deref()
                .is_some_and(|ip| ip.starts_with("10.244."))
        );
        let containers = status.container_statuses.as_ref().unwrap();
        assert_eq!(containers.len(), 1);
        assert!(containers[0].ready && containers[0].started == Some(true));
        assert!(containers[0].state.as_ref().unwrap().running.is_some());
    }

    // A new template rolls out: a second ReplicaSet takes over, the first goes to 0.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": "nginx:1.28"}
            ]}}}})),
        )
        .await
        .unwrap();
    let d = rolled_out(&deployments, "web", 2).await;
    assert_eq!(
        d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );
    let all = eventually("the old ReplicaSet scaled to zero", async || {
        let all = owned(sets.list(&ListParams::default()).await.ok()?.items, &uid);
        let old = all
            .iter()
            .find(|rs| rs.metadata.uid.as_deref() == Some(&first_uid))?;
        let empty = old.spec.as_ref()?.replicas == Some(0)
            && old.status.as_ref()?.replicas == 0
            && pods_of(&pods, &first_uid).await.is_empty();
        empty.then_some(all)
    })
    .await;
    assert_eq!(all.len(), 2, "{all:?}");
    let second = all
        .iter()
        .find(|rs| rs.metadata.uid.as_deref() != Some(&first_uid))
        .unwrap();
    assert_ne!(
        second.metadata.labels.as_ref().unwrap()["pod-template-hash"],
        hash
    );
    assert_eq!(
        second.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"],
        "2"
    );
    let second_uid = second.metadata.uid.clone().unwrap();
    let second_pods = pods_of(&pods, &second_uid).await;
    assert_eq!(second_pods.len(), 2);
    assert!(second_pods.iter().all(|p| {
        is_running_and_ready(p)
            && p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:1.28")
    }));

    // Scaling, up and down, through /scale as `kubectl scale` does.
    for replicas in [4, 1] {
        deployments
            .patch_scale(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        rolled_out(&deployments, "web", replicas).await;
        let n = usize::try_from(replicas).unwrap();
        eventually(&format!("{replicas} pods"), async || {
            let pods = pods_of(&pods, &second_uid).await;
            (pods.len() == n && pods.iter().all(is_running_and_ready)).then_some(())
        })
        .await;
    }

    // Deleting the Deployment: the garbage collector takes the rest.
    deployments
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the ReplicaSets and Pods to be collected", async || {
        let sets = sets.list(&ListParams::default()).await.ok()?.items;
        let pods = pods.list(&ListParams::default()).await.ok()?.items;
        (sets.is_empty() && pods.is_empty()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_sets_daemon_sets_and_jobs_get_their_pods_and_status() {
    let (_server, _simulation, client) = start().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");

    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:17"}]}
            }
        }
    }))
    .unwrap();
    sets.create(&PostParams::default(), &set).await.unwrap();
    let set = eventually("the StatefulSet ready", async || {
        let s = sets.get("db").await.ok()?;
        let status = s.status.as_ref()?;
        let done = status.ready_replicas == Some(3)
            && status.available_replicas == Some(3)
            && status.updated_replicas == Some(3)
            && status.current_revision.is_some()
            && status.current_revision == status.update_revision
            && status.observed_generation == s.metadata.generation;
        done.then_some(s)
    })
    .await;
    let uid = set.metadata.uid.clone().unwrap();
    let names = |pods: &[Pod]| -> BTreeSet<String> {
        pods.iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect()
    };
    let set_pods = pods_of(&pods, &uid).await;
    assert_eq!(
        names(&set_pods),
        BTreeSet::from(["db-0".into(), "db-1".into(), "db-2".into()])
    );
    assert!(set_pods.iter().all(is_running_and_ready));
    let db1 = set_pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("db-1"))
        .unwrap();
    assert_eq!(db1.spec.as_ref().unwrap().hostname.as_deref(), Some("db-1"));
    assert_eq!(db1.spec.as_ref().unwrap().subdomain.as_deref(), Some("db"));
    sets.patch_scale(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .unwrap();
    eventually("the StatefulSet scaled to db-0", async || {
        let left = pods_of(&pods, &uid).await;
        let s = sets.get("db").await.ok()?;
        let status = s.status?;
        (names(&left) == BTreeSet::from(["db-0".to_string()])
            && status.replicas == 1
            && status.ready_replicas == Some(1))
        .then_some(())
    })
    .await;

    let daemons: Api<DaemonSet> = Api::namespaced(client.clone(), "default");
    let daemon: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": "fluent-bit:3"}]}
            }
        }
    }))
    .unwrap();
    let daemon = daemons
        .create(&PostParams::default(), &daemon)
        .await
        .unwrap();
    eventually("the DaemonSet's one Pod ready", async || {
        let s = daemons.get("agent").await.ok()?.status?;
        (s.desired_number_scheduled == 1 && s.number_ready == 1 && s.number_available == Some(1))
            .then_some(())
    })
    .await;
    let agent_pods = pods_of(&pods, daemon.metadata.uid.as_deref().unwrap()).await;
    assert_eq!(agent_pods.len(), 1);
    assert_eq!(
        agent_pods[0].spec.as_ref().unwrap().node_name.as_deref(),
        Some(NODE_NAME)
    );

    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "migrate"},
        "spec": {
            "completions": 2,
            "parallelism": 1,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "migrate", "image": "busybox", "command": ["true"]}]
            }}
        }
    }))
    .unwrap();
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let done = eventually("the Job complete", async || {
        let j = jobs.get("migrate").await.ok()?;
        let status = j.status.as_ref()?;
        condition(status.conditions.as_ref(), "Complete")
            .is_some_and(|c| c["status"] == "True")
            .then_some(j)
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(status.succeeded, Some(2));
    assert_eq!(status.active.unwrap_or(0), 0);
    assert!(status.completion_time.is_some() && status.start_time.is_some());
    let job_pods = pods_of(&pods, job.metadata.uid.as_deref().unwrap()).await;
    assert_eq!(job_pods.len(), 2, "one Pod per completion, one at a time");
    for pod in &job_pods {
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Succeeded"));
        let state = status.container_statuses.as_ref().unwrap()[0]
            .state
            .clone()
            .unwrap();
        assert_eq!(state.terminated.unwrap().exit_code, 0);
        assert_eq!(pod.metadata.labels.as_ref().unwrap()["job-name"], "migrate");
    }
}

/// A simulation started after the objects (`gantry dev` on kept data) catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulation_started_later_catches_up() {
    let server = ApiServer::start(Config::default()).await.unwrap();
    let client = server.client();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment("early", 1, "nginx"))
        .await
        .unwrap();
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    assert!(
        sets.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let _simulation = Simulation::start(server.client(), Settings::default());
    rolled_out(&deployments, "early", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_status_and_wait_see_simulated_workloads() {
    let (server, _simulation, _client) = start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    for kubectl in gantry_test_support::kubectls() {
        eprintln!("kubectl: {}", kubectl.display());
        let run = async |args: &[&str]| kubectl_ok(&kubectl, &kubeconfig, dir.path(), args).await;
        let suffix = kubectl_minor(&kubectl).await.unwrap();
        let name = format!("web-{suffix}");
        let job = format!("once-{suffix}");
        run(&[
            "create",
            "deployment",
            &name,
            "--image=nginx:1.27",
            "--replicas=2",
        ])
        .await;
        let out = run(&[
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "--timeout=60s",
        ])
        .await;
        assert!(out.contains("successfully rolled out"), "{out}");
        let out = run(&[
            "wait",
            "--for=condition=Available",
            &format!("deployment/{name}"),
            "--timeout=60s",
        ])
        .await;
        assert!(out.contains("condition met"), "{out}");
        run(&[
            "set",
            "image",
            &format!("deployment/{name}"),
            "nginx=nginx:1.28",
        ])
        .await;
        let out = run(&[
            "rollout",
            "status",
            &format!("deployment/{name}"),
            "--timeout=60s",
        ])
        .await;
        assert!(out.contains("successfully rolled out"), "{out}");
        let out = run(&[
            "get",
            "pods",
            "-l",
            &format!("app={name}"),
            "-o",
            "jsonpath={.items[*].status.phase}",
        ])
        .await;
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>(),
            ["Running", "Running"],
            "{out}"
        );
        run(&["create", "job", &job, "--image=busybox", "--", "true"]).await;
        let out = run(&[
            "wait",
            "--for=condition=complete",
            &format!("job/{job}"),
            "--timeout=60s",
        ])
        .await;
        assert!(out.contains("condition met"), "{out}");
    }
}

async fn kubectl_ok(kubectl: &Path, kubeconfig: &Path, dir: &Path, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        Duration::from_mins(2),
        tokio::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .args(args)
            .output(),
    )
    .await
    .expect("kubectl finished")
    .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A client of `server` that shows a 429 instead of retrying it as kube-rs does.
async fn client_without_retries(server: &ApiServerHandle) -> Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml()).unwrap();
    let options = kube::config::KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    config.default_retry = false;
    Client::try_from(config).unwrap()
}

/// Evicts the Pod `name`: the status code of the answer.
async fn evict(pods: &Api<Pod>, name: &str) -> u16 {
    match pods.evict(name, &kube::api::EvictParams::default()).await {
        Ok(_) => 201,
        Err(kube::Error::Api(e)) => e.code,
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disruption_budgets_get_their_status_and_limit_evictions() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    // Replacement Pods take a second to be Ready: the second eviction meets the
    // budget spent.
    let (server, simulation, _) = start_with(Duration::from_secs(1)).await;
    let client = client_without_retries(&server).await;
    let deployments: Api<Deployment> = Api::default_namespaced(client.clone());
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(client.clone());
    let pp = PostParams::default();
    deployments
        .create(&pp, &deployment("web", 3, "nginx"))
        .await
        .unwrap();
    deployments
        .create(&pp, &deployment("api", 2, "nginx"))
        .await
        .unwrap();
    let budget = |name: &str, spec: serde_json::Value| -> PodDisruptionBudget {
        serde_json::from_value(
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name}, "spec": spec}),
        )
        .unwrap()
    };
    // Half of the Deployment's 3 replicas, rounded up: 2 must stay.
    budgets
        .create(
            &pp,
            &budget(
                "web",
                json!({"minAvailable": "50%",
            "selector": {"matchLabels": {"app": "web"}}}),
            ),
        )
        .await
        .unwrap();
    budgets
        .create(
            &pp,
            &budget(
                "api",
                json!({"maxUnavailable": 1,
            "selector": {"matchLabels": {"app": "api"}}}),
            ),
        )
        .await
        .unwrap();
    rolled_out(&deployments, "web", 3).await;
    let settled = async |name: &str, allowed: i32| {
        eventually(&format!("budget {name} allows {allowed}"), async || {
            let b = budgets.get(name).await.ok()?;
            let status = b.status?;
            (status.observed_generation == b.metadata.generation
                && status.disruptions_allowed == allowed)
                .then_some(status)
        })
        .await
    };
    let status = settled("web", 1).await;
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.expected_pods
        ),
        (3, 2, 3)
    );
    let allowed = condition(status.conditions.as_ref(), "DisruptionAllowed").unwrap();
    assert_eq!(
        (&allowed["status"], &allowed["reason"]),
        (&json!("True"), &json!("SufficientPods"))
    );
    let status = settled("api", 1).await;
    assert_eq!(
        (
            status.current_healthy,
            status.desired_healthy,
            status.expected_pods
        ),
        (2, 1, 2)
    );

    // One eviction within the budget; the next one is refused until the
    // replacement Pod is Ready.
    let web: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(evict(&pods, &web[0]).await, 201);
    assert_eq!(evict(&pods, &web[1]).await, 429);
    let status = budgets.get("web").await.unwrap().status.unwrap();
    assert_eq!(status.disruptions_allowed, 0);
    eventually("the second eviction", async || {
        (evict(&pods, &web[1]).await == 201).then_some(())
    })
    .await;
    // The evicted Pods are gone: their entries leave `disruptedPods`.
    let status = eventually("disruptedPods emptied", async || {
        let status = budgets.get("web").await.ok()?.status?;
        let recorded = status.disrupted_pods.clone().unwrap_or_default();
        (recorded.is_empty() && status.disruptions_allowed == 1).then_some(status)
    })
    .await;
    assert_eq!(status.current_healthy, 3);
    simulation.stop().await;
    server.shutdown().await;
}

/// The HPA's condition `kind`, as JSON.
fn hpa_condition(hpa: &HorizontalPodAutoscaler, kind: &str) -> Option<serde_json::Value> {
    condition(hpa.status.as_ref()?.conditions.as_ref(), kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscalers_scale_their_target_within_bounds_from_the_load_set_by_hand() {
    let (_server, _simulation, client) = start().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &deployment("web", 3, "nginx:1.27"))
        .await
        .unwrap();
    let hpa = |name: &str, target: &str| -> HorizontalPodAutoscaler {
        serde_json::from_value(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                     "minReplicas": 2, "maxReplicas": 8,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 50}}}]}
        }))
        .unwrap()
    };
    hpas.create(&PostParams::default(), &hpa("web", "web"))
        .await
        .unwrap();
    hpas.create(&PostParams::default(), &hpa("lost", "missing"))
        .await
        .unwrap();

    // No utilization yet: nothing to compute, and the target keeps its count.
    let waiting = eventually("the HPA says it has no metric", async || {
        let h = hpas.get("web").await.ok()?;
        let active = hpa_condition(&h, "ScalingActive")?;
        (active["status"] == "False").then_some(h)
    })
    .await;
    let active = hpa_condition(&waiting, "ScalingActive").unwrap();
    assert_eq!(active["reason"], "FailedGetResourceMetric");
    assert!(
        active["message"]
            .as_str()
            .unwrap()
            .contains("simulate.gantry.dev/load"),
        "{active}"
    );
    let status = waiting.status.as_ref().unwrap();
    assert_eq!(
        (status.current_replicas, status.desired_replicas),
        (Some(3), 3)
    );
    let lost = eventually("the HPA without a target says so", async || {
        let h = hpas.get("lost").await.ok()?;
        let able = hpa_condition(&h, "AbleToScale")?;
        (able["status"] == "False").then_some(able)
    })
    .await;
    assert_eq!(lost["reason"], "FailedGetScale");
    assert!(
        lost["message"].as_str().unwrap().contains("missing"),
        "{lost}"
    );

    // Three Pods' worth of load on 3 replicas is twice the target
    // utilization: twice the replicas, where it holds; then the bounds.
    for (load, replicas, limited) in [
        (300, 6, "DesiredWithinRange"),
        (1000, 8, "TooManyReplicas"),
        (10, 2, "TooFewReplicas"),
    ] {
        hpas.patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "simulate.gantry.dev/load": load.to_string()}}})),
        )
        .await
        .unwrap();
        let h = eventually(&format!("scaled to {replicas}"), async || {
            let d = deployments.get("web").await.ok()?;
            let h = hpas.get("web").await.ok()?;
            let status = h.status.as_ref()?;
            let done = d.spec?.replicas == Some(replicas)
                && status.current_replicas == Some(replicas)
                && status.desired_replicas == replicas;
            done.then_some(h)
        })
        .await;
        let limits = hpa_condition(&h, "ScalingLimited").unwrap();
        assert_eq!(limits["reason"], limited, "{limits}");
        assert_eq!(
            hpa_condition(&h, "ScalingActive").unwrap()["reason"],
            "ValidMetricFound"
        );
        assert!(hpa_condition(&h, "AbleToScale").unwrap()["status"] == "True");
        let status = h.status.as_ref().unwrap();
        assert!(status.last_scale_time.is_some());
        let metric = serde_json::to_value(&status.current_metrics).unwrap();
        assert_eq!(
            metric[0]["resource"]["current"]["averageUtilization"],
            (f64::from(load) / f64::from(replicas)).round()
        );
    }
    // The replicas were written through the scale subresource.
    let d = deployments.get("web").await.unwrap();
    let scaled = d
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|m| m.subresource.as_deref() == Some("scale"))
        .expect("a scale entry");
    assert_eq!(scaled.manager.as_deref(), Some("gantry-simulate"));
}
