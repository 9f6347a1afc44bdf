package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// DefaultMemcachedImage is the image used unless --memcached-image names
// another (the plugin's default, when its binding's config names none).
const DefaultMemcachedImage = "memcached:1.6.26-alpine"

// MemcachedManager is the field manager of the memcached reconciler's
// applies; its status applies use MemcachedManager + "-status".
const MemcachedManager = "controller-runtime-peer/memcached"

var memcachedGVK = MemcachedGroupVersion.WithKind("Memcached")

// MemcachedReconciler is the kubebuilder tutorial's Memcached operator,
// doing what plugins/memcached does under Gantry's host: a Deployment of
// spec.size memcached replicas, and a status with the ready replicas and
// an Available condition.
//
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
type MemcachedReconciler struct {
	client.Client
	// Reader reads from the API server, bypassing the cache.
	Reader client.Reader
	// Recorder publishes Events on parents.
	Recorder events.EventRecorder
	// Image is memcached's container image.
	Image string
	// Resync is how long after a successful reconcile a parent is
	// reconciled again with nothing changed.
	Resync time.Duration
}

// MemcachedSize is spec.size, 1 when absent.
func MemcachedSize(m *Memcached) int32 {
	if m.Spec.Size == nil {
		return 1
	}
	return *m.Spec.Size
}

// MemcachedPort is spec.containerPort, 11211 when absent.
func MemcachedPort(m *Memcached) int32 {
	if m.Spec.ContainerPort == nil {
		return 11211
	}
	return *m.Spec.ContainerPort
}

// ValidateMemcached refuses a size outside 1 to 10 (the CRD refuses it
// too); a retry cannot fix that.
func ValidateMemcached(m *Memcached) *ReconcileError {
	if size := MemcachedSize(m); size < 1 || size > 10 {
		return &ReconcileError{Reason: "InvalidSpec", Retryable: false,
			Err: fmt.Errorf("spec.size must be between 1 and 10, got %d", size)}
	}
	return nil
}

// DesiredDeployment is the Deployment parent wants: the plugin's
// Deployment, plus the peer's label and the controller reference.
func DesiredDeployment(parent *Memcached, image string) *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{
		"app.kubernetes.io/name":     "memcached",
		"app.kubernetes.io/instance": parent.Name,
	}
	metaLabels := map[string]string{PeerLabel: PeerLabelValue}
	for k, v := range labels {
		metaLabels[k] = v
	}
	container := corev1ac.Container().
		WithName("memcached").
		WithImage(image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithCommand("memcached", "--memory-limit=64", "-o", "modern", "-v").
		WithPorts(corev1ac.ContainerPort().
			WithContainerPort(MemcachedPort(parent)).
			WithName("memcached").
			WithProtocol(corev1.ProtocolTCP)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(1001).
			WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	return appsv1ac.Deployment(parent.Name, parent.Namespace).
		WithLabels(metaLabels).
		WithOwnerReferences(OwnerReference(parent, memcachedGVK)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(MemcachedSize(parent)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(labels).
				WithSpec(corev1ac.PodSpec().
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithSeccompProfile(corev1ac.SeccompProfile().
							WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(container))))
}

// MemcachedStatusFor is the status of parent after a successful reconcile
// that observed the Deployment observed (nil when there was none).
func MemcachedStatusFor(parent *Memcached, observed *appsv1.Deployment, now time.Time) MemcachedStatus {
	var ready int32
	if observed != nil {
		ready = observed.Status.ReadyReplicas
	}
	size := MemcachedSize(parent)
	available := metav1.Condition{
		Type:    "Available",
		Status:  metav1.ConditionFalse,
		Reason:  "Scaling",
		Message: fmt.Sprintf("%d/%d replicas ready", ready, size),
	}
	if ready >= size {
		available.Status = metav1.ConditionTrue
		available.Reason = "DeploymentReady"
	}
	return MemcachedStatus{
		ReadyReplicas:      ready,
		ObservedGeneration: parent.Generation,
		Conditions: MergeConditions(parent.Status.Conditions,
			WithHostConditions([]metav1.Condition{available}, Synced()), parent.Generation, metaTime(now)),
	}
}

// MemcachedFailedStatus is the status of parent after a failed reconcile:
// readyReplicas and observedGeneration stay, Synced and Ready turn False,
// Available is no longer reported.
func MemcachedFailedStatus(parent *Memcached, rerr *ReconcileError, now time.Time) MemcachedStatus {
	var status MemcachedStatus
	parent.Status.DeepCopyInto(&status)
	status.Conditions = MergeConditions(parent.Status.Conditions,
		WithHostConditions(nil, NotSynced(rerr.Reason, rerr.Error())), parent.Generation, metaTime(now))
	return status
}

// ScalingMessage is the note of the Normal `Scaling` Event, when the
// observed Deployment's replicas differ from spec.size.
func ScalingMessage(parent *Memcached, observed *appsv1.Deployment) (string, bool) {
	if observed == nil || observed.Spec.Replicas == nil || *observed.Spec.Replicas == MemcachedSize(parent) {
		return "", false
	}
	return fmt.Sprintf("scaling memcached from %d to %d replicas", *observed.Spec.Replicas, MemcachedSize(parent)), true
}

// SetupWithManager registers the controller: For Memcached, Owns
// Deployment, concurrency reconciles at once, the index of Deployments by
// controller.
func (r *MemcachedReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &appsv1.Deployment{}, ControllerUIDField, IndexByControllerUID); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("memcached").
		For(&Memcached{}).
		Owns(&appsv1.Deployment{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(r)
}

// Reconcile brings one Memcached's Deployment and status to what it wants.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var parent Memcached
	if err := r.Get(ctx, req.NamespacedName, &parent); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !parent.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if rerr := ValidateMemcached(&parent); rerr != nil {
		return r.fail(ctx, &parent, rerr)
	}
	var list appsv1.DeploymentList
	if err := r.List(ctx, &list, client.InNamespace(parent.Namespace),
		client.MatchingFields{ControllerUIDField: string(parent.UID)}); err != nil {
		return r.fail(ctx, &parent, apiError(err))
	}
	observed := ourChildren(list.Items, parent.UID)
	var current *appsv1.Deployment
	for _, obj := range observed {
		if obj.GetName() == parent.Name {
			current = obj.(*appsv1.Deployment)
		}
	}
	status := MemcachedStatusFor(&parent, current, time.Now())

	writer := childWriter{client: r.Client, reader: r.Reader, manager: MemcachedManager}
	intent := DesiredDeployment(&parent, r.Image)
	child := Child{
		Kind:   "Deployment",
		Key:    client.ObjectKeyFromObject(&parent),
		Intent: intent,
		New:    func() client.Object { return &appsv1.Deployment{} },
		Shows: func(live client.Object) bool {
			shows, err := ObjectReflects(live, intent)
			return err == nil && shows
		},
	}
	if _, err := writer.apply(ctx, parent.UID, child); err != nil {
		return r.fail(ctx, &parent, asReconcileError(err))
	}
	if _, err := writer.prune(ctx, observed, map[string]bool{parent.Name: true}); err != nil {
		return r.fail(ctx, &parent, asReconcileError(err))
	}
	if message, ok := ScalingMessage(&parent, current); ok {
		r.Recorder.Eventf(&parent, nil, corev1.EventTypeNormal, "Scaling", "Reconcile", "%s", message)
	}

	statuses := statusWriter{client: r.Client, manager: MemcachedManager + "-status"}
	if _, err := statuses.write(ctx, &parent, memcachedGVK, &parent.Status, &status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// fail records rerr on the parent and returns what the workqueue should do.
func (r *MemcachedReconciler) fail(ctx context.Context, parent *Memcached, rerr *ReconcileError) (ctrl.Result, error) {
	status := MemcachedFailedStatus(parent, rerr, time.Now())
	statuses := statusWriter{client: r.Client, manager: MemcachedManager + "-status"}
	if _, err := statuses.write(ctx, parent, memcachedGVK, &parent.Status, &status); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "could not record the failure in status")
	}
	return failed(r.Recorder, parent, rerr, r.Resync)
}
