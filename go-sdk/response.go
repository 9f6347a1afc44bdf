package gantry

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/go-sdk/internal/kjson"
)

// Response is the desired state: children, status, conditions, events, a
// requeue and whether finalization is done. Build it with [NewResponse]
// and its chained methods; the first error a method meets (a child that
// does not encode, say) is kept and returned by [Response.Err], and the
// reconcile then fails with it.
type Response struct {
	children   []json.RawMessage
	status     json.RawMessage
	conditions []metav1.Condition
	events     []Event
	requeue    *time.Duration
	finalized  bool
	err        error
}

// Event is an Event the host emits on the parent.
type Event struct {
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Reason is CamelCase, e.g. "ScaledUp".
	Reason string
	// Message is for people.
	Message string
}

// NewResponse is an empty answer: no children (every owned child is
// pruned), status left as it is.
func NewResponse() *Response { return &Response{} }

func (r *Response) fail(err error) *Response {
	if r.err == nil {
		r.err = err
	}
	return r
}

// Child adds a child the parent should have: a k8s.io/api object (or any
// value encoding to one) with apiVersion, kind and metadata.name set. Set
// only the fields you care about; leave out owner references and Gantry's
// labels (the host adds them). Empty omitempty structs are left out (see
// the package doc of the encoding), so `status: {}` is not sent.
func (r *Response) Child(object any) *Response {
	raw, err := kjson.Marshal(object)
	if err != nil {
		return r.fail(Permanent("SerializeFailed", err.Error()))
	}
	h := headerOf(raw)
	if h.APIVersion == "" || h.Kind == "" || h.Metadata.Name == "" {
		return r.fail(Permanent("SerializeFailed",
			fmt.Sprintf("a child needs apiVersion, kind and metadata.name (set TypeMeta): %.200s", raw)))
	}
	r.children = append(r.children, raw)
	return r
}

// ChildJSON adds a child given as JSON.
func (r *Response) ChildJSON(object json.RawMessage) *Response {
	r.children = append(r.children, object)
	return r
}

// Status sets the parent's desired status (a struct or map encoding to a
// JSON object). The host adds observedGeneration and the conditions.
func (r *Response) Status(status any) *Response {
	raw, err := kjson.Marshal(status)
	if err != nil {
		return r.fail(Permanent("SerializeFailed", err.Error()))
	}
	if len(raw) == 0 || raw[0] != '{' {
		return r.fail(Permanent("SerializeFailed", "the status must encode to a JSON object"))
	}
	r.status = raw
	return r
}

// Condition merges a condition into status.conditions, by type. Only Type,
// Status (True, False or Unknown), Reason and Message are sent: the host
// sets lastTransitionTime and observedGeneration.
func (r *Response) Condition(c metav1.Condition) *Response {
	switch c.Status {
	case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
	default:
		return r.fail(Permanent("InvalidCondition", fmt.Sprintf("condition %s has status %q, not True, False or Unknown", c.Type, c.Status)))
	}
	r.conditions = append(r.conditions, c)
	return r
}

// Event emits an Event on the parent: eventType is corev1.EventTypeNormal
// or corev1.EventTypeWarning.
func (r *Response) Event(eventType, reason, message string) *Response {
	if eventType != corev1.EventTypeNormal && eventType != corev1.EventTypeWarning {
		return r.fail(Permanent("InvalidEvent", fmt.Sprintf("event type %q is not Normal or Warning", eventType)))
	}
	r.events = append(r.events, Event{Type: eventType, Reason: reason, Message: message})
	return r
}

// RequeueAfter asks to be called again after d even if nothing changes
// (the host waits at least a second).
func (r *Response) RequeueAfter(d time.Duration) *Response {
	r.requeue = &d
	return r
}

// Finalized says cleanup is done (when the request is finalizing): the
// host removes its finalizer.
func (r *Response) Finalized() *Response {
	r.finalized = true
	return r
}

// Err is the first error met while building the response.
func (r *Response) Err() error { return r.err }

// Children are the children, as JSON.
func (r *Response) Children() []json.RawMessage { return r.children }

// StatusJSON is the status, or nil when left unchanged.
func (r *Response) StatusJSON() json.RawMessage { return r.status }

// Conditions are the conditions.
func (r *Response) Conditions() []metav1.Condition { return r.conditions }

// Events are the events.
func (r *Response) Events() []Event { return r.events }

// Requeue is the requeue delay, if one was asked for.
func (r *Response) Requeue() (time.Duration, bool) {
	if r.requeue == nil {
		return 0, false
	}
	return *r.requeue, true
}

// IsFinalized says whether [Response.Finalized] was called.
func (r *Response) IsFinalized() bool { return r.finalized }
