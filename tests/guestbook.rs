//! The Guestbook example (`plugins/guestbook`, Go) end to end on each
//! backend: installed as `gantry dev` installs it (its CRD, and its
//! component served over HTTP on 127.0.0.1 and bound by URL with a pin),
//! a Guestbook becomes three Deployments and three Services, the CRD
//! defaults and validates the spec, the status follows the ready replicas
//! of each tier, a spec change reaches the children, and deleting the
//! Guestbook collects them.

use std::time::Duration;

use gantry_tests::{
    Backend, Env, GC_WAIT, backends, condition, eventually, eventually_within, get_json,
};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// The first install builds the plugin with Go (a minute or two when Go's
/// caches are cold) and the operator compiles the 16 MB component.
const FIRST_CONVERGENCE: Duration = Duration::from_mins(4);

const TIERS: [&str; 3] = ["frontend", "redis-leader", "redis-follower"];

fn guestbook(name: &str, spec: &Value) -> Value {
    json!({"apiVersion": "webapp.example.com/v1", "kind": "Guestbook",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// Make every replica of the tier's Deployment `name` ready: on the
/// embedded server (no controllers) by writing the Deployment's status; on
/// a real one by marking its Pods (which no kubelet runs) Running and Ready,
/// so that kube's replicaset and deployment controllers count them.
async fn tier_runs(env: &Env, backend: Backend, name: &str, replicas: usize) {
    match backend {
        Backend::Embedded => {
            let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
            let status = json!({"status": {"replicas": replicas, "readyReplicas": replicas,
                                           "availableReplicas": replicas}});
            deployments
                .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap();
        }
        Backend::Node => unreachable!("#[backends] runs embedded and real"),
        Backend::Real => {
            let pods = env.api("v1", "Pod", "pods", Some("default"));
            let component = name.trim_start_matches("gb-");
            let selector =
                format!("app.kubernetes.io/instance=gb,app.kubernetes.io/component={component}");
            let listed = eventually(&format!("{replicas} Pods of {name}"), || async {
                let list = pods
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .ok()?;
                (list.items.len() == replicas).then_some(list.items)
            })
            .await;
            let running = json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}});
            for pod in listed {
                let pod_name = pod.metadata.name.unwrap();
                pods.patch_status(&pod_name, &PatchParams::default(), &Patch::Merge(&running))
                    .await
                    .unwrap();
            }
        }
    }
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guestbook_gets_its_three_tiers_and_reports_them_ready(backend: Backend) {
    let env = Env::start(backend).await;
    env.install_example("guestbook").await;
    let binding = env.binding("guestbook").await;
    let binding_yaml = &binding.data.as_ref().unwrap()["binding.yaml"];
    assert!(
        binding_yaml.contains("url: \"http://127.0.0.1:") && binding_yaml.contains("sha256: "),
        "bound by URL with a pin: {binding_yaml}"
    );
    let guestbooks = env.api(
        "webapp.example.com/v1",
        "Guestbook",
        "guestbooks",
        Some("default"),
    );

    // The CRD validates: eleven frontend replicas are refused by the API server.
    let refused = gantry::dev::apply_object(
        &env.client,
        &guestbook("too-big", &json!({"frontend": {"replicas": 11}})),
    )
    .await
    .expect_err("spec.frontend.replicas is at most 10");
    assert!(
        format!("{refused:#}").contains("frontend.replicas"),
        "{refused:#}"
    );

    // Only the frontend's replicas are given: the CRD defaults the rest.
    env.apply(guestbook("gb", &json!({"frontend": {"replicas": 2}})))
        .await;
    let stored = get_json(&guestbooks, "gb").await.unwrap();
    assert_eq!(stored["spec"]["redis"]["followerReplicas"], 2, "{stored}");
    assert_eq!(stored["spec"]["frontend"]["serviceType"], "ClusterIP");

    let deployments = env.api("apps/v1", "Deployment", "deployments", Some("default"));
    let services = env.api("v1", "Service", "services", Some("default"));
    let children = eventually_within(
        FIRST_CONVERGENCE,
        "three Deployments and three Services",
        || async {
            let mut found = Vec::new();
            for tier in TIERS {
                let name = format!("gb-{tier}");
                found.push((
                    get_json(&deployments, &name).await?,
                    get_json(&services, &name).await?,
                ));
            }
            Some(found)
        },
    )
    .await;
    let (frontend, frontend_service) = &children[0];
    assert_eq!(frontend["spec"]["replicas"], 2);
    assert_eq!(
        frontend["spec"]["template"]["spec"]["containers"][0]["image"],
        "us-docker.pkg.dev/google-samples/containers/gke/gb-frontend:v5"
    );
    assert_eq!(frontend_service["spec"]["ports"][0]["port"], 80);
    assert_eq!(children[1].0["spec"]["replicas"], 1, "one Redis leader");
    assert_eq!(
        children[2].0["spec"]["replicas"], 2,
        "the defaulted followers"
    );
    for (deployment, service) in &children {
        for child in [deployment, service] {
            assert_eq!(child["metadata"]["ownerReferences"][0]["name"], "gb");
        }
    }

    // Nothing runs yet: each tier reports 0 ready, and the Guestbook is not Ready.
    let gb = eventually("the status of the tiers", || async {
        let gb = get_json(&guestbooks, "gb").await?;
        (condition(&gb, "FrontendReady")?["status"] == "False").then_some(gb)
    })
    .await;
    assert_eq!(
        gb["status"]["frontend"],
        json!({"replicas": 2, "readyReplicas": 0})
    );
    assert_eq!(condition(&gb, "Ready").unwrap()["status"], "False");
    assert_eq!(gb["status"]["url"], "http://gb-frontend.default.svc");

    // Every replica runs: each tier is ready, and so is the Guestbook.
    for (tier, replicas) in TIERS.iter().zip([2, 1, 2]) {
        tier_runs(&env, backend, &format!("gb-{tier}"), replicas).await;
    }
    let gb = eventually("Ready once every tier is", || async {
        let gb = get_json(&guestbooks, "gb").await?;
        (condition(&gb, "Ready")?["status"] == "True").then_some(gb)
    })
    .await;
    assert_eq!(gb["status"]["frontend"]["readyReplicas"], 2);
    assert_eq!(gb["status"]["redisLeader"]["readyReplicas"], 1);
    assert_eq!(gb["status"]["redisFollower"]["readyReplicas"], 2);
    for tier in ["FrontendReady", "RedisLeaderReady", "RedisFollowersReady"] {
        assert_eq!(condition(&gb, tier).unwrap()["status"], "True", "{tier}");
    }

    // A spec change reaches the children (the Go plugin's second and later
    // calls, with more observed children in the request).
    env.apply(guestbook(
        "gb",
        &json!({"frontend": {"replicas": 3}, "redis": {"followerReplicas": 1}}),
    ))
    .await;
    eventually("the new replica counts", || async {
        let frontend = get_json(&deployments, "gb-frontend").await?;
        let followers = get_json(&deployments, "gb-redis-follower").await?;
        (frontend["spec"]["replicas"] == 3 && followers["spec"]["replicas"] == 1).then_some(())
    })
    .await;
    eventually(
        "FrontendReady=False while the third replica starts",
        || async {
            let gb = get_json(&guestbooks, "gb").await?;
            (condition(&gb, "FrontendReady")?["status"] == "False"
                && gb["status"]["frontend"]["replicas"] == 3)
                .then_some(())
        },
    )
    .await;

    guestbooks
        .delete("gb", &DeleteParams::default())
        .await
        .unwrap();
    eventually_within(GC_WAIT, "the tiers collected", || async {
        for tier in TIERS {
            let name = format!("gb-{tier}");
            if get_json(&deployments, &name).await.is_some()
                || get_json(&services, &name).await.is_some()
            {
                return None;
            }
        }
        Some(())
    })
    .await;
    env.stop().await;
}
