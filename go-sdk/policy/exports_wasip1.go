//go:build wasip1

package policy

// The `admission` export of the policy world (gantry:plugin@0.1.0), in the
// canonical ABI's memory layout for wasm32.

import "gantry.dev/go-sdk/internal/abi"

// The verdict record: allowed @0, message @4 (tag, string @8), code @16
// (tag, u16 @18), mutation @20 (tag, then variant tag @24, string @28),
// warnings @36.
//
//go:wasmexport gantry:plugin/admission@0.1.0#validate
func exportValidate(requestPtr, requestLen, settingsPtr, settingsLen uint32) uint32 {
	abi.Enter()
	defer abi.Leave()
	v := Call(abi.Bytes(requestPtr, requestLen), abi.Bytes(settingsPtr, settingsLen))
	ret := abi.NewOut(44)
	ret.Bool(0, v.Allowed)
	if v.Message != "" {
		ret.U8(4, 1)
		ret.String(8, []byte(v.Message))
	}
	if v.Code != 0 {
		ret.U8(16, 1)
		ret.U16(18, v.Code)
	}
	switch {
	case v.Patch != nil:
		ret.U8(20, 1)
		ret.U8(24, 0)
		ret.String(28, v.Patch)
	case v.Mutated != nil:
		ret.U8(20, 1)
		ret.U8(24, 1)
		ret.String(28, v.Mutated)
	}
	warnings := ret.List(36, len(v.Warnings), 8)
	for i, w := range v.Warnings {
		warnings.String(uint32(8*i), []byte(w))
	}
	return ret.Addr()
}

//go:wasmexport cabi_post_gantry:plugin/admission@0.1.0#validate
func postValidate(uint32) { abi.PostReturn() }

//go:wasmexport gantry:plugin/admission@0.1.0#validate-settings
func exportValidateSettings(ptr, n uint32) uint32 {
	abi.Enter()
	defer abi.Leave()
	return abi.ResultString(CallValidateSettings(abi.Bytes(ptr, n)))
}

//go:wasmexport cabi_post_gantry:plugin/admission@0.1.0#validate-settings
func postValidateSettings(uint32) { abi.PostReturn() }
