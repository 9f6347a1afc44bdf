package main

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// PeerLabel marks every child the peer applies, as Gantry's host marks
	// its children with `gantry.dev/binding`. The child caches are
	// restricted to objects carrying it.
	PeerLabel = "bench.gantry.dev/peer"
	// PeerLabelValue is the value of PeerLabel.
	PeerLabelValue = "controller-runtime"
	// ControllerUIDField is the cache index of children by the UID of
	// their controller owner: the kubebuilder tutorial's owner index, keyed
	// by UID as Gantry's OwnerIndex is.
	ControllerUIDField = ".metadata.controllerUID"
)

// IndexByControllerUID is the indexer behind ControllerUIDField.
func IndexByControllerUID(obj client.Object) []string {
	owner := metav1.GetControllerOf(obj)
	if owner == nil {
		return nil
	}
	return []string{string(owner.UID)}
}

// ControlledBy reports whether obj's controller owner has uid.
func ControlledBy(obj metav1.Object, uid types.UID) bool {
	owner := metav1.GetControllerOfNoCopy(obj)
	return owner != nil && owner.UID == uid
}

// IsOurChild reports whether obj carries the peer's label and is
// controlled by the parent with uid (Gantry's `is_our_child`).
func IsOurChild(obj metav1.Object, uid types.UID) bool {
	return obj.GetLabels()[PeerLabel] == PeerLabelValue && ControlledBy(obj, uid)
}

// OwnerReference is the controller owner reference a child of parent
// carries, as Gantry's host sets it.
func OwnerReference(parent metav1.Object, gvk schema.GroupVersionKind) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).
		WithKind(gvk.Kind).
		WithName(parent.GetName()).
		WithUID(parent.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}

// ShowsOwnerReference reports whether refs is exactly the one controller
// reference want (Gantry compares the list element by element).
func ShowsOwnerReference(refs []metav1.OwnerReference, want *metav1ac.OwnerReferenceApplyConfiguration) bool {
	if len(refs) != 1 {
		return false
	}
	r := refs[0]
	return r.APIVersion == *want.APIVersion && r.Kind == *want.Kind && r.Name == *want.Name &&
		r.UID == *want.UID && r.Controller != nil && *r.Controller == *want.Controller &&
		r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion == *want.BlockOwnerDeletion
}

// ReconcileError is why a reconcile failed: a reason for Synced=False and
// the Warning Event, and whether a retry may help (else the parent waits
// for its resync or a change).
type ReconcileError struct {
	// Reason is CamelCase, as in Gantry: ApiError, ApplyFailed, ChildNotOwned, InvalidSpec.
	Reason string
	// Retryable is false when only a change (or the resync) can help.
	Retryable bool
	// Err is what went wrong.
	Err error
}

// Error is the message of Synced=False and of the Warning Event.
func (e *ReconcileError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ReconcileError) Unwrap() error { return e.Err }

// apiError wraps a failed API call that is not an apply.
func apiError(err error) *ReconcileError {
	return &ReconcileError{Reason: "ApiError", Retryable: true, Err: fmt.Errorf("API request failed: %w", err)}
}

// asReconcileError returns err as a *ReconcileError, wrapping it as an
// API error if it is not one.
func asReconcileError(err error) *ReconcileError {
	var rerr *ReconcileError
	if errors.As(err, &rerr) {
		return rerr
	}
	return apiError(err)
}

// Child is one desired child: its intent for server-side apply and how to
// tell whether a live object already shows it.
type Child struct {
	// Kind names the child's kind in messages.
	Kind string
	// Key is its namespace and name.
	Key client.ObjectKey
	// Intent is what is applied.
	Intent runtime.ApplyConfiguration
	// New returns an empty object of the child's kind.
	New func() client.Object
	// Shows reports whether a live object shows everything in Intent.
	Shows func(live client.Object) bool
}

func (c Child) display() string {
	return fmt.Sprintf("%s %s/%s", c.Kind, c.Key.Namespace, c.Key.Name)
}

// childWriter applies and prunes children, with the same decisions as
// Gantry's host (host/src/controller/apply.rs), minus its in-memory ledger:
// a child whose cached copy already shows the intent is not written.
type childWriter struct {
	// client reads from the label-filtered cache and writes to the API server.
	client client.Client
	// reader reads from the API server, for children missing in the cache.
	reader client.Reader
	// manager is the field manager of applies (Gantry: `gantry/<binding>`).
	manager string
}

// apply applies child for the parent with uid unless its cached copy
// already shows it; it reports whether it wrote.
func (w childWriter) apply(ctx context.Context, uid types.UID, child Child) (bool, error) {
	cached := child.New()
	err := w.client.Get(ctx, child.Key, cached)
	switch {
	case err == nil:
		if !IsOurChild(cached, uid) {
			return false, notOurs(child, cached)
		}
		if child.Shows(cached) {
			return false, nil
		}
	case apierrors.IsNotFound(err):
		// Not in the label-filtered cache: it may still exist without the
		// label, and then it is not ours to change.
		existing := child.New()
		err := w.reader.Get(ctx, child.Key, existing)
		switch {
		case err == nil:
			if !ControlledBy(existing, uid) {
				return false, notOurs(child, existing)
			}
		case !apierrors.IsNotFound(err):
			return false, apiError(err)
		}
	default:
		return false, apiError(err)
	}
	if err := w.client.Apply(ctx, child.Intent, client.FieldOwner(w.manager), client.ForceOwnership); err != nil {
		return false, &ReconcileError{Reason: "ApplyFailed", Retryable: true,
			Err: fmt.Errorf("applying %s: %w", child.display(), err)}
	}
	return true, nil
}

func notOurs(child Child, live client.Object) error {
	owner := "nobody"
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
		owner = ref.Kind + " " + ref.Name
	}
	return &ReconcileError{Reason: "ChildNotOwned", Retryable: false,
		Err: fmt.Errorf("%s exists and is controlled by %s, not by this parent", child.display(), owner)}
}

// prune deletes the observed children that are not wanted (by name) and
// not already going, with a UID precondition and background propagation;
// one gone already or replaced meanwhile is skipped. It returns how many it
// deleted.
func (w childWriter) prune(ctx context.Context, observed []client.Object, wanted map[string]bool) (int, error) {
	pruned := 0
	for _, obj := range observed {
		if wanted[obj.GetName()] || obj.GetDeletionTimestamp() != nil {
			continue
		}
		uid := obj.GetUID()
		err := w.client.Delete(ctx, obj, client.Preconditions{UID: &uid},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case err == nil:
			pruned++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			return pruned, apiError(err)
		}
	}
	return pruned, nil
}
