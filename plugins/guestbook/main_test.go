package main

import (
	"encoding/json"
	"testing"

	gantry "gantry.dev/go-sdk"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const parent = `{"apiVersion":"webapp.example.com/v1","kind":"Guestbook",
	"metadata":{"name":"gb","namespace":"default"},"spec":{"frontend":{"replicas":2},"redis":{"followerReplicas":1}}}`

func observed(name string, ready int) string {
	return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"` + name + `","namespace":"default"},
		"spec":{"replicas":1},"status":{"readyReplicas":` + string(rune('0'+ready)) + `}}`
}

func TestRendersThreeTiersOfDeploymentAndService(t *testing.T) {
	resp, err := Guestbook{}.Reconcile(gantry.NewRequest(parent))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, raw := range resp.Children() {
		var c struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Kind+"/"+c.Metadata.Name)
	}
	want := []string{"Deployment/gb-frontend", "Service/gb-frontend", "Deployment/gb-redis-leader",
		"Service/gb-redis-leader", "Deployment/gb-redis-follower", "Service/gb-redis-follower"}
	if len(names) != len(want) {
		t.Fatalf("children %v", names)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("children %v, want %v", names, want)
		}
	}
	for _, c := range resp.Conditions() {
		if c.Status != metav1.ConditionFalse {
			t.Fatalf("nothing is ready yet, but %+v", c)
		}
	}
}

func TestStatusCountsReadyReplicasPerTier(t *testing.T) {
	req := gantry.NewRequest(parent).WithObserved(
		observed("gb-frontend", 2), observed("gb-redis-leader", 1), observed("gb-redis-follower", 0))
	resp, err := Guestbook{}.Reconcile(req)
	if err != nil {
		t.Fatal(err)
	}
	var status Status
	if err := json.Unmarshal(resp.StatusJSON(), &status); err != nil {
		t.Fatal(err)
	}
	if status.Frontend != (TierStatus{2, 2}) || status.RedisLeader != (TierStatus{1, 1}) || status.RedisFollower != (TierStatus{1, 0}) {
		t.Fatalf("status %+v", status)
	}
	got := map[string]metav1.ConditionStatus{}
	for _, c := range resp.Conditions() {
		got[c.Type] = c.Status
	}
	if got["FrontendReady"] != "True" || got["RedisLeaderReady"] != "True" || got["RedisFollowersReady"] != "False" {
		t.Fatalf("conditions %v", got)
	}
}

func TestRefusesReplicasOutOfRange(t *testing.T) {
	req := gantry.NewRequest(`{"apiVersion":"webapp.example.com/v1","kind":"Guestbook","metadata":{"name":"gb"},"spec":{"frontend":{"replicas":0}}}`)
	_, err := Guestbook{}.Reconcile(req)
	if e := gantry.AsError(err); e.Reason != "InvalidSpec" || e.Retryable {
		t.Fatalf("got %+v", e)
	}
}
