package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Conditions as Gantry's host sets them (host/src/controller/conditions.rs):
// the reconciler's own conditions, then Ready unless it set one, then Synced.

const (
	// ConditionReady is True when Synced and every other condition are True.
	ConditionReady = "Ready"
	// ConditionSynced says whether the last reconcile applied the desired state.
	ConditionSynced = "Synced"
)

// Synced is the condition of a reconcile that applied its desired state.
func Synced() metav1.Condition {
	return metav1.Condition{
		Type:    ConditionSynced,
		Status:  metav1.ConditionTrue,
		Reason:  "ReconcileSucceeded",
		Message: "desired state applied",
	}
}

// NotSynced is the condition of a reconcile that failed with reason and message.
func NotSynced(reason, message string) metav1.Condition {
	return metav1.Condition{
		Type:    ConditionSynced,
		Status:  metav1.ConditionFalse,
		Reason:  reason,
		Message: message,
	}
}

// WithHostConditions returns own (each type once, the last of a type
// winning in its place, Synced dropped), then Ready unless own has one, then
// synced. Ready is True when synced and all of own are True; otherwise it
// takes the reason of the first that is not, and "Type: message".
func WithHostConditions(own []metav1.Condition, synced metav1.Condition) []metav1.Condition {
	last := make(map[string]int, len(own))
	for i, c := range own {
		last[c.Type] = i
	}
	all := make([]metav1.Condition, 0, len(own)+2)
	hasReady := false
	for i, c := range own {
		if c.Type == ConditionSynced || last[c.Type] != i {
			continue
		}
		hasReady = hasReady || c.Type == ConditionReady
		all = append(all, c)
	}
	if !hasReady {
		ready := synced
		ready.Type = ConditionReady
		for _, c := range append([]metav1.Condition{synced}, all...) {
			if c.Status == metav1.ConditionTrue {
				continue
			}
			ready.Status = metav1.ConditionFalse
			if c.Status == metav1.ConditionUnknown {
				ready.Status = metav1.ConditionUnknown
			}
			ready.Reason = c.Reason
			ready.Message = c.Type + ": " + c.Message
			break
		}
		all = append(all, ready)
	}
	return append(all, synced)
}

// MergeConditions returns wanted, in its order, as they should stand on a
// parent of generation whose live conditions are live: each carries
// observedGeneration, and keeps the live lastTransitionTime unless its
// status changed (then now), which is what meta.SetStatusCondition does.
// Live conditions of other types are not carried over.
func MergeConditions(live, wanted []metav1.Condition, generation int64, now metav1.Time) []metav1.Condition {
	merged := make([]metav1.Condition, 0, len(wanted))
	for _, w := range wanted {
		if previous := meta.FindStatusCondition(live, w.Type); previous != nil &&
			meta.FindStatusCondition(merged, w.Type) == nil {
			merged = append(merged, *previous)
		}
		if w.Reason == "" {
			w.Reason = "Unspecified"
		}
		w.ObservedGeneration = generation
		w.LastTransitionTime = now
		meta.SetStatusCondition(&merged, w)
	}
	return merged
}

// metaTime is t as the API server stores it (whole seconds), so that what
// is compared later is what was written.
func metaTime(t time.Time) metav1.Time {
	return metav1.NewTime(t).Rfc3339Copy()
}

// statusWriter writes a parent's status subresource with server-side apply
// under its own field manager (Gantry: `gantry/<binding>-status`), and only
// when the status it wants differs from the live one, so a reconcile that
// changes nothing sends nothing.
type statusWriter struct {
	client  client.Client
	manager string
}

// write applies desired as the status of parent (of kind gvk) unless it
// equals live; it reports whether it wrote. desired and live are pointers
// to the same status struct.
func (w statusWriter) write(ctx context.Context, parent client.Object, gvk schema.GroupVersionKind, live, desired any) (bool, error) {
	if equality.Semantic.DeepEqual(live, desired) {
		return false, nil
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return false, err
	}
	patch := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	patch.SetGroupVersionKind(gvk)
	patch.SetName(parent.GetName())
	patch.SetNamespace(parent.GetNamespace())
	err = w.client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(patch),
		client.FieldOwner(w.manager), client.ForceOwnership)
	return err == nil, err
}
