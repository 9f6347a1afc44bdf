package main

import (
	"encoding/json"
	"strings"
	"testing"

	gantry "gantry.dev/go-sdk"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func parent(spec string) string {
	return `{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","metadata":{"name":"mc","namespace":"default"},"spec":` + spec + `}`
}

func TestWantsADeploymentWithSizeReplicas(t *testing.T) {
	resp, err := Memcached{}.Reconcile(gantry.NewRequest(parent(`{"size":3}`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Children()) != 1 {
		t.Fatalf("%d children", len(resp.Children()))
	}
	var d struct {
		Kind string
		Spec struct{ Replicas int }
	}
	if err := json.Unmarshal(resp.Children()[0], &d); err != nil || d.Kind != "Deployment" || d.Spec.Replicas != 3 {
		t.Fatalf("child %s (%v)", resp.Children()[0], err)
	}
	if strings.Contains(string(resp.Children()[0]), `"status"`) {
		t.Fatalf("an empty status is sent: %s", resp.Children()[0])
	}
	if c := resp.Conditions()[0]; c.Status != metav1.ConditionFalse || c.Message != "0/3 replicas ready" {
		t.Fatalf("condition %+v", c)
	}
}

func TestSerdeMessages(t *testing.T) {
	for spec, want := range map[string]string{
		`{"size":"3"}`:        `invalid spec: invalid type: string "3", expected i32`,
		`{"size":3000000000}`: "invalid spec: invalid value: integer `3000000000`, expected i32",
		`"big"`:               `invalid spec: invalid type: string "big", expected struct MemcachedSpec`,
		`{"size":11}`:         "spec.size must be between 1 and 10, got 11",
	} {
		_, err := Memcached{}.Reconcile(gantry.NewRequest(parent(spec)))
		if err == nil || err.Error() != want {
			t.Errorf("spec %s: got %v, want %s", spec, err, want)
		}
	}
	if err := (Memcached{}).ValidateConfig(json.RawMessage(`{"image":"x","replicas":2}`)); err == nil ||
		err.Error() != "invalid config: unknown field `replicas`, expected `image`" {
		t.Errorf("validate-config: %v", err)
	}
	if err := (Memcached{}).ValidateConfig(json.RawMessage(`{"image":" \t"}`)); err == nil {
		t.Error("a blank image is accepted")
	}
}
