package main

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func memcached(size int32) *Memcached {
	port := int32(11211)
	return &Memcached{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached"},
		ObjectMeta: metav1.ObjectMeta{Name: "mc", Namespace: "default", UID: "uid-mc", Generation: 2},
		Spec:       MemcachedSpec{Size: &size, ContainerPort: &port},
	}
}

// The Deployment plugins/memcached renders for memcached(3), with the label
// and owner reference the host adds (the peer's label in place of
// gantry.dev/binding).
const wantDeployment = `{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {
    "name": "mc", "namespace": "default",
    "labels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "mc",
               "bench.gantry.dev/peer": "controller-runtime"},
    "ownerReferences": [{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "mc",
                         "uid": "uid-mc", "controller": true, "blockOwnerDeletion": true}]
  },
  "spec": {
    "replicas": 3,
    "selector": {"matchLabels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "mc"}},
    "template": {
      "metadata": {"labels": {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": "mc"}},
      "spec": {
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
          "name": "memcached",
          "image": "memcached:1.6.26-alpine",
          "imagePullPolicy": "IfNotPresent",
          "command": ["memcached", "--memory-limit=64", "-o", "modern", "-v"],
          "ports": [{"containerPort": 11211, "name": "memcached", "protocol": "TCP"}],
          "securityContext": {"runAsNonRoot": true, "runAsUser": 1001, "allowPrivilegeEscalation": false,
                              "capabilities": {"drop": ["ALL"]}}
        }]
      }
    }
  }
}`

func TestTheDeploymentIsThePluginsDeployment(t *testing.T) {
	data, err := json.Marshal(DesiredDeployment(memcached(3), DefaultMemcachedImage))
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	_ = json.Unmarshal(data, &got)
	_ = json.Unmarshal([]byte(wantDeployment), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s", data)
	}
	// Absent size and port take the CRD's (and the plugin's) defaults.
	bare := memcached(1)
	bare.Spec = MemcachedSpec{}
	d := DesiredDeployment(bare, "img")
	if *d.Spec.Replicas != 1 || *d.Spec.Template.Spec.Containers[0].Ports[0].ContainerPort != 11211 || *d.Spec.Template.Spec.Containers[0].Image != "img" {
		t.Fatalf("defaults: %+v", d.Spec)
	}
}

func TestASizeOutOfRangeIsRefusedForGood(t *testing.T) {
	for _, size := range []int32{0, 11} {
		rerr := ValidateMemcached(memcached(size))
		if rerr == nil || rerr.Reason != "InvalidSpec" || rerr.Retryable {
			t.Fatalf("size %d: %+v", size, rerr)
		}
	}
	for _, size := range []int32{1, 10} {
		if rerr := ValidateMemcached(memcached(size)); rerr != nil {
			t.Fatalf("size %d: %v", size, rerr)
		}
	}
}

// live is the intent as a Deployment the API server and the deployment
// controller have been at: defaults and status added.
func live(t *testing.T, parent *Memcached) *appsv1.Deployment {
	data, _ := json.Marshal(DesiredDeployment(parent, DefaultMemcachedImage))
	var d appsv1.Deployment
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	d.TypeMeta = metav1.TypeMeta{}
	d.Spec.RevisionHistoryLimit = new(int32(10))
	d.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	d.Status.Replicas = 3
	return &d
}

func TestALiveDeploymentShowsItsIntentUntilTheSizeChanges(t *testing.T) {
	parent := memcached(3)
	d := live(t, parent)
	if ok, err := ObjectReflects(d, DesiredDeployment(parent, DefaultMemcachedImage)); !ok || err != nil {
		t.Fatalf("defaults must not matter: %v %v", ok, err)
	}
	if ok, _ := ObjectReflects(d, DesiredDeployment(memcached(4), DefaultMemcachedImage)); ok {
		t.Fatal("a new size must be applied")
	}
	if ok, _ := ObjectReflects(d, DesiredDeployment(parent, "memcached:1.6")); ok {
		t.Fatal("a new image must be applied")
	}
}

func TestStatusReportsReadyReplicasAndAvailability(t *testing.T) {
	parent := memcached(2)
	status := MemcachedStatusFor(parent, nil, time.Now())
	if status.ReadyReplicas != 0 || status.ObservedGeneration != 2 {
		t.Fatalf("status %+v", status)
	}
	if got := typesOf(status.Conditions); !equalStrings(got, []string{"Available", "Ready", "Synced"}) {
		t.Fatalf("conditions %v", got)
	}
	available, ready, synced := status.Conditions[0], status.Conditions[1], status.Conditions[2]
	if available.Status != metav1.ConditionFalse || available.Reason != "Scaling" || available.Message != "0/2 replicas ready" {
		t.Fatalf("available %+v", available)
	}
	if ready.Status != metav1.ConditionFalse || ready.Reason != "Scaling" || ready.Message != "Available: 0/2 replicas ready" {
		t.Fatalf("ready %+v", ready)
	}
	if synced.Status != metav1.ConditionTrue {
		t.Fatalf("synced %+v", synced)
	}

	observed := live(t, parent)
	observed.Status.ReadyReplicas = 2
	parent.Status = stored(t, status)
	status = MemcachedStatusFor(parent, observed, time.Now().Add(time.Minute))
	available, ready = status.Conditions[0], status.Conditions[1]
	if status.ReadyReplicas != 2 || available.Status != metav1.ConditionTrue || available.Reason != "DeploymentReady" ||
		available.Message != "2/2 replicas ready" || ready.Status != metav1.ConditionTrue || ready.Reason != "ReconcileSucceeded" {
		t.Fatalf("status %+v", status)
	}
	if available.LastTransitionTime.Equal(&parent.Status.Conditions[0].LastTransitionTime) {
		t.Fatal("Available turned True: its transition time moves")
	}
	if !status.Conditions[2].LastTransitionTime.Equal(&parent.Status.Conditions[2].LastTransitionTime) {
		t.Fatal("Synced stayed True: its transition time stays")
	}
}

func TestAScalingEventWhenTheObservedReplicasDiffer(t *testing.T) {
	parent := memcached(3)
	if _, ok := ScalingMessage(parent, nil); ok {
		t.Fatal("no Deployment observed: no event")
	}
	d := live(t, memcached(1))
	if message, ok := ScalingMessage(parent, d); !ok || message != "scaling memcached from 1 to 3 replicas" {
		t.Fatalf("%q %v", message, ok)
	}
	if _, ok := ScalingMessage(parent, live(t, parent)); ok {
		t.Fatal("same size: no event")
	}
}

func TestMemcachedConvergesThenAResyncWritesNothing(t *testing.T) {
	parent := memcached(1)
	h := newHarness(t, parent)
	recorder := events.NewFakeRecorder(10)
	r := &MemcachedReconciler{Client: h.client, Reader: h.client, Recorder: recorder, Image: DefaultMemcachedImage, Resync: time.Minute}
	if w := h.pass(t, r, "mc"); w != 2 { // the Deployment and the status
		t.Fatalf("first pass wrote %d", w)
	}
	if w := h.pass(t, r, "mc"); w != 0 {
		t.Fatalf("resync wrote %d", w)
	}
	var got Memcached
	_ = h.client.Get(context.Background(), client.ObjectKeyFromObject(parent), &got)
	got.Spec.Size = new(int32(3))
	if err := h.client.Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if w := h.pass(t, r, "mc"); w != 2 { // the Deployment; the status for the new generation
		t.Fatalf("scale pass wrote %d", w)
	}
	if event := <-recorder.Events; event != "Normal Scaling scaling memcached from 1 to 3 replicas" {
		t.Fatalf("event %q", event)
	}
	var d appsv1.Deployment
	_ = h.client.Get(context.Background(), client.ObjectKeyFromObject(parent), &d)
	if *d.Spec.Replicas != 3 {
		t.Fatalf("replicas %d", *d.Spec.Replicas)
	}
	if w := h.pass(t, r, "mc"); w != 0 {
		t.Fatalf("resync wrote %d", w)
	}
}
