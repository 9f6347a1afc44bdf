package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The two parent kinds, written by hand the way controller-gen would
// generate them from kubebuilder markers. The schemas they must agree with
// are plugins/fanout/crd.yaml and plugins/memcached/crd.yaml.

// FanoutGroupVersion is the group and version of the benchmark's parent kind.
var FanoutGroupVersion = schema.GroupVersion{Group: "bench.gantry.dev", Version: "v1"}

// MemcachedGroupVersion is the group and version of the kubebuilder
// tutorial's Memcached kind.
var MemcachedGroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

// Fanout is the parent of `gantry bench converge`: it wants K ConfigMaps
// holding its spec.value.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Fanout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FanoutSpec   `json:"spec,omitempty"`
	Status FanoutStatus `json:"status,omitempty"`
}

// FanoutSpec is what a Fanout asks for.
type FanoutSpec struct {
	// Value is copied into every child ConfigMap as data.value.
	Value string `json:"value,omitempty"`
}

// FanoutStatus is what the peer reports on a Fanout. The CRD preserves
// unknown status fields, so Gantry's own `status.gantry` may sit beside
// these on a parent Gantry reconciled before; the peer neither writes nor
// compares it.
type FanoutStatus struct {
	// Children is the number of child ConfigMaps observed in the cache
	// when the reconcile began (the plugin's `status.children`).
	Children int64 `json:"children"`
	// ObservedGeneration is the generation the last successful reconcile acted on.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Conditions are Ready and Synced, as Gantry's host writes them.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FanoutList is a list of Fanouts.
//
// +kubebuilder:object:root=true
type FanoutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Fanout `json:"items"`
}

// Memcached is the kubebuilder tutorial's custom resource.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedSpec is what a Memcached asks for. Absent fields take the
// defaults of the CRD (and of Gantry's plugin): size 1, port 11211.
type MemcachedSpec struct {
	// Size is the number of memcached replicas, 1 to 10.
	Size *int32 `json:"size,omitempty"`
	// ContainerPort is the port memcached listens on.
	ContainerPort *int32 `json:"containerPort,omitempty"`
}

// MemcachedStatus is what the peer reports on a Memcached.
type MemcachedStatus struct {
	// ReadyReplicas are the ready replicas of the observed Deployment.
	ReadyReplicas int32 `json:"readyReplicas"`
	// ObservedGeneration is the generation the last successful reconcile acted on.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Conditions are Available, Ready and Synced.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemcachedList is a list of Memcacheds.
//
// +kubebuilder:object:root=true
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}

// DefaultFanoutKind is the kind Fanout parents are served as, unless
// --fanout-kind names another CRD of the same schema (`gantry bench
// density` serves it under one kind per operator).
const DefaultFanoutKind = "Fanout"

// AddToScheme registers both kinds and their lists with a scheme, the
// Fanout type under fanoutKind (and fanoutKind + "List").
func AddToScheme(scheme *runtime.Scheme, fanoutKind string) error {
	scheme.AddKnownTypeWithName(FanoutGroupVersion.WithKind(fanoutKind), &Fanout{})
	scheme.AddKnownTypeWithName(FanoutGroupVersion.WithKind(fanoutKind+"List"), &FanoutList{})
	metav1.AddToGroupVersion(scheme, FanoutGroupVersion)
	scheme.AddKnownTypes(MemcachedGroupVersion, &Memcached{}, &MemcachedList{})
	metav1.AddToGroupVersion(scheme, MemcachedGroupVersion)
	return nil
}

// Deep copies, as controller-gen's zz_generated.deepcopy.go would have them.

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *FanoutStatus) DeepCopyInto(out *FanoutStatus) {
	*out = *in
	out.Conditions = copyConditions(in.Conditions)
}

// DeepCopy returns a deep copy of the receiver.
func (in *FanoutStatus) DeepCopy() *FanoutStatus {
	out := new(FanoutStatus)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *Fanout) DeepCopyInto(out *Fanout) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec = in.Spec
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of the receiver.
func (in *Fanout) DeepCopy() *Fanout {
	if in == nil {
		return nil
	}
	out := new(Fanout)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Fanout) DeepCopyObject() runtime.Object {
	return in.DeepCopy()
}

// DeepCopyObject implements runtime.Object.
func (in *FanoutList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(FanoutList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Fanout, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyInto copies the receiver into out.
func (in *MemcachedSpec) DeepCopyInto(out *MemcachedSpec) {
	*out = *in
	if in.Size != nil {
		size := *in.Size
		out.Size = &size
	}
	if in.ContainerPort != nil {
		port := *in.ContainerPort
		out.ContainerPort = &port
	}
}

// DeepCopyInto copies the receiver into out.
func (in *MemcachedStatus) DeepCopyInto(out *MemcachedStatus) {
	*out = *in
	out.Conditions = copyConditions(in.Conditions)
}

// DeepCopyInto copies the receiver into out.
func (in *Memcached) DeepCopyInto(out *Memcached) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of the receiver.
func (in *Memcached) DeepCopy() *Memcached {
	if in == nil {
		return nil
	}
	out := new(Memcached)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Memcached) DeepCopyObject() runtime.Object {
	return in.DeepCopy()
}

// DeepCopyObject implements runtime.Object.
func (in *MemcachedList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(MemcachedList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Memcached, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}
