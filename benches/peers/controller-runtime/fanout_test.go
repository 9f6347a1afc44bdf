package main

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func fanout(value string) *Fanout {
	return &Fanout{
		TypeMeta:   metav1.TypeMeta{APIVersion: "bench.gantry.dev/v1", Kind: "Fanout"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p", Generation: 2},
		Spec:       FanoutSpec{Value: value},
	}
}

func TestOneConfigMapPerChildWithTheValue(t *testing.T) {
	children := DesiredConfigMaps(fanout("v1"), fanoutGVK, 2)
	if len(children) != 2 || *children[0].Name != "p-0" || *children[1].Name != "p-1" {
		t.Fatalf("names: %v", children)
	}
	for _, c := range children {
		if c.Data["value"] != "v1" || len(c.Data) != 1 {
			t.Fatalf("data %v", c.Data)
		}
		if *c.Namespace != "default" || c.Labels[PeerLabel] != PeerLabelValue {
			t.Fatalf("namespace or label: %v %v", *c.Namespace, c.Labels)
		}
		owner := c.OwnerReferences
		if len(owner) != 1 || *owner[0].UID != "uid-p" || *owner[0].Kind != "Fanout" ||
			*owner[0].APIVersion != "bench.gantry.dev/v1" || !*owner[0].Controller || !*owner[0].BlockOwnerDeletion {
			t.Fatalf("owner %+v", owner)
		}
	}
	if got := DesiredConfigMaps(fanout("v1"), fanoutGVK, 0); len(got) != 0 {
		t.Fatalf("k=0: %v", got)
	}
	// What goes over the wire: the same object the plugin asks for, plus
	// the label and the owner reference the host adds.
	data, _ := json.Marshal(DesiredConfigMaps(fanout(""), fanoutGVK, 1)[0])
	want := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"p-0","namespace":"default","labels":{"bench.gantry.dev/peer":"controller-runtime"},` +
		`"ownerReferences":[{"apiVersion":"bench.gantry.dev/v1","kind":"Fanout","name":"p","uid":"uid-p","controller":true,"blockOwnerDeletion":true}]},"data":{"value":""}}`
	if string(data) != want {
		t.Fatalf("intent\n%s\nwant\n%s", data, want)
	}
}

func liveConfigMap(intent any) *corev1.ConfigMap {
	data, _ := json.Marshal(intent)
	var cm corev1.ConfigMap
	_ = json.Unmarshal(data, &cm)
	cm.ResourceVersion = "7"
	cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: FanoutManager}}
	return &cm
}

func TestALiveConfigMapShowsItsIntentUntilSomethingDrifts(t *testing.T) {
	intent := DesiredConfigMaps(fanout("v1"), fanoutGVK, 1)[0]
	live := liveConfigMap(intent)
	live.Labels["other"] = "x"
	live.Data["extra"] = "y"
	if !ConfigMapShows(live, intent) {
		t.Fatal("extra labels and data must not matter")
	}
	if ok, err := ObjectReflects(live, intent); !ok || err != nil {
		t.Fatalf("the typed check must agree with Gantry's rule: %v %v", ok, err)
	}
	for name, drift := range map[string]func(*corev1.ConfigMap){
		"value": func(cm *corev1.ConfigMap) { cm.Data["value"] = "v2" },
		"label": func(cm *corev1.ConfigMap) { delete(cm.Labels, PeerLabel) },
		"second owner": func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{UID: "x"})
		},
		"not blocking": func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].BlockOwnerDeletion = nil },
		"other uid":    func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].UID = "uid-q" },
	} {
		live := liveConfigMap(intent)
		drift(live)
		if ConfigMapShows(live, intent) {
			t.Errorf("%s: drift not seen", name)
		}
		if ok, _ := ObjectReflects(live, intent); ok {
			t.Errorf("%s: Gantry's rule sees it", name)
		}
	}
}

// stored is obj as the API server would hand it back: through JSON, with
// times in whole seconds.
func stored[T any](t *testing.T, obj T) T {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFanoutStatusCountsObservedChildrenAndIsStableOnResync(t *testing.T) {
	parent := fanout("v1")
	first := FanoutStatusFor(parent, 0, time.Now())
	if first.Children != 0 || first.ObservedGeneration != 2 {
		t.Fatalf("status %+v", first)
	}
	if got := typesOf(first.Conditions); !equalStrings(got, []string{"Ready", "Synced"}) {
		t.Fatalf("conditions %v", got)
	}
	for _, c := range first.Conditions {
		if c.Status != metav1.ConditionTrue || c.ObservedGeneration != 2 {
			t.Fatalf("condition %+v", c)
		}
	}
	// A resync an hour later, with the status as stored: nothing to write.
	parent.Status = stored(t, first)
	again := FanoutStatusFor(parent, 0, time.Now().Add(time.Hour))
	if !equality.Semantic.DeepEqual(&parent.Status, &again) {
		t.Fatalf("a resync would write:\n%+v\n%+v", parent.Status, again)
	}
	// A child appears: only the count changes.
	more := FanoutStatusFor(parent, 1, time.Now().Add(time.Hour))
	if more.Children != 1 || !equality.Semantic.DeepEqual(more.Conditions, parent.Status.Conditions) {
		t.Fatalf("status %+v", more)
	}
}

func TestAFailedFanoutKeepsItsCountAndGeneration(t *testing.T) {
	parent := fanout("v1")
	parent.Status = stored(t, FanoutStatusFor(parent, 3, time.Now()))
	parent.Generation = 3
	failed := FanoutFailedStatus(parent, &ReconcileError{Reason: "ApplyFailed", Err: errString("boom")}, time.Now())
	if failed.Children != 3 || failed.ObservedGeneration != 2 {
		t.Fatalf("status %+v", failed)
	}
	synced := failed.Conditions[1]
	if synced.Type != "Synced" || synced.Status != metav1.ConditionFalse || synced.Reason != "ApplyFailed" || synced.Message != "boom" || synced.ObservedGeneration != 3 {
		t.Fatalf("synced %+v", synced)
	}
	if ready := failed.Conditions[0]; ready.Status != metav1.ConditionFalse || ready.Message != "Synced: boom" {
		t.Fatalf("ready %+v", ready)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// A reconcile loop on controller-runtime's fake client, which implements
// server-side apply: the writes of each pass are counted.
type harness struct {
	client client.Client
	writes atomic.Int64
}

func newHarness(t *testing.T, objects ...client.Object) *harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := AddToScheme(scheme, DefaultFanoutKind); err != nil {
		t.Fatal(err)
	}
	h := &harness{}
	count := func() { h.writes.Add(1) }
	h.client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(objects...).
		WithStatusSubresource(&Fanout{}, &Memcached{}).
		WithIndex(&corev1.ConfigMap{}, ControllerUIDField, IndexByControllerUID).
		WithIndex(&appsv1.Deployment{}, ControllerUIDField, IndexByControllerUID).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				count()
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				count()
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				count()
				return c.Patch(ctx, obj, patch, opts...)
			},
			Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
				count()
				return c.Apply(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				count()
				return c.Delete(ctx, obj, opts...)
			},
			SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
				count()
				return c.SubResource(sub).Apply(ctx, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				count()
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	return h
}

// pass runs one reconcile and returns the writes it made.
func (h *harness) pass(t *testing.T, r interface {
	Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
}, name string) int64 {
	t.Helper()
	before := h.writes.Load()
	result, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "default", Name: name}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if result.RequeueAfter != time.Minute {
		t.Fatalf("result %+v", result)
	}
	return h.writes.Load() - before
}

func TestFanoutConvergesThenAResyncWritesNothing(t *testing.T) {
	parent := fanout("v1")
	h := newHarness(t, parent)
	r := &FanoutReconciler{Client: h.client, Reader: h.client, Recorder: events.NewFakeRecorder(10), ChildrenPerParent: 3, Resync: time.Minute}

	// First pass: three applies and the status (no children observed yet).
	if w := h.pass(t, r, "p"); w != 4 {
		t.Fatalf("first pass wrote %d", w)
	}
	// Second pass: the children are there now; only the count changes.
	if w := h.pass(t, r, "p"); w != 1 {
		t.Fatalf("second pass wrote %d", w)
	}
	var got Fanout
	if err := h.client.Get(context.Background(), client.ObjectKeyFromObject(parent), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Children != 3 || got.Status.ObservedGeneration != 2 {
		t.Fatalf("status %+v", got.Status)
	}
	// A resync: nothing to write.
	if w := h.pass(t, r, "p"); w != 0 {
		t.Fatalf("resync wrote %d", w)
	}

	// A new value: three applies, then nothing.
	got.Spec.Value = "v2"
	if err := h.client.Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	if w := h.pass(t, r, "p"); w != 3 {
		t.Fatalf("spec change wrote %d", w)
	}
	var cm corev1.ConfigMap
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "p-2"}, &cm); err != nil || cm.Data["value"] != "v2" {
		t.Fatalf("p-2: %v %v", cm.Data, err)
	}

	// Fewer children: the extra one is pruned.
	r.ChildrenPerParent = 2
	if w := h.pass(t, r, "p"); w != 1 {
		t.Fatalf("prune pass wrote %d", w)
	}
	if err := h.client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "p-2"}, &cm); err == nil {
		t.Fatal("p-2 must be gone")
	}
	if w := h.pass(t, r, "p"); w != 1 { // the count drops to 2
		t.Fatalf("after prune wrote %d", w)
	}
	if w := h.pass(t, r, "p"); w != 0 {
		t.Fatalf("resync after prune wrote %d", w)
	}
}

func TestAConfigMapOfSomeoneElseIsNotTaken(t *testing.T) {
	parent := fanout("v1")
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p-0", Namespace: "default"}, Data: map[string]string{"mine": "yes"}}
	h := newHarness(t, parent, foreign)
	recorder := events.NewFakeRecorder(10)
	r := &FanoutReconciler{Client: h.client, Reader: h.client, Recorder: recorder, ChildrenPerParent: 1, Resync: time.Minute}
	result, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(parent)})
	if err != nil || result.RequeueAfter != time.Minute {
		t.Fatalf("not retryable: waits for the resync: %+v %v", result, err)
	}
	var got Fanout
	_ = h.client.Get(context.Background(), client.ObjectKeyFromObject(parent), &got)
	synced := got.Status.Conditions[len(got.Status.Conditions)-1]
	if synced.Reason != "ChildNotOwned" || synced.Status != metav1.ConditionFalse {
		t.Fatalf("synced %+v", synced)
	}
	if event := <-recorder.Events; event != "Warning ChildNotOwned ConfigMap default/p-0 exists and is controlled by nobody, not by this parent" {
		t.Fatalf("event %q", event)
	}
	var cm corev1.ConfigMap
	_ = h.client.Get(context.Background(), client.ObjectKeyFromObject(foreign), &cm)
	if cm.Data["mine"] != "yes" || cm.Data["value"] != "" {
		t.Fatalf("changed: %v", cm.Data)
	}
}

func TestFanoutsServedAsAnotherKindOwnTheirChildrenAsThatKind(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme, "Density3"); err != nil {
		t.Fatal(err)
	}
	density := FanoutGroupVersion.WithKind("Density3")
	for obj, want := range map[runtime.Object]string{&Fanout{}: "Density3", &FanoutList{}: "Density3List"} {
		kinds, _, err := scheme.ObjectKinds(obj)
		if err != nil || len(kinds) != 1 || kinds[0] != FanoutGroupVersion.WithKind(want) {
			t.Fatalf("%T: %v %v", obj, kinds, err)
		}
	}
	r := &FanoutReconciler{GVK: density}
	owner := DesiredConfigMaps(fanout("v1"), r.kind(), 1)[0].OwnerReferences
	if len(owner) != 1 || *owner[0].Kind != "Density3" {
		t.Fatalf("owner %+v", owner)
	}
	if (&FanoutReconciler{}).kind() != fanoutGVK {
		t.Fatal("the zero value serves Fanout")
	}
}
