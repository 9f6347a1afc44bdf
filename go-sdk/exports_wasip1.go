//go:build wasip1

package gantry

// The `reconcile` and `config` exports of the reconciler world
// (gantry:plugin@0.1.0), in the canonical ABI's memory layout for wasm32.

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/go-sdk/internal/abi"
)

// The request record: parent @0, observed @8, related @16, config @24,
// finalizing @32, trigger @36 (discriminant, then an object-ref @40).
func readRequest(p uint32) *Request {
	r := &Request{
		parent:     abi.RawString(p),
		observed:   raws(abi.StringList(p + 8)),
		related:    raws(abi.StringList(p + 16)),
		config:     abi.RawString(p + 24),
		finalizing: abi.U8(p+32) != 0,
		trigger:    Trigger{Kind: TriggerKind(abi.U8(p + 36))},
	}
	if k := r.trigger.Kind; k == ChildChanged || k == RelatedChanged {
		o := p + 40
		ref := &ObjectRef{APIVersion: abi.String(o), Kind: abi.String(o + 8), Name: abi.String(o + 28)}
		if abi.U8(o+16) != 0 {
			ref.Namespace = abi.String(o + 20)
		}
		r.trigger.Object = ref
	}
	return r
}

func raws(list [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(list))
	for i, b := range list {
		out[i] = b
	}
	return out
}

//go:wasmexport gantry:plugin/reconcile@0.1.0#reconcile
func exportReconcile(request uint32) uint32 {
	abi.Enter()
	defer abi.Leave()
	resp, failure := Call(readRequest(request))
	// result<response, plugin-error>: discriminant @0, payload @8.
	ret := abi.NewOut(72)
	if failure != nil {
		ret.U8(0, 1)
		e := ret.At(8)
		e.String(0, []byte(failure.Message))
		e.String(8, []byte(failure.Reason))
		e.Bool(16, failure.Retryable)
		return ret.Addr()
	}
	writeResponse(ret.At(8), resp)
	return ret.Addr()
}

// The response record: children @0, status @8 (option: tag, string @12),
// conditions @20, events @28, requeue-after-ms @40 (tag, u64 @48),
// finalized @56.
func writeResponse(o abi.Out, r *Response) {
	children := o.List(0, len(r.children), 8)
	for i, c := range r.children {
		children.String(uint32(8*i), c)
	}
	if r.status != nil {
		o.U8(8, 1)
		o.String(12, r.status)
	}
	conditions := o.List(20, len(r.conditions), 28)
	for i, c := range r.conditions {
		e := conditions.At(uint32(28 * i))
		e.String(0, []byte(c.Type))
		e.U8(8, conditionStatus(c.Status))
		e.String(12, []byte(c.Reason))
		e.String(20, []byte(c.Message))
	}
	events := o.List(28, len(r.events), 20)
	for i, ev := range r.events {
		e := events.At(uint32(20 * i))
		if ev.Type == corev1.EventTypeWarning {
			e.U8(0, 1)
		}
		e.String(4, []byte(ev.Reason))
		e.String(12, []byte(ev.Message))
	}
	if d, ok := r.Requeue(); ok {
		o.U8(40, 1)
		ms := d.Milliseconds()
		if ms < 0 {
			ms = 0
		}
		o.U64(48, uint64(ms))
	}
	o.Bool(56, r.finalized)
}

func conditionStatus(s metav1.ConditionStatus) uint8 {
	switch s {
	case metav1.ConditionTrue:
		return 0
	case metav1.ConditionFalse:
		return 1
	default:
		return 2
	}
}

//go:wasmexport cabi_post_gantry:plugin/reconcile@0.1.0#reconcile
func postReconcile(uint32) { abi.PostReturn() }

//go:wasmexport gantry:plugin/config@0.1.0#validate-config
func exportValidateConfig(ptr, n uint32) uint32 {
	abi.Enter()
	defer abi.Leave()
	err := CallValidateConfig(abi.Bytes(ptr, n))
	return abi.ResultString(err)
}

//go:wasmexport cabi_post_gantry:plugin/config@0.1.0#validate-config
func postValidateConfig(uint32) { abi.PostReturn() }
