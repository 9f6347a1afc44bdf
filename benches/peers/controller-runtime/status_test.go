package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(t, status, reason string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason}
}

func typesOf(cs []metav1.Condition) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Type
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHostAddsReadyAndSyncedWithoutDuplicates(t *testing.T) {
	// The same cases as host/src/controller/conditions.rs.
	all := WithHostConditions([]metav1.Condition{cond("Available", "True", "A"), cond("Synced", "False", "X")}, Synced())
	if got := typesOf(all); !equalStrings(got, []string{"Available", "Ready", "Synced"}) {
		t.Fatalf("types %v", got)
	}
	if all[2].Status != metav1.ConditionTrue || all[2].Reason != "ReconcileSucceeded" {
		t.Fatalf("own Synced must not replace the host's: %+v", all[2])
	}
	all = WithHostConditions([]metav1.Condition{cond("Ready", "False", "Waiting"), cond("Ready", "True", "Done")}, Synced())
	if got := typesOf(all); !equalStrings(got, []string{"Ready", "Synced"}) || all[0].Reason != "Done" {
		t.Fatalf("own Ready: %v %+v", got, all[0])
	}
	all = WithHostConditions([]metav1.Condition{cond("A", "True", "First"), cond("B", "True", "B"), cond("A", "True", "Second")}, Synced())
	if got := typesOf(all); !equalStrings(got, []string{"B", "A", "Ready", "Synced"}) || all[1].Reason != "Second" {
		t.Fatalf("last of a type wins in its place: %v %+v", got, all[1])
	}
}

func TestReadyFollowsTheFirstConditionThatIsNotTrue(t *testing.T) {
	available := metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "Scaling", Message: "0/1 replicas ready"}
	all := WithHostConditions([]metav1.Condition{available}, Synced())
	ready := all[1]
	if ready.Status != metav1.ConditionFalse || ready.Reason != "Scaling" || ready.Message != "Available: 0/1 replicas ready" {
		t.Fatalf("ready %+v", ready)
	}
	all = WithHostConditions([]metav1.Condition{available}, NotSynced("ApplyFailed", "boom"))
	if ready := all[1]; ready.Reason != "ApplyFailed" || ready.Message != "Synced: boom" {
		t.Fatalf("Synced comes first: %+v", ready)
	}
	all = WithHostConditions([]metav1.Condition{cond("X", "Unknown", "Pending")}, Synced())
	if all[1].Status != metav1.ConditionUnknown {
		t.Fatalf("unknown stays unknown: %+v", all[1])
	}
	all = WithHostConditions(nil, Synced())
	if ready := all[0]; ready.Status != metav1.ConditionTrue || ready.Reason != "ReconcileSucceeded" || ready.Message != "desired state applied" {
		t.Fatalf("ready as synced: %+v", ready)
	}
}

func TestTransitionTimeMovesOnlyWhenStatusChanges(t *testing.T) {
	before := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC))
	live := []metav1.Condition{
		{Type: "Available", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: before},
		{Type: "Synced", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: before},
		{Type: "Stale", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: before},
	}
	wanted := []metav1.Condition{
		{Type: "Available", Status: metav1.ConditionTrue, Reason: "Ready", Message: "new message"},
		{Type: "Synced", Status: metav1.ConditionFalse, Reason: "PluginError", Message: "boom"},
		{Type: "Fresh", Status: metav1.ConditionUnknown},
	}
	merged := MergeConditions(live, wanted, 4, now)
	if got := typesOf(merged); !equalStrings(got, []string{"Available", "Synced", "Fresh"}) {
		t.Fatalf("types %v", got)
	}
	if !merged[0].LastTransitionTime.Equal(&before) || merged[0].Message != "new message" {
		t.Fatalf("unchanged status keeps its time: %+v", merged[0])
	}
	if !merged[1].LastTransitionTime.Equal(&now) || !merged[2].LastTransitionTime.Equal(&now) {
		t.Fatalf("changed or new: now: %+v", merged)
	}
	if merged[2].Reason != "Unspecified" {
		t.Fatalf("empty reason: %q", merged[2].Reason)
	}
	for _, c := range merged {
		if c.ObservedGeneration != 4 {
			t.Fatalf("observedGeneration %+v", c)
		}
	}
}

func TestAnUnchangedStatusIsNotWritten(t *testing.T) {
	// No client: a write would panic.
	status := FanoutStatus{Children: 3, ObservedGeneration: 2, Conditions: []metav1.Condition{cond("Synced", "True", "R")}}
	same := *status.DeepCopy()
	wrote, err := statusWriter{}.write(context.Background(), &Fanout{}, fanoutGVK, &status, &same)
	if wrote || err != nil {
		t.Fatalf("wrote %v, err %v", wrote, err)
	}
}

func TestTruncateKeepsRunesWhole(t *testing.T) {
	if got := truncate("héllo", 2); got != "h" {
		t.Fatalf("%q", got)
	}
	if got := truncate("hello", 10); got != "hello" {
		t.Fatalf("%q", got)
	}
}
