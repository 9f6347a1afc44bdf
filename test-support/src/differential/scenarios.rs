//! kubectl scenarios for the differential suite: each kubectl found runs
//! the same commands (those its version has) against an embedded server
//! behind the recording proxy, one recording per kubectl.
//!
//! The commands cover what kubectl users do most: create, get (JSON,
//! tables, `-o wide`, field and label selectors), apply --server-side,
//! patches of each type, label, annotate, replace, scale, dry-run, RBAC and
//! quota, budget, priority class and ingress generators, access and token reviews, auth
//! can-i, service-account tokens, drain, explain, events, describe, a CRD with
//! printer columns, status and scale subresources and a finalizer,
//! generated names, deletes (each kind answers as its registry does), admission
//! policies and bindings (served, defaulted, printed, refused), the
//! status new objects get, Events of both APIs with their field selectors,
//! the objects every cluster has from its start (the kubernetes Service and
//! its endpoints, system namespaces, the root CA ConfigMap, default roles),
//! and 404s. Their output is not checked here (the
//! kubectl suite of the API server does that); only what the servers
//! answer is compared, on replay.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::{Backend, Cluster};

const NS: &str = "diff";

/// Input of a command.
enum Input {
    None,
    Text(&'static str),
    /// Made from the previous command's stdout.
    FromPrevious(fn(&str) -> String),
}

/// One kubectl command.
struct Step {
    args: &'static [&'static str],
    input: Input,
    /// The first kubectl minor version that has what it uses.
    since: u32,
}

const fn step(args: &'static [&'static str]) -> Step {
    Step {
        args,
        input: Input::None,
        since: 0,
    }
}

const fn with_input(args: &'static [&'static str], text: &'static str) -> Step {
    Step {
        args,
        input: Input::Text(text),
        since: 0,
    }
}

const fn since(minor: u32, args: &'static [&'static str]) -> Step {
    Step {
        args,
        input: Input::None,
        since: minor,
    }
}

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: d1, namespace: diff, labels: {app: d1}}
spec:
  replicas: 1
  selector: {matchLabels: {app: d1}}
  template:
    metadata: {labels: {app: d1}}
    spec:
      containers: [{name: web, image: nginx:1.25, ports: [{containerPort: 80}]}]
";

const DEPLOYMENT_V2: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: d1, namespace: diff, labels: {app: d1, tier: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: d1}}
  template:
    metadata: {labels: {app: d1}}
    spec:
      containers: [{name: web, image: nginx:1.26, ports: [{containerPort: 80}]}]
";

const GENERATED: &str = "apiVersion: v1
kind: ConfigMap
metadata: {generateName: gen-, namespace: diff, labels: {made: generated}}
data: {k: v}
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Size, type: string, jsonPath: .spec.size}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: string, default: small}
              replicas: {type: integer, maximum: 10}
          status:
            type: object
            properties:
              replicas: {type: integer}
              ready: {type: boolean}
";

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: diff, finalizers: [example.com/keep]}
spec: {replicas: 1}
";

const BAD_WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata: {name: w2, namespace: diff}
spec: {replicas: 11}
";

/// Empty labels and annotations, which kube does not store.
const EMPTY_LABELS: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: bare, namespace: diff, labels: {}, annotations: {}}
";

/// A Pod whose requests default to its limits: `QoS` class `Guaranteed`.
const GUARANTEED_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: p2, namespace: diff}
spec:
  restartPolicy: Never
  containers: [{name: web, image: nginx:1.27, resources: {limits: {cpu: 100m, memory: 64Mi}}}]
";

/// Kinds whose new objects get a status from kube, and no controller of the
/// test control plane writes theirs. (A claim gets kube's protection finalizer
/// from an admission plugin, which the embedded server leaves out: its claims
/// would never go, with no controller to remove it; `tests/kube_parity.rs` has
/// their status.)
const WITH_STATUS: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ReplicationController
  metadata: {name: rc, namespace: diff}
  spec:
    replicas: 0
    selector: {app: rc}
    template:
      metadata: {labels: {app: rc}}
      spec: {containers: [{name: web, image: nginx:1.27}]}
- apiVersion: policy/v1
  kind: PodDisruptionBudget
  metadata: {name: pdb, namespace: diff}
  spec: {minAvailable: 1, selector: {matchLabels: {app: none}}}
- apiVersion: networking.k8s.io/v1
  kind: Ingress
  metadata: {name: ing, namespace: diff}
  spec: {defaultBackend: {service: {name: svc1, port: {number: 80}}}}
";

/// An Event of each API.
const EVENTS: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Event
  metadata: {name: core-event, namespace: diff}
  involvedObject: {apiVersion: v1, kind: Pod, name: p2, namespace: diff}
  reason: Tested
  message: a core/v1 event
  type: Normal
- apiVersion: events.k8s.io/v1
  kind: Event
  metadata: {name: new-event, namespace: diff}
  regarding: {apiVersion: v1, kind: Pod, name: p2, namespace: diff}
  reason: Tested
  note: an events.k8s.io/v1 event
  type: Normal
  action: Test
  eventTime: '2026-01-02T03:04:05.000000Z'
  reportingController: gantry.dev/differential
  reportingInstance: differential-1
";

/// A Widget with no finalizer: deleted at once.
const PLAIN_WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata: {name: w3, namespace: diff}
spec: {replicas: 1}
";

/// Access reviews a webhook authorizer would send.
const ACCESS_REVIEWS: &str = "apiVersion: v1
kind: List
items:
- apiVersion: authorization.k8s.io/v1
  kind: SubjectAccessReview
  spec:
    user: alice
    groups: [devs]
    resourceAttributes: {namespace: diff, verb: get, resource: pods}
- apiVersion: authorization.k8s.io/v1
  kind: SubjectAccessReview
  spec:
    groups: [devs]
    nonResourceAttributes: {path: /healthz, verb: get}
- apiVersion: authorization.k8s.io/v1
  kind: SubjectAccessReview
  spec:
    resourceAttributes: {verb: get, resource: pods}
- apiVersion: authorization.k8s.io/v1
  kind: LocalSubjectAccessReview
  metadata: {namespace: diff}
  spec:
    user: alice
    resourceAttributes: {namespace: diff, verb: list, resource: pods}
";

/// A node with a Pod on it, for `kubectl drain`.
const NODE_WITH_POD: &str = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: gantry-dev}
- apiVersion: v1
  kind: Pod
  metadata: {name: on-node, namespace: diff}
  spec:
    nodeName: gantry-dev
    containers: [{name: web, image: nginx:1.27}]
";

/// A `TokenReview` of the token `kubectl create token` printed.
fn token_review(token: &str) -> String {
    serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token.trim()},
    })
    .to_string()
}

/// A ConfigMap as `kubectl get -o json` printed it, changed, for replace.
/// Objects kube's validation refuses, one reason each (several causes of one
/// object come in Go's map order, which varies).
const INVALID: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: negative, namespace: diff}
spec:
  replicas: -1
  selector: {matchLabels: {app: n}}
  template:
    metadata: {labels: {app: n}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: never, namespace: diff}
spec:
  selector: {matchLabels: {app: n}}
  template:
    metadata: {labels: {app: n}}
    spec: {restartPolicy: Never, containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: sometimes, namespace: diff}
spec: {restartPolicy: Sometimes, containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: ports, namespace: diff}
spec:
  containers:
  - name: c
    image: nginx
    ports: [{containerPort: 80, name: web}, {containerPort: 70000}, {containerPort: 81, name: web}]
---
apiVersion: v1
kind: Pod
metadata: {name: greedy, namespace: diff}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]
---
apiVersion: v1
kind: Service
metadata: {name: badports, namespace: diff}
spec: {ports: [{port: 70000, targetPort: 80, name: a}, {port: 80, name: a}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: badkey, namespace: diff}
data: {'bad key': x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: dotdot, namespace: diff}
data: {'..': x}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: badannotation, namespace: diff, annotations: {'bad key!': x}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: nopathtype, namespace: diff}
spec:
  rules: [{http: {paths: [{path: /, backend: {service: {name: s, port: {number: 80}}}}]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: noverbs, namespace: diff}
rules: [{apiGroups: [''], resources: [pods]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: badschedule, namespace: diff}
spec:
  schedule: every minute
  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: badminute, namespace: diff}
spec:
  schedule: '61 * * * *'
  jobTemplate: {spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: nosize, namespace: diff}
spec: {accessModes: [ReadWriteOnce]}
";

/// A 300 KiB annotation (kube allows 256 KiB for all of them).
fn big_annotation(_: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "bigannotation", "namespace": NS, "annotations": { "a": "x".repeat(300 * 1024) } }
    })
    .to_string()
}

fn changed_config_map(json: &str) -> String {
    let mut cm: Value = serde_json::from_str(json).unwrap_or_default();
    cm["data"]["replaced"] = "yes".into();
    cm.to_string()
}

/// `kubectl get ARGS -o json`.
macro_rules! get_json {
    ($($arg:expr),+) => {
        step(&["get", $($arg,)+ "-o", "json"])
    };
}

fn steps() -> Vec<Step> {
    vec![
        step(&["version", "-o", "json"]),
        step(&["create", "namespace", NS]),
        step(&["get", "namespace", NS, "-o", "json"]),
        // What every cluster has from its start.
        get_json!("namespace", "kube-system"),
        get_json!("service", "kubernetes", "-n", "default"),
        get_json!("endpoints", "kubernetes", "-n", "default"),
        get_json!("endpointslice", "kubernetes", "-n", "default"),
        get_json!("configmap", "kube-root-ca.crt", "-n", NS),
        get_json!("clusterrole", "admin"),
        get_json!("clusterrole", "system:aggregate-to-view"),
        get_json!("clusterrolebinding", "system:discovery"),
        get_json!(
            "clusterrolebinding",
            "system:controller:replicaset-controller"
        ),
        get_json!(
            "role",
            "extension-apiserver-authentication-reader",
            "-n",
            "kube-system"
        ),
        step(&["create", "configmap", "cm1", "-n", NS, "--from-literal=a=1"]),
        step(&["get", "configmap", "cm1", "-n", NS, "-o", "json"]),
        step(&["get", "configmaps", "-n", NS]),
        step(&["get", "configmaps", "-n", NS, "-o", "wide"]),
        step(&[
            "get",
            "configmaps",
            "-n",
            NS,
            "--field-selector",
            "metadata.name=cm1",
        ]),
        step(&["label", "configmap", "cm1", "-n", NS, "env=test"]),
        step(&["annotate", "configmap", "cm1", "-n", NS, "note=hello"]),
        step(&[
            "get",
            "configmaps",
            "-n",
            NS,
            "-l",
            "env=test",
            "-o",
            "json",
        ]),
        step(&[
            "patch",
            "configmap",
            "cm1",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"data":{"b":"2"}}"#,
        ]),
        step(&[
            "patch",
            "configmap",
            "cm1",
            "-n",
            NS,
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/data/c","value":"3"}]"#,
        ]),
        step(&["get", "configmap", "cm1", "-n", NS, "-o", "json"]),
        Step {
            args: &["replace", "-f", "-"],
            input: Input::FromPrevious(changed_config_map),
            since: 0,
        },
        step(&[
            "create",
            "configmap",
            "dry",
            "-n",
            NS,
            "--from-literal=x=y",
            "--dry-run=server",
            "-o",
            "json",
        ]),
        step(&["get", "configmap", "dry", "-n", NS]),
        with_input(&["create", "-f", "-", "-o", "json"], GENERATED),
        step(&[
            "get",
            "configmaps",
            "-n",
            NS,
            "-l",
            "made=generated",
            "-o",
            "json",
        ]),
        with_input(&["apply", "--server-side", "-f", "-"], DEPLOYMENT),
        with_input(&["apply", "--server-side", "-f", "-"], DEPLOYMENT_V2),
        step(&[
            "patch",
            "deployment",
            "d1",
            "-n",
            NS,
            "--type=strategic",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}"#,
        ]),
        step(&["scale", "deployment", "d1", "-n", NS, "--replicas=2"]),
        step(&["get", "deployment", "d1", "-n", NS, "-o", "json"]),
        step(&["get", "deployments", "-n", NS, "-o", "wide"]),
        step(&["describe", "deployment", "d1", "-n", NS]),
        step(&[
            "create",
            "secret",
            "generic",
            "s1",
            "-n",
            NS,
            "--from-literal=k=v",
        ]),
        step(&["get", "secret", "s1", "-n", NS, "-o", "json"]),
        step(&[
            "create",
            "service",
            "clusterip",
            "svc1",
            "-n",
            NS,
            "--tcp=80:8080",
        ]),
        step(&["get", "service", "svc1", "-n", NS, "-o", "json"]),
        step(&["run", "p1", "-n", NS, "--image=nginx", "--restart=Never"]),
        step(&["get", "pod", "p1", "-n", NS, "-o", "json"]),
        step(&[
            "get",
            "pods",
            "-n",
            NS,
            "--field-selector=status.phase=Pending",
        ]),
        step(&["get", "pods", "-n", NS, "-o", "wide"]),
        with_input(&["create", "-f", "-", "-o", "json"], GUARANTEED_POD),
        step(&[
            "get",
            "pods",
            "-n",
            NS,
            "--field-selector=spec.restartPolicy=Never,spec.schedulerName=default-scheduler,status.podIP=,status.nominatedNodeName=",
            "-o",
            "json",
        ]),
        step(&["delete", "pod", "p1", "-n", NS]),
        with_input(&["create", "-f", "-", "-o", "json"], WITH_STATUS),
        with_input(&["create", "-f", "-", "-o", "json"], EMPTY_LABELS),
        step(&["get", "services", "-n", NS, "-o", "wide"]),
        step(&["delete", "service", "svc1", "-n", NS]),
        step(&["create", "serviceaccount", "sa1", "-n", NS]),
        step(&["delete", "serviceaccount", "sa1", "-n", NS]),
        with_input(&["create", "-f", "-"], EVENTS),
        step(&["get", "event", "core-event", "-n", NS, "-o", "json"]),
        step(&[
            "get",
            "events.v1.events.k8s.io",
            "core-event",
            "-n",
            NS,
            "-o",
            "json",
        ]),
        step(&["get", "event", "new-event", "-n", NS, "-o", "json"]),
        step(&[
            "get",
            "events",
            "-n",
            NS,
            "--field-selector=involvedObject.apiVersion=v1,involvedObject.kind=Pod,source=gantry.dev/differential",
            "-o",
            "json",
        ]),
        since(26, &["events", "-n", NS, "--for", "pod/p2"]),
        step(&["get", "--raw", "/api/v1/bogus"]),
        step(&["get", "--raw", "/apis/nope.example.com/v1"]),
        step(&[
            "create",
            "role",
            "r1",
            "-n",
            NS,
            "--verb=get",
            "--resource=pods",
        ]),
        step(&[
            "create",
            "rolebinding",
            "rb1",
            "-n",
            NS,
            "--role=r1",
            "--user=alice",
        ]),
        step(&["create", "quota", "q1", "-n", NS, "--hard=pods=10"]),
        step(&["get", "role,rolebinding,resourcequota", "-n", NS]),
        step(&[
            "create",
            "clusterrole",
            "cr1",
            "--verb=get,list",
            "--resource=pods",
            "--resource-name=p1",
        ]),
        step(&[
            "create",
            "clusterrole",
            "cr2",
            "--verb=get",
            "--non-resource-url=/healthz",
        ]),
        step(&[
            "create",
            "clusterrolebinding",
            "crb1",
            "--clusterrole=cr1",
            "--group=devs",
        ]),
        since(
            22,
            &[
                "create",
                "pdb",
                "pdb1",
                "-n",
                NS,
                "--selector=app=web",
                "--min-available=1",
            ],
        ),
        step(&[
            "create",
            "priorityclass",
            "pc1",
            "--value=1000",
            "--description=urgent",
        ]),
        step(&[
            "create",
            "ingress",
            "ing1",
            "-n",
            NS,
            "--rule=foo.com/bar=svc1:8080",
        ]),
        with_input(&["create", "-f", "-", "-o", "json"], ACCESS_REVIEWS),
        step(&["auth", "can-i", "get", "pods", "-n", NS]),
        step(&["auth", "can-i", "get", "/metrics"]),
        step(&["create", "serviceaccount", "sa1", "-n", NS]),
        since(24, &["create", "token", "sa1", "-n", NS]),
        Step {
            args: &["create", "-f", "-", "-o", "json"],
            input: Input::FromPrevious(token_review),
            since: 24,
        },
        since(24, &["create", "token", "nobody", "-n", NS]),
        with_input(&["create", "-f", "-"], NODE_WITH_POD),
        step(&[
            "drain",
            "gantry-dev",
            "--ignore-daemonsets",
            "--force",
            "--dry-run=server",
        ]),
        step(&[
            "drain",
            "gantry-dev",
            "--ignore-daemonsets",
            "--force",
            "--grace-period=0",
            "--timeout=60s",
        ]),
        step(&["explain", "configmap"]),
        step(&["explain", "deployment.spec.replicas"]),
        with_input(&["create", "-f", "-"], INVALID),
        Step {
            args: &["create", "-f", "-"],
            input: Input::FromPrevious(big_annotation),
            since: 0,
        },
        step(&[
            "patch",
            "pod",
            "p2",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"spec":{"restartPolicy":"Always"}}"#,
        ]),
        step(&[
            "patch",
            "pod",
            "p2",
            "-n",
            NS,
            "--type=merge",
            "-p",
            r#"{"spec":{"activeDeadlineSeconds":600}}"#,
        ]),
        step(&["get", "events", "-n", NS]),
        since(26, &["events", "-n", NS]),
        with_input(&["create", "-f", "-"], CRD),
        step(&[
            "wait",
            "--for=condition=Established",
            "crd/widgets.example.com",
            "--timeout=60s",
        ]),
        step(&["get", "crd", "widgets.example.com", "-o", "json"]),
        with_input(&["create", "-f", "-"], WIDGET),
        with_input(&["create", "-f", "-"], BAD_WIDGET),
        step(&["get", "widgets", "-n", NS]),
        step(&["explain", "widget.spec"]),
        step(&["get", "widget", "w1", "-n", NS, "-o", "json"]),
        since(
            24,
            &[
                "patch",
                "widget",
                "w1",
                "-n",
                NS,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"ready":true,"replicas":1}}"#,
            ],
        ),
        step(&["scale", "widget", "w1", "-n", NS, "--replicas=3"]),
        step(&["get", "widget", "w1", "-n", NS, "-o", "json"]),
        step(&["delete", "widget", "w1", "-n", NS, "--wait=false"]),
        step(&["get", "widget", "w1", "-n", NS, "-o", "json"]),
        step(&[
            "patch",
            "widget",
            "w1",
            "-n",
            NS,
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ]),
        step(&["get", "widget", "w1", "-n", NS]),
        with_input(&["create", "-f", "-"], PLAIN_WIDGET),
        step(&["delete", "widget", "w3", "-n", NS]),
        step(&["delete", "configmap", "cm1", "-n", NS]),
        step(&["get", "configmap", "cm1", "-n", NS]),
        step(&["delete", "crd", "widgets.example.com"]),
        with_input(&["create", "-f", "-"], POLICY),
        step(&["get", "validatingadmissionpolicies"]),
        step(&["get", "validatingadmissionpolicybindings", "-o", "wide"]),
        step(&[
            "get",
            "validatingadmissionpolicy",
            "diff-policy",
            "-o",
            "json",
        ]),
        with_input(&["create", "-f", "-"], BAD_POLICY),
        step(&["delete", "validatingadmissionpolicybinding", "diff-binding"]),
        step(&["delete", "validatingadmissionpolicy", "diff-policy"]),
        step(&["delete", "namespace", NS, "--wait=false"]),
    ]
}

/// A `ValidatingAdmissionPolicy` and its binding (served, defaulted, printed; it
/// matches nothing the scenarios write).
const POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: diff-policy}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
    objectSelector: {matchLabels: {policy-demo: 'yes'}}
  validations:
  - {expression: 'object.metadata.name.size() < 10', message: short names only}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: diff-binding}
spec:
  policyName: diff-policy
  validationActions: [Deny]
  paramRef: {name: limits, namespace: diff, parameterNotFoundAction: Allow}
";

/// A policy kube refuses (unsupported failure policy, no validations).
const BAD_POLICY: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: diff-bad}
spec:
  failurePolicy: Sometimes
  matchConstraints:
    resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
";

/// The minor version of the kubectl at `bin`.
pub async fn kubectl_minor(bin: &Path) -> anyhow::Result<u32> {
    let out = Command::new(bin)
        .args(["version", "--client", "-o", "json"])
        .output()
        .await
        .with_context(|| format!("running {}", bin.display()))?;
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let minor = v["clientVersion"]["minor"]
        .as_str()
        .context("kubectl version has no minor")?;
    Ok(minor.trim_end_matches('+').parse()?)
}

/// Run the scenarios with the kubectl at `bin` against a fresh embedded
/// server, recording into `dir/kubectl-1.MINOR.jsonl`; returns that path.
/// Commands that fail are said on stderr (some are meant to: a CR over
/// its schema's maximum, a get after a delete).
pub async fn record(bin: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let minor = kubectl_minor(bin).await?;
    let file = dir.join(format!("kubectl-1.{minor}.jsonl"));
    let cluster = Cluster::start_recorded(Backend::Embedded, Some(file.clone())).await;
    let cache = tempfile::tempdir()?;
    let mut previous = String::new();
    for step in steps().into_iter().filter(|s| s.since <= minor) {
        let stdin = match step.input {
            Input::None => String::new(),
            Input::Text(text) => text.to_string(),
            Input::FromPrevious(make) => make(&previous),
        };
        let mut child = Command::new(bin)
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig())
            .arg("--cache-dir")
            .arg(cache.path())
            .args(step.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut input = child.stdin.take().context("kubectl stdin")?;
        input.write_all(stdin.as_bytes()).await?;
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
            .await
            .context("kubectl did not finish in 90 s")??;
        if !out.status.success() {
            eprintln!(
                "kubectl 1.{minor} {}: {}",
                step.args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        previous = String::from_utf8_lossy(&out.stdout).into_owned();
    }
    cluster.shutdown().await;
    Ok(file)
}
