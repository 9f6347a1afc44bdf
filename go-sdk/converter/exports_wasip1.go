//go:build wasip1

package converter

// The `conversion` export of the converter world (gantry:plugin@0.1.0), in
// the canonical ABI's memory layout for wasm32.

import "gantry.dev/go-sdk/internal/abi"

// result<list<json>, string>: discriminant @0, payload (list or string) @4.
//
//go:wasmexport gantry:plugin/conversion@0.1.0#convert
func exportConvert(objectsPtr, objectsLen, desiredPtr, desiredLen uint32) uint32 {
	abi.Enter()
	defer abi.Leave()
	objects := abi.Strings(objectsPtr, objectsLen)
	converted, err := Call(objects, string(abi.Bytes(desiredPtr, desiredLen)))
	if err != nil {
		return abi.ResultString(err)
	}
	ret := abi.NewOut(12)
	list := ret.List(4, len(converted), 8)
	for i, object := range converted {
		list.String(uint32(8*i), object)
	}
	return ret.Addr()
}

//go:wasmexport cabi_post_gantry:plugin/conversion@0.1.0#convert
func postConvert(uint32) { abi.PostReturn() }
