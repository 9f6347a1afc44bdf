package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// FanoutReconciler does what plugins/fanout does under Gantry's host: each
// Fanout gets K ConfigMaps `<parent>-<i>` holding its spec.value, and a
// status counting the children observed.
//
// +kubebuilder:rbac:groups=bench.gantry.dev,resources=fanouts,verbs=get;list;watch
// +kubebuilder:rbac:groups=bench.gantry.dev,resources=fanouts/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type FanoutReconciler struct {
	client.Client
	// Reader reads from the API server, bypassing the cache.
	Reader client.Reader
	// Recorder publishes Events on parents.
	Recorder events.EventRecorder
	// ChildrenPerParent is K.
	ChildrenPerParent int
	// Resync is how long after a successful reconcile a parent is
	// reconciled again with nothing changed (Gantry: the binding's
	// resyncSeconds).
	Resync time.Duration
	// GVK is the kind the parents are served as; empty: Fanout.
	GVK schema.GroupVersionKind
}

// FanoutManager is the field manager of the fanout reconciler's applies;
// its status applies use FanoutManager + "-status".
const FanoutManager = "controller-runtime-peer/fanout"

var fanoutGVK = FanoutGroupVersion.WithKind(DefaultFanoutKind)

// kind is the kind the parents are served as.
func (r *FanoutReconciler) kind() schema.GroupVersionKind {
	if r.GVK.Empty() {
		return fanoutGVK
	}
	return r.GVK
}

// DesiredConfigMaps are the children parent (of kind gvk) wants: k
// ConfigMaps named `<parent>-<i>` with data {value: spec.value}, labelled
// and controlled by the parent.
func DesiredConfigMaps(parent *Fanout, gvk schema.GroupVersionKind, k int) []*corev1ac.ConfigMapApplyConfiguration {
	owner := OwnerReference(parent, gvk)
	out := make([]*corev1ac.ConfigMapApplyConfiguration, 0, k)
	for i := range k {
		out = append(out, corev1ac.ConfigMap(fmt.Sprintf("%s-%d", parent.Name, i), parent.Namespace).
			WithLabels(map[string]string{PeerLabel: PeerLabelValue}).
			WithOwnerReferences(owner).
			WithData(map[string]string{"value": parent.Spec.Value}))
	}
	return out
}

// ConfigMapShows reports whether live shows everything in intent: its
// labels and data (extra keys are fine) and exactly its owner reference.
func ConfigMapShows(live *corev1.ConfigMap, intent *corev1ac.ConfigMapApplyConfiguration) bool {
	for k, v := range intent.Labels {
		if have, ok := live.Labels[k]; !ok || have != v {
			return false
		}
	}
	for k, v := range intent.Data {
		if have, ok := live.Data[k]; !ok || have != v {
			return false
		}
	}
	return len(intent.OwnerReferences) == 1 && ShowsOwnerReference(live.OwnerReferences, &intent.OwnerReferences[0])
}

// FanoutStatusFor is the status of parent after a successful reconcile
// that began with observed children.
func FanoutStatusFor(parent *Fanout, observed int, now time.Time) FanoutStatus {
	return FanoutStatus{
		Children:           int64(observed),
		ObservedGeneration: parent.Generation,
		Conditions:         MergeConditions(parent.Status.Conditions, WithHostConditions(nil, Synced()), parent.Generation, metaTime(now)),
	}
}

// FanoutFailedStatus is the status of parent after a failed reconcile: its
// children count and observedGeneration stay, Synced and Ready turn False.
func FanoutFailedStatus(parent *Fanout, rerr *ReconcileError, now time.Time) FanoutStatus {
	status := *parent.Status.DeepCopy()
	status.Conditions = MergeConditions(parent.Status.Conditions,
		WithHostConditions(nil, NotSynced(rerr.Reason, rerr.Error())), parent.Generation, metaTime(now))
	return status
}

// SetupWithManager registers the controller: For Fanout, Owns ConfigMap,
// concurrency reconciles at once, the index of ConfigMaps by controller.
func (r *FanoutReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, ControllerUIDField, IndexByControllerUID); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("fanout").
		For(&Fanout{}).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}

// Reconcile brings one Fanout's children and status to what it wants.
func (r *FanoutReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var parent Fanout
	if err := r.Get(ctx, req.NamespacedName, &parent); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !parent.DeletionTimestamp.IsZero() {
		// No finalizer: garbage collection takes the children.
		return ctrl.Result{}, nil
	}
	observed, err := r.observed(ctx, &parent)
	if err != nil {
		return r.fail(ctx, &parent, apiError(err))
	}
	// Computed before applying, from what the cache shows now, as the
	// plugin computes it from the request's observed children.
	status := FanoutStatusFor(&parent, len(observed), time.Now())

	writer := childWriter{client: r.Client, reader: r.Reader, manager: FanoutManager}
	wanted := make(map[string]bool, r.ChildrenPerParent)
	for _, intent := range DesiredConfigMaps(&parent, r.kind(), r.ChildrenPerParent) {
		wanted[*intent.Name] = true
		child := Child{
			Kind:   "ConfigMap",
			Key:    client.ObjectKey{Namespace: parent.Namespace, Name: *intent.Name},
			Intent: intent,
			New:    func() client.Object { return &corev1.ConfigMap{} },
			Shows:  func(live client.Object) bool { return ConfigMapShows(live.(*corev1.ConfigMap), intent) },
		}
		if _, err := writer.apply(ctx, parent.UID, child); err != nil {
			return r.fail(ctx, &parent, asReconcileError(err))
		}
	}
	if _, err := writer.prune(ctx, observed, wanted); err != nil {
		return r.fail(ctx, &parent, asReconcileError(err))
	}

	statuses := statusWriter{client: r.Client, manager: FanoutManager + "-status"}
	if _, err := statuses.write(ctx, &parent, r.kind(), &parent.Status, &status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// observed are the parent's children in the cache: ConfigMaps with the
// peer's label (the cache holds no others) controlled by the parent.
func (r *FanoutReconciler) observed(ctx context.Context, parent *Fanout) ([]client.Object, error) {
	var list corev1.ConfigMapList
	if err := r.List(ctx, &list, client.InNamespace(parent.Namespace),
		client.MatchingFields{ControllerUIDField: string(parent.UID)}); err != nil {
		return nil, err
	}
	return ourChildren(list.Items, parent.UID), nil
}

// fail records rerr on the parent (Synced=False, a Warning Event) and
// returns it for the workqueue's backoff, or waits for the resync when a
// retry cannot help.
func (r *FanoutReconciler) fail(ctx context.Context, parent *Fanout, rerr *ReconcileError) (ctrl.Result, error) {
	status := FanoutFailedStatus(parent, rerr, time.Now())
	statuses := statusWriter{client: r.Client, manager: FanoutManager + "-status"}
	if _, err := statuses.write(ctx, parent, r.kind(), &parent.Status, &status); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "could not record the failure in status")
	}
	return failed(r.Recorder, parent, rerr, r.Resync)
}

// ourChildren returns the items that are the peer's children of the
// parent with uid, as client.Objects.
func ourChildren[T any, P interface {
	*T
	client.Object
}](items []T, uid types.UID) []client.Object {
	out := make([]client.Object, 0, len(items))
	for i := range items {
		obj := P(&items[i])
		if IsOurChild(obj, uid) {
			out = append(out, obj)
		}
	}
	return out
}
