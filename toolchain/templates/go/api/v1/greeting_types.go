// Package v1 holds the parent kind, Greeting (example.com/v1). Its CRD is
// derived from these types and their markers: `gantry plugin crd .` prints
// it (with controller-gen), and `gantry plugin apply .` installs it.
// Validation and defaults in the schema are enforced by the API server,
// before the plugin runs.
//
// +groupName=example.com
package v1

import (
	gantry "gantry.dev/go-sdk"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GreetingSpec is what a Greeting asks for.
type GreetingSpec struct {
	// Who is whom to greet.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Who string `json:"who"`
	// Punctuation ends the message (default "!").
	// +kubebuilder:default="!"
	// +kubebuilder:validation:MaxLength=3
	// +optional
	Punctuation string `json:"punctuation,omitempty"`
}

// GreetingStatus is what the plugin reports, beside what the host writes.
type GreetingStatus struct {
	// Message is the message written into the ConfigMap.
	// +optional
	Message string `json:"message,omitempty"`

	gantry.HostStatus `json:",inline"`
}

// Greeting is the parent kind.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Who",type=string,JSONPath=`.spec.who`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`
type Greeting struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   GreetingSpec   `json:"spec"`
	Status GreetingStatus `json:"status,omitempty"`
}
