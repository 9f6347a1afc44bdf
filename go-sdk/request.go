package gantry

import (
	"encoding/json"
	"fmt"

	_ "gantry.dev/go-sdk/internal/argv0" // before k8s.io/klog: see the package
)

// Request is everything a reconcile may base its answer on: the parent,
// its observed children, related objects, the binding's config, whether
// the parent is being finalized, and why the host calls.
type Request struct {
	parent     json.RawMessage
	observed   []json.RawMessage
	related    []json.RawMessage
	config     json.RawMessage
	finalizing bool
	trigger    Trigger
}

// NewRequest is a request for parent (an object or its JSON) with nothing
// observed, no config and the trigger ParentChanged; for tests, with the
// With* methods to add the rest.
func NewRequest(parent any) *Request {
	return &Request{parent: mustJSON(parent), config: json.RawMessage("null")}
}

// WithObserved adds observed children (objects or their JSON).
func (r *Request) WithObserved(objects ...any) *Request {
	for _, o := range objects {
		r.observed = append(r.observed, mustJSON(o))
	}
	return r
}

// WithRelated adds related objects (objects or their JSON).
func (r *Request) WithRelated(objects ...any) *Request {
	for _, o := range objects {
		r.related = append(r.related, mustJSON(o))
	}
	return r
}

// WithConfig sets the binding's config (a value or its JSON).
func (r *Request) WithConfig(config any) *Request {
	r.config = mustJSON(config)
	return r
}

// WithFinalizing marks the parent as being deleted.
func (r *Request) WithFinalizing() *Request {
	r.finalizing = true
	return r
}

// WithTrigger sets why the host calls.
func (r *Request) WithTrigger(t Trigger) *Request {
	r.trigger = t
	return r
}

func mustJSON(v any) json.RawMessage {
	switch v := v.(type) {
	case json.RawMessage:
		return v
	case []byte:
		return v
	case string:
		return json.RawMessage(v)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("gantry: encoding a test request: %v", err))
	}
	return raw
}

// Finalizing is true when the parent is being deleted and the binding
// finalizes: clean up, and answer [Response.Finalized] when done.
func (r *Request) Finalizing() bool { return r.finalizing }

// Trigger is why the host calls.
func (r *Request) Trigger() Trigger { return r.trigger }

// ParentJSON is the parent object as the API server holds it
// (managedFields removed).
func (r *Request) ParentJSON() json.RawMessage { return r.parent }

// ConfigJSON is the binding's config ("null" when it has none).
func (r *Request) ConfigJSON() json.RawMessage { return r.config }

// ObservedJSON is every observed child.
func (r *Request) ObservedJSON() []json.RawMessage { return r.observed }

// RelatedJSON is every related object.
func (r *Request) RelatedJSON() []json.RawMessage { return r.related }

// Parent decodes the whole parent into into (e.g. a struct with Metadata,
// Spec and Status). The error is an [InvalidInput] error.
func (r *Request) Parent(into any) error {
	if err := json.Unmarshal(r.parent, into); err != nil {
		return InvalidInput("parent does not match its type: " + err.Error())
	}
	return nil
}

// header is what every object has.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name       string `json:"name"`
		Namespace  string `json:"namespace"`
		Generation int64  `json:"generation"`
	} `json:"metadata"`
}

func headerOf(raw json.RawMessage) header {
	var h header
	_ = json.Unmarshal(raw, &h) // a field of another type reads as empty
	return h
}

// ParentName is the parent's metadata.name; an [InvalidInput] error when
// it has none.
func (r *Request) ParentName() (string, error) {
	var p struct {
		Metadata struct {
			Name *string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(r.parent, &p) != nil || p.Metadata.Name == nil {
		return "", InvalidInput("parent has no metadata.name")
	}
	return *p.Metadata.Name, nil
}

// ParentNamespace is the parent's metadata.namespace ("" when cluster-scoped).
func (r *Request) ParentNamespace() string { return headerOf(r.parent).Metadata.Namespace }

// ParentGeneration is the parent's metadata.generation (0 when absent).
func (r *Request) ParentGeneration() int64 { return headerOf(r.parent).Metadata.Generation }

// Spec decodes the parent's spec into into; a parent without spec reads
// as {}. The error is an [InvalidInput] error "invalid spec: ...".
func (r *Request) Spec(into any) error {
	var p struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(r.parent, &p); err != nil {
		return InvalidInput("invalid spec: " + err.Error())
	}
	spec := p.Spec
	if spec == nil {
		spec = json.RawMessage("{}")
	}
	if err := json.Unmarshal(spec, into); err != nil {
		return InvalidInput("invalid spec: " + err.Error())
	}
	return nil
}

// Config decodes the binding's config into into; no config reads as {}.
// The error is an [InvalidInput] error "invalid config: ...".
func (r *Request) Config(into any) error {
	if err := DecodeConfig(r.config, into); err != nil {
		return InvalidInput("invalid config: " + err.Error())
	}
	return nil
}

// DecodeConfig decodes a config as [Request.Config] does (null reads as
// {}), for [ConfigValidator.ValidateConfig].
func DecodeConfig(config json.RawMessage, into any) error {
	if len(config) == 0 || string(config) == "null" {
		config = json.RawMessage("{}")
	}
	return json.Unmarshal(config, into)
}

// ObservedNamed decodes the observed child of kind kind (e.g.
// "Deployment") named name into into, and says whether there is one. The
// error is an [InvalidInput] error when that child does not decode.
func (r *Request) ObservedNamed(kind, name string, into any) (bool, error) {
	return decodeNamed(r.observed, "observed", kind, name, into)
}

// Observed is every observed child of kind kind, as JSON: decode each
// into the kind's type.
func (r *Request) Observed(kind string) []json.RawMessage { return ofKind(r.observed, kind) }

// Related is every related object of kind kind, as JSON.
func (r *Request) Related(kind string) []json.RawMessage { return ofKind(r.related, kind) }

// RelatedNamed decodes the related object of kind kind named name into
// into, and says whether there is one.
func (r *Request) RelatedNamed(kind, name string, into any) (bool, error) {
	return decodeNamed(r.related, "related", kind, name, into)
}

// decodeNamed decodes the object of kind kind named name among objects
// (the observed children or the related objects, as role says) into into.
func decodeNamed(objects []json.RawMessage, role, kind, name string, into any) (bool, error) {
	for _, raw := range objects {
		h := headerOf(raw)
		if h.Kind != kind || h.Metadata.Name != name {
			continue
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return true, InvalidInput(fmt.Sprintf("%s %s %s does not deserialize: %v", role, kind, name, err))
		}
		return true, nil
	}
	return false, nil
}

func ofKind(objects []json.RawMessage, kind string) []json.RawMessage {
	var out []json.RawMessage
	for _, raw := range objects {
		if headerOf(raw).Kind == kind {
			out = append(out, raw)
		}
	}
	return out
}
