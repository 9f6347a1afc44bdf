//! The real `kubectl` against each API server backend: every kubectl found
//! (`GANTRY_KUBECTL`, a colon-separated list, or Debian's, the one built with
//! the real control plane and `kubectl` on PATH) runs the whole suite
//! against a fresh server.

#[path = "common/webhook.rs"]
mod webhook_server;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gantry_test_support::{Backend, Cluster, backends, kubectls};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    minor: u32,
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl Kubectl {
    async fn new(bin: &Path, dir: &Path, kubeconfig: PathBuf) -> Kubectl {
        let out = Command::new(bin)
            .args(["version", "--client", "-o", "json"])
            .output()
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let minor: u32 = v["clientVersion"]["minor"]
            .as_str()
            .unwrap()
            .trim_end_matches('+')
            .parse()
            .unwrap();
        Kubectl {
            bin: bin.to_path_buf(),
            kubeconfig,
            cache: dir.join(format!("cache-{minor}")),
            minor,
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        c
    }

    async fn run_stdin(&self, args: &[&str], stdin: &str) -> Out {
        let mut c = self.cmd(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .await
            .unwrap();
        let out = tokio::time::timeout(Duration::from_mins(1), child.wait_with_output())
            .await
            .expect("kubectl finished")
            .unwrap();
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    async fn run(&self, args: &[&str]) -> Out {
        self.run_stdin(args, "").await
    }

    #[track_caller]
    fn check(&self, args: &[&str], out: Out, want_ok: bool) -> Out {
        assert_eq!(
            out.ok, want_ok,
            "kubectl 1.{} {args:?}\nstdout: {}\nstderr: {}",
            self.minor, out.stdout, out.stderr
        );
        out
    }

    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        self.check(args, out, true).stdout
    }

    async fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run_stdin(args, stdin).await;
        self.check(args, out, true).stdout
    }

    async fn fail(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        self.check(args, out, false).stderr
    }

    async fn fail_stdin(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run_stdin(args, stdin).await;
        self.check(args, out, false).stderr
    }
}

const CRD: &str = r"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should look like.
            properties:
              size: {type: string, description: How big the widget is.}
              replicas: {type: integer, maximum: 10, description: How many widgets to make.}
";

/// `kubectl explain` prints the API's descriptions, of built-ins and of a CRD,
/// and follows a CRD change.
async fn explain(k: &Kubectl) {
    let out = k.ok(&["explain", "deployment.spec.replicas"]).await;
    assert!(
        out.contains("replicas") && out.contains("<integer>"),
        "{out}"
    );
    assert!(out.contains("Number of desired pods."), "{out}");
    let out = k.ok(&["explain", "configmap"]).await;
    assert!(out.contains("ConfigMap holds configuration data"), "{out}");
    let out = k.ok(&["explain", "widget.spec"]).await;
    assert!(out.contains("What the widget should look like."), "{out}");
    assert!(out.contains("How big the widget is."), "{out}");
    assert!(out.contains("How many widgets to make."), "{out}");
    let out = k.ok(&["explain", "widget.metadata.name"]).await;
    assert!(
        out.contains("Name must be unique within a namespace."),
        "{out}"
    );
    // A new description is explained once kube's OpenAPI controller (or the
    // embedded server, at once) has rebuilt the document.
    k.ok(&[
        "patch",
        "crd",
        "widgets.example.com",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/description","value":"The size, now."}]"#,
    ])
    .await;
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    loop {
        let out = k.ok(&["explain", "widget.spec.size"]).await;
        if out.contains("The size, now.") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{out}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn widget_yaml(size: &str, replicas: u32) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: {size}\n  replicas: {replicas}\n"
    )
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_suite(backend: Backend) {
    for bin in kubectls() {
        eprintln!("running the kubectl suite with {}", bin.display());
        suite(&bin, backend).await;
    }
}

async fn suite(bin: &Path, backend: Backend) {
    let s = Cluster::start(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(bin, dir.path(), s.kubeconfig().to_path_buf()).await;

    // CRD, then CRs.
    let out = k.ok_stdin(&["create", "-f", "-"], CRD).await;
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"),
        "{out}"
    );
    let out = k
        .ok(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=60s",
        ])
        .await;
    assert!(out.contains("condition met"), "{out}");
    let out = k
        .ok_stdin(&["create", "-f", "-"], &widget_yaml("small", 1))
        .await;
    assert!(out.contains("widget.example.com/w1 created"), "{out}");
    // Printer columns.
    let out = k.ok(&["get", "widgets"]).await;
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].split_whitespace().eq(["NAME", "SIZE", "REPLICAS"]),
        "{out}"
    );
    assert!(
        lines[1].split_whitespace().eq(["w1", "small", "1"]),
        "{out}"
    );
    assert!(
        k.ok(&["get", "wd", "w1", "-o", "name"])
            .await
            .contains("widget.example.com/w1")
    );
    // Schema violation is reported.
    let err = k
        .fail_stdin(
            &["create", "-f", "-"],
            &widget_yaml("big", 99).replace("w1", "w2"),
        )
        .await;
    assert!(err.contains("spec.replicas"), "{err}");
    if k.minor >= 25 {
        // Server-side field validation (kubectl sends fieldValidation=Strict).
        let err = k.fail_stdin(&["create", "-f", "-"], "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w3\nspec:\n  bogus: 1\n").await;
        assert!(err.contains("unknown field \"spec.bogus\""), "{err}");
    }

    explain(&k).await;

    // Generator commands (kubectl 1.32 sends these as protobuf).
    k.ok(&["create", "namespace", "gen-ns"]).await;
    k.ok(&["create", "configmap", "gen-cm", "--from-literal=a=b"])
        .await;
    k.ok(&[
        "create",
        "secret",
        "generic",
        "gen-secret",
        "--from-literal=k=v",
    ])
    .await;
    k.ok(&["create", "serviceaccount", "gen-sa"]).await;
    k.ok(&[
        "create",
        "deployment",
        "gen-deploy",
        "--image=nginx:1",
        "--port=80",
    ])
    .await;
    let image = k
        .ok(&[
            "get",
            "deployment",
            "gen-deploy",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ])
        .await;
    assert_eq!(image, "nginx:1");
    k.ok(&["create", "service", "clusterip", "gen-svc", "--tcp=80:8080"])
        .await;
    let port = k
        .ok(&[
            "get",
            "service",
            "gen-svc",
            "-o",
            "jsonpath={.spec.ports[0].targetPort}",
        ])
        .await;
    assert_eq!(port, "8080");
    k.ok(&["create", "job", "gen-job", "--image=busybox"]).await;
    let data = k
        .ok(&["get", "configmap", "gen-cm", "-o", "jsonpath={.data.a}"])
        .await;
    assert_eq!(data, "b");
    let secret = k
        .ok(&["get", "secret", "gen-secret", "-o", "jsonpath={.data.k}"])
        .await;
    assert_eq!(secret, "dg==");
    assert!(k.ok(&["get", "ns", "gen-ns"]).await.contains("Active"));

    // Server-side apply with two managers: conflict, then --force-conflicts.
    // Same values as the creator: shared ownership, no conflict.
    let out = k
        .ok_stdin(
            &["apply", "--server-side", "--field-manager=alice", "-f", "-"],
            &widget_yaml("small", 1),
        )
        .await;
    assert!(out.contains("serverside-applied"), "{out}");
    let err = k
        .fail_stdin(
            &["apply", "--server-side", "--field-manager=bob", "-f", "-"],
            &widget_yaml("large", 1),
        )
        .await;
    assert!(
        err.contains("conflict") && err.contains("alice") && err.contains(".spec.size"),
        "{err}"
    );
    k.ok_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager=bob",
            "--force-conflicts",
            "-f",
            "-",
        ],
        &widget_yaml("large", 1),
    )
    .await;
    let mut get_yaml = vec!["get", "widget", "w1", "-o", "yaml"];
    if k.minor >= 21 {
        get_yaml.push("--show-managed-fields");
    }
    let yaml = k.ok(&get_yaml).await;
    assert!(
        yaml.contains("managedFields:")
            && yaml.contains("manager: bob")
            && yaml.contains("operation: Apply"),
        "{yaml}"
    );
    assert!(yaml.contains("size: large"), "{yaml}");

    // kubectl get -w sees changes.
    let mut watch = k.cmd(&["get", "configmaps", "-w", "--request-timeout=60s"]);
    watch
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let mut child = watch.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Make sure the watch is established before the change: wait for the header.
    let saw_header = tokio::time::timeout(Duration::from_secs(30), async {
        k.ok_stdin(
            &["create", "-f", "-"],
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seen-by-watch\n",
        )
        .await;
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("seen-by-watch") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        saw_header,
        Ok(true),
        "kubectl get -w printed the new configmap"
    );
    child.kill().await.ok();

    // Delete with a finalizer.
    k.ok_stdin(&["create", "-f", "-"], "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fin\n  finalizers: [example.com/hold]\n").await;
    k.ok(&["delete", "configmap", "fin", "--wait=false"]).await;
    let ts = k
        .ok(&[
            "get",
            "configmap",
            "fin",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .await;
    assert!(!ts.trim().is_empty(), "deletionTimestamp set");
    k.ok(&[
        "patch",
        "configmap",
        "fin",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    let err = k.fail(&["get", "configmap", "fin"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );

    // Client-side apply (last-applied annotation + strategic/merge patch).
    let cm = |v: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: csa\ndata:\n  key: {v}\n")
    };
    assert!(
        k.ok_stdin(&["apply", "-f", "-"], &cm("one"))
            .await
            .contains("created")
    );
    assert!(
        k.ok_stdin(&["apply", "-f", "-"], &cm("one"))
            .await
            .contains("unchanged")
    );
    assert!(
        k.ok_stdin(&["apply", "-f", "-"], &cm("two"))
            .await
            .contains("configured")
    );
    let yaml = k.ok(&["get", "configmap", "csa", "-o", "yaml"]).await;
    assert!(
        yaml.contains("key: two")
            && yaml.contains("kubectl.kubernetes.io/last-applied-configuration"),
        "{yaml}"
    );

    // kubectl patch, all three types.
    k.ok(&[
        "patch",
        "configmap",
        "csa",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"1"}]"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "configmap",
        "csa",
        "--type=merge",
        "-p",
        r#"{"data":{"m":"2"}}"#,
    ])
    .await;
    k.ok(&[
        "patch",
        "configmap",
        "csa",
        "--type=strategic",
        "-p",
        r#"{"data":{"s":"3"}}"#,
    ])
    .await;
    let data = k
        .ok(&["get", "configmap", "csa", "-o", "jsonpath={.data}"])
        .await;
    for f in [
        "\"j\":\"1\"",
        "\"m\":\"2\"",
        "\"s\":\"3\"",
        "\"key\":\"two\"",
    ] {
        assert!(data.contains(f), "{f} in {data}");
    }

    // Namespace deletion cascades.
    k.ok_stdin(&["create", "-f", "-"], "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: doomed\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inside\n  namespace: doomed\n").await;
    k.ok(&["delete", "namespace", "doomed", "--timeout=60s"])
        .await;
    let err = k.fail(&["get", "namespace", "doomed"]).await;
    assert!(err.contains("not found"), "{err}");
    let err = k
        .fail(&["get", "configmap", "inside", "-n", "doomed"])
        .await;
    assert!(err.contains("not found"), "{err}");

    // Deleting the CRD removes its objects.
    k.ok(&["delete", "crd", "widgets.example.com"]).await;
    s.shutdown().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_admission_webhooks(backend: Backend) {
    for bin in kubectls() {
        eprintln!("running kubectl_admission_webhooks with {}", bin.display());
        webhooks_suite(&bin, backend).await;
    }
}

/// `kubectl create` prints a webhook's denial and warnings; a mutation shows in
/// `kubectl get -o yaml`.
async fn webhooks_suite(bin: &Path, backend: Backend) {
    use serde_json::json;
    use webhook_server::*;
    let hook = start_hook(|path, r| match path {
        "/deny" if r["request"]["name"] == "forbidden" => deny(
            r,
            json!({"code": 403, "reason": "Forbidden", "message": "configmaps named forbidden are not allowed"}),
        ),
        "/mutate" => {
            let mut rep = patch(
                r,
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated-by": "gantry-test"}}]),
            );
            let mut body: serde_json::Value = serde_json::from_slice(&rep.body).unwrap();
            body["response"]["warnings"] = json!(["labelled by the test webhook"]);
            rep.body = serde_json::to_vec(&body).unwrap();
            rep
        }
        _ => allow(r),
    })
    .await;
    let s = Cluster::start(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(bin, dir.path(), s.kubeconfig().to_path_buf()).await;
    for (kind, name, url) in [
        ("ValidatingWebhookConfiguration", "deny", hook.url("/deny")),
        (
            "MutatingWebhookConfiguration",
            "mutate",
            hook.url("/mutate"),
        ),
    ] {
        let cfg = configuration(
            kind,
            name,
            vec![webhook(&format!("{name}.example.com"), &url, &hook.ca_b64)],
        );
        k.ok_stdin(&["create", "-f", "-"], &cfg.to_string()).await;
    }

    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n")
    };
    // kube-apiserver picks up new configurations through an informer: until
    // it has, the create goes through; undo it and try again.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let err = loop {
        let out = k.run_stdin(&["create", "-f", "-"], &cm("forbidden")).await;
        if !out.ok {
            break out.stderr;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the webhooks were never called"
        );
        k.ok(&["delete", "configmap", "forbidden"]).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        err.contains(
            "admission webhook \"deny.example.com\" denied the request: configmaps named forbidden are not allowed"
        ),
        "{err}"
    );
    k.fail(&["get", "configmap", "forbidden"]).await;

    let args = ["create", "-f", "-"];
    let out = k.run_stdin(&args, &cm("allowed")).await;
    let out = k.check(&args, out, true);
    assert!(
        out.stdout.contains("configmap/allowed created"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("Warning: labelled by the test webhook"),
        "{}",
        out.stderr
    );
    let yaml = k.ok(&["get", "configmap", "allowed", "-o", "yaml"]).await;
    assert!(yaml.contains("mutated-by: gantry-test"), "{yaml}");
    s.shutdown().await;
}

#[backends]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_policy_generators_and_drain(backend: Backend) {
    for bin in kubectls() {
        eprintln!(
            "running kubectl_policy_generators_and_drain with {}",
            bin.display()
        );
        policy_suite(&bin, backend).await;
    }
}

const NODE_AND_PODS: &str = r"
apiVersion: v1
kind: Node
metadata:
  name: gantry-dev
---
apiVersion: v1
kind: Pod
metadata:
  name: on-node
  namespace: default
spec:
  nodeName: gantry-dev
  containers: [{name: c, image: nginx}]
";

/// The generators kubectl sends as protobuf (RBAC, quota, budget, priority class,
/// ingress), then `kubectl drain` (evictions, also as protobuf) as a dry run and for real.
async fn policy_suite(bin: &Path, backend: Backend) {
    let s = Cluster::start(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::new(bin, dir.path(), s.kubeconfig().to_path_buf()).await;
    let get = |kind: &'static str, name: &'static str, path: &'static str| {
        let k = &k;
        async move {
            k.ok(&["get", kind, name, "-o", &format!("jsonpath={path}")])
                .await
        }
    };

    k.ok(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=pods,configmaps",
    ])
    .await;
    assert_eq!(
        get("role", "reader", "{.rules[0].verbs}").await,
        r#"["get","list"]"#
    );
    k.ok(&[
        "create",
        "rolebinding",
        "read",
        "--role=reader",
        "--serviceaccount=default:default",
    ])
    .await;
    assert_eq!(
        get("rolebinding", "read", "{.roleRef.name}/{.subjects[0].kind}").await,
        "reader/ServiceAccount"
    );
    k.ok(&[
        "create",
        "clusterrole",
        "health",
        "--verb=get",
        "--non-resource-url=/healthz",
    ])
    .await;
    assert_eq!(
        get("clusterrole", "health", "{.rules[0].nonResourceURLs[0]}").await,
        "/healthz"
    );
    k.ok(&[
        "create",
        "clusterrolebinding",
        "health",
        "--clusterrole=health",
        "--group=devs",
    ])
    .await;
    assert_eq!(
        get("clusterrolebinding", "health", "{.subjects[0].name}").await,
        "devs"
    );
    k.ok(&["create", "quota", "small", "--hard=pods=10,requests.cpu=2"])
        .await;
    assert_eq!(get("quota", "small", "{.spec.hard.pods}").await, "10");
    k.ok(&[
        "create",
        "priorityclass",
        "high",
        "--value=1000",
        "--description=urgent",
    ])
    .await;
    assert_eq!(
        get("priorityclass", "high", "{.value}/{.description}").await,
        "1000/urgent"
    );
    k.ok(&["create", "ingress", "web", "--rule=foo.com/bar=svc:8080"])
        .await;
    assert_eq!(
        get("ingress", "web", "{.spec.rules[0].host}{.spec.rules[0].http.paths[0].path}:{.spec.rules[0].http.paths[0].backend.service.port.number}").await,
        "foo.com/bar:8080"
    );
    if k.minor >= 22 {
        // Older kubectls create policy/v1beta1 budgets, which kube no longer serves.
        k.ok(&[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=50%",
        ])
        .await;
        assert_eq!(get("pdb", "web", "{.spec.minAvailable}").await, "50%");
    }

    // The aggregator's list of local APIServices.
    let out = k.ok(&["get", "apiservices"]).await;
    let line = out
        .lines()
        .find(|l| l.starts_with("v1.policy "))
        .unwrap_or_default();
    assert!(
        line.split_whitespace()
            .take(3)
            .eq(["v1.policy", "Local", "True"]),
        "{out}"
    );
    assert!(out.lines().any(|l| l.starts_with("v1. ")), "{out}");
    assert_eq!(
        get(
            "apiservice",
            "v1.apps",
            "{.spec.groupPriorityMinimum}/{.spec.versionPriority}"
        )
        .await,
        "17800/15"
    );

    // Drain: a dry run evicts nothing and leaves the node schedulable.
    k.ok_stdin(&["create", "-f", "-"], NODE_AND_PODS).await;
    let dry_run = [
        "drain",
        "gantry-dev",
        "--ignore-daemonsets",
        "--force",
        "--dry-run=server",
    ];
    if k.minor > 20 {
        let out = k.ok(&dry_run).await;
        assert!(
            out.contains("evicting pod default/on-node (server dry run)"),
            "{out}"
        );
    } else {
        // kubectl 1.20's dry-run check fails on both: kube no longer serves the
        // apiextensions.k8s.io/v1beta1 it asks, and the embedded server's OpenAPI v2
        // is empty (it then says the kind "doesn't support dry-run").
        k.fail(&dry_run).await;
    }
    k.ok(&["get", "pod", "on-node"]).await;
    assert_eq!(get("node", "gantry-dev", "{.spec.unschedulable}").await, "");
    let out = k
        .ok(&[
            "drain",
            "gantry-dev",
            "--ignore-daemonsets",
            "--force",
            "--grace-period=0",
            "--timeout=60s",
        ])
        .await;
    assert!(out.contains("pod/on-node evicted"), "{out}");
    let err = k.fail(&["get", "pod", "on-node"]).await;
    assert!(err.contains("not found"), "{err}");
    assert_eq!(
        get("node", "gantry-dev", "{.spec.unschedulable}").await,
        "true"
    );
    s.shutdown().await;
}
