package gantry

import (
	"encoding/json"
	"errors"
)

// Reconciler computes the desired state for one parent.
type Reconciler interface {
	// Reconcile answers one request. Return an [*Error] (or wrap one) to
	// choose the reason and retryability the host reports.
	Reconcile(req *Request) (*Response, error)
}

// ConfigValidator is implemented by a [Reconciler] that checks the
// binding's config before the plugin goes into service; an error refuses
// that binding version (Warning Event InvalidConfig). Without it, any
// config is accepted.
type ConfigValidator interface {
	// ValidateConfig gets the config as JSON ("null" when there is none);
	// decode it with [DecodeConfig].
	ValidateConfig(config json.RawMessage) error
}

// ReconcilerFunc turns a function into a [Reconciler].
type ReconcilerFunc func(req *Request) (*Response, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(req *Request) (*Response, error) { return f(req) }

var registered Reconciler

// Register makes r the plugin's reconciler. Call it from an init function
// of the main package (main itself never runs in the component).
func Register(r Reconciler) { registered = r }

// Call runs the registered reconciler as the host would: a panic-free
// call that maps errors with [AsError]. The component's export uses it.
func Call(req *Request) (*Response, *Error) {
	if registered == nil {
		return nil, &Error{Reason: "NotRegistered", Message: "the plugin registered no reconciler: call gantry.Register in an init function"}
	}
	resp, err := registered.Reconcile(req)
	if err == nil && resp == nil {
		err = errors.New("Reconcile returned neither a response nor an error")
	}
	if err == nil {
		err = resp.Err()
	}
	if err != nil {
		e := AsError(err)
		return nil, &e
	}
	return resp, nil
}

// CallValidateConfig runs the registered reconciler's ValidateConfig, if it
// has one. The component's export uses it.
func CallValidateConfig(config json.RawMessage) error {
	if !json.Valid(config) {
		return errors.New("config is not valid JSON")
	}
	if v, ok := registered.(ConfigValidator); ok {
		return v.ValidateConfig(config)
	}
	return nil
}
