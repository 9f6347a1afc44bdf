package gantry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// HostStatus is what the host writes into a parent's status beside the
// plugin's own fields. Embed it in the status type (`json:",inline"`) so
// that a CRD derived from the types keeps these fields: an API server
// prunes fields a structural schema does not name.
type HostStatus struct {
	// ObservedGeneration is the generation of the spec the status was
	// written for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are the plugin's conditions and the host's Synced.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Gantry is written by the host (the plugin version, the last error).
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Gantry *runtime.RawExtension `json:"gantry,omitempty"`
}
