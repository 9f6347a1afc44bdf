package gantry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/go-sdk/http"
)

const parent = `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t","namespace":"ns","generation":4}}`

func TestRequestDefaultsAndDecoding(t *testing.T) {
	req := NewRequest(parent)
	var spec struct{ Size int }
	if err := req.Spec(&spec); err != nil {
		t.Fatalf("a missing spec reads as {}: %v", err)
	}
	var config struct{ Image string }
	if err := req.Config(&config); err != nil {
		t.Fatalf("no config reads as {}: %v", err)
	}
	if name, err := req.ParentName(); name != "t" || err != nil {
		t.Fatalf("name %q, %v", name, err)
	}
	if req.ParentNamespace() != "ns" || req.ParentGeneration() != 4 {
		t.Fatal("namespace or generation")
	}
	err := NewRequest(`{"spec":{"size":"x"}}`).Spec(&spec)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonInvalidInput || !strings.HasPrefix(e.Message, "invalid spec: ") {
		t.Fatalf("got %v", err)
	}
	if _, err := NewRequest(`{"metadata":{}}`).ParentName(); err == nil || err.Error() != "parent has no metadata.name" {
		t.Fatalf("got %v", err)
	}
}

func TestObservedNamed(t *testing.T) {
	req := NewRequest(parent).WithObserved(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"},"status":{"readyReplicas":2}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bad"},"spec":{"replicas":"two"}}`,
	)
	var d appsv1.Deployment
	found, err := req.ObservedNamed("Deployment", "a", &d)
	if !found || err != nil || d.Status.ReadyReplicas != 2 {
		t.Fatalf("found %v, %v, %+v", found, err, d.Status)
	}
	if found, _ := req.ObservedNamed("Deployment", "missing", &d); found {
		t.Fatal("found a missing child")
	}
	_, err = req.ObservedNamed("Deployment", "bad", &d)
	if err == nil || !strings.HasPrefix(err.Error(), "observed Deployment bad does not deserialize: ") {
		t.Fatalf("got %v", err)
	}
	if n := len(req.Observed("Deployment")); n != 2 {
		t.Fatalf("%d Deployments", n)
	}
}

func TestResponseBuilder(t *testing.T) {
	replicas := int32(1)
	d := appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas},
	}
	resp := NewResponse().
		Child(&d).
		Status(map[string]int{"ready": 1}).
		Condition(metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "Up", Message: "m"}).
		Event(corev1.EventTypeWarning, "Slow", "slow").
		RequeueAfter(30 * time.Second)
	if resp.Err() != nil {
		t.Fatal(resp.Err())
	}
	if got := string(resp.Children()[0]); strings.Contains(got, "status") || strings.Contains(got, "creationTimestamp") {
		t.Fatalf("empty fields sent: %s", got)
	}
	if d, ok := resp.Requeue(); !ok || d != 30*time.Second {
		t.Fatal("requeue")
	}
	if e := NewResponse().Child(&corev1.ConfigMap{}).Err(); e == nil || !strings.Contains(e.Error(), "set TypeMeta") {
		t.Fatalf("a child without TypeMeta: %v", e)
	}
	bad := NewResponse().Condition(metav1.Condition{Type: "X", Status: "yes"}).Status("text")
	if e := AsError(bad.Err()); e.Reason != "InvalidCondition" {
		t.Fatalf("the first error is kept: %+v", e)
	}
	if NewResponse().Event("Loud", "R", "m").Err() == nil {
		t.Fatal("an event type other than Normal or Warning")
	}
}

func TestErrorsMapToPluginErrors(t *testing.T) {
	wrapped := fmt.Errorf("reading the spec: %w", Retryable("Busy", "try later"))
	if e := AsError(wrapped); e != (Error{Reason: "Busy", Message: "reading the spec: try later", Retryable: true}) {
		t.Fatalf("%+v", e)
	}
	if e := AsError(errors.New("boom")); e != (Error{Reason: ReasonFailed, Message: "boom", Retryable: true}) {
		t.Fatalf("%+v", e)
	}
}

func TestCallRunsTheRegisteredReconciler(t *testing.T) {
	defer Register(nil)
	if _, e := Call(NewRequest(parent)); e == nil || e.Reason != "NotRegistered" {
		t.Fatalf("nothing registered: %+v", e)
	}
	Register(ReconcilerFunc(func(req *Request) (*Response, error) {
		if req.Finalizing() {
			return NewResponse().Finalized(), nil
		}
		return NewResponse().Child(&corev1.ConfigMap{}), nil // no TypeMeta
	}))
	if resp, e := Call(NewRequest(parent).WithFinalizing()); e != nil || !resp.IsFinalized() {
		t.Fatalf("%+v", e)
	}
	if _, e := Call(NewRequest(parent)); e == nil || e.Reason != "SerializeFailed" || e.Retryable {
		t.Fatalf("a builder error fails the call: %+v", e)
	}
	if err := CallValidateConfig(json.RawMessage(`{`)); err == nil {
		t.Fatal("invalid JSON")
	}
}

func TestHTTPErrorsAreReportedAsHttpError(t *testing.T) {
	_, err := http.Get("http://127.0.0.1:1").Send()
	wrapped := fmt.Errorf("listing backups: %w", err)
	want := Error{Reason: "HttpError", Message: "listing backups: HTTP not granted: outbound HTTP is only available in a component"}
	if e := AsError(wrapped); e != want {
		t.Fatalf("got %+v", e)
	}
	timeout := &http.Error{Kind: http.Timeout, Message: "no answer"}
	if e := AsError(timeout); !e.Retryable || e.Reason != "HttpError" {
		t.Fatalf("got %+v", e)
	}
}
