// Package policy is the Go SDK for Gantry admission policies: components of
// the `policy` world that accept, reject or mutate one API request, served
// by Gantry's admission webhooks.
//
//	package main
//
//	import (
//		corev1 "k8s.io/api/core/v1"
//		"gantry.dev/go-sdk/policy"
//	)
//
//	type noLatest struct{}
//
//	func (noLatest) Validate(req *policy.Request) policy.Verdict {
//		var pod corev1.Pod
//		if err := req.Object(&pod); err != nil {
//			return policy.Deny(err.Error())
//		}
//		...
//		return policy.Allow()
//	}
//
//	func init() { policy.Register(noLatest{}) }
//
//	func main() {}
//
// A plugin imports this package, the reconciler SDK (gantry.dev/go-sdk) or
// the converter package, only one of them: each brings its world's
// exports.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"

	_ "gantry.dev/go-sdk/internal/argv0" // before k8s.io/klog: see the package

	admissionv1 "k8s.io/api/admission/v1"

	"gantry.dev/go-sdk/internal/kjson"
)

// Request is one admission request with the policy's settings.
type Request struct {
	// AdmissionRequest is the `request` of the AdmissionReview.
	admissionv1.AdmissionRequest
	settings json.RawMessage
}

// NewRequest is a request for tests: review is an AdmissionRequest (or its
// JSON), settings the policy's settings (nil for none).
func NewRequest(review admissionv1.AdmissionRequest, settings any) *Request {
	raw := json.RawMessage("null")
	if settings != nil {
		var err error
		if raw, err = json.Marshal(settings); err != nil {
			panic(fmt.Sprintf("policy: encoding test settings: %v", err))
		}
	}
	return &Request{AdmissionRequest: review, settings: raw}
}

// Settings decodes the policy binding's settings into into (none reads as {}).
func (r *Request) Settings(into any) error {
	return DecodeSettings(r.settings, into)
}

// SettingsJSON is the settings as JSON ("null" when there are none).
func (r *Request) SettingsJSON() json.RawMessage { return r.settings }

// Object decodes the object of the request (the new object; for DELETE,
// the old one) into into.
func (r *Request) Object(into any) error {
	raw := r.AdmissionRequest.Object.Raw
	if len(raw) == 0 {
		raw = r.AdmissionRequest.OldObject.Raw
	}
	if len(raw) == 0 {
		return errors.New("the request has no object")
	}
	return json.Unmarshal(raw, into)
}

// DecodeSettings decodes settings (null reads as {}).
func DecodeSettings(settings json.RawMessage, into any) error {
	if len(settings) == 0 || string(settings) == "null" {
		settings = json.RawMessage("{}")
	}
	return json.Unmarshal(settings, into)
}

// Verdict is the policy's answer.
type Verdict struct {
	// Allowed says whether the request may proceed.
	Allowed bool
	// Message says why it was rejected, or is a note when allowed.
	Message string
	// Code is the HTTP status of a rejection (0: the default, 403).
	Code uint16
	// Patch is an RFC 6902 JSON Patch against the object (mutating
	// policies only).
	Patch json.RawMessage
	// Mutated is the whole mutated object; the host computes the patch.
	Mutated json.RawMessage
	// Warnings are returned to the client.
	Warnings []string
}

// Allow lets the request through unchanged.
func Allow() Verdict { return Verdict{Allowed: true} }

// Deny rejects the request with message (HTTP 403 unless [Verdict.WithCode]).
func Deny(message string) Verdict { return Verdict{Message: message} }

// Mutate allows the request with object as the new object (a k8s.io/api
// type or anything encoding to the object); honoured by mutating
// policies. An object that does not encode denies the request.
func Mutate(object any) Verdict {
	raw, err := kjson.Marshal(object)
	if err != nil {
		return Deny("the policy's mutated object does not encode: " + err.Error())
	}
	return Verdict{Allowed: true, Mutated: raw}
}

// JSONPatch allows the request with an RFC 6902 patch of the object.
func JSONPatch(patch json.RawMessage) Verdict { return Verdict{Allowed: true, Patch: patch} }

// WithCode sets the HTTP status code of a rejection.
func (v Verdict) WithCode(code uint16) Verdict { v.Code = code; return v }

// WithWarning adds a warning for the client.
func (v Verdict) WithWarning(warning string) Verdict {
	v.Warnings = append(v.Warnings, warning)
	return v
}

// Policy judges admission requests.
type Policy interface {
	// Validate answers one request; mutating policies answer with [Mutate]
	// or [JSONPatch].
	Validate(req *Request) Verdict
}

// SettingsValidator is implemented by a [Policy] that checks its binding's
// settings before going into service.
type SettingsValidator interface {
	// ValidateSettings gets the settings as JSON ("null" when none).
	ValidateSettings(settings json.RawMessage) error
}

// PolicyFunc turns a function into a [Policy].
type PolicyFunc func(req *Request) Verdict

// Validate calls f.
func (f PolicyFunc) Validate(req *Request) Verdict { return f(req) }

var registered Policy

// Register makes p the plugin's policy; call it from an init function.
func Register(p Policy) { registered = p }

// Call decodes an admission request and runs the registered policy, as the
// component's export does.
func Call(request, settings []byte) Verdict {
	if registered == nil {
		return Deny("the policy registered nothing: call policy.Register in an init function")
	}
	r := &Request{settings: settings}
	if err := json.Unmarshal(request, &r.AdmissionRequest); err != nil {
		return Deny("admission request is not valid JSON: " + err.Error())
	}
	if !json.Valid(settings) {
		return Deny("admission request is not valid JSON: the settings are not")
	}
	return registered.Validate(r)
}

// CallValidateSettings runs the registered policy's ValidateSettings.
func CallValidateSettings(settings []byte) error {
	if !json.Valid(settings) {
		return errors.New("settings are not valid JSON")
	}
	if v, ok := registered.(SettingsValidator); ok {
		return v.ValidateSettings(settings)
	}
	return nil
}
