package main

import (
	"encoding/json"
	"reflect"
)

// Reflects reports whether live shows everything in intent, both decoded
// from JSON: every field of an intent object is in the live object with a
// value that reflects it in turn; lists must have the same length, element
// by element; fields the live object has beyond the intent (defaults,
// other managers) do not matter. This is Gantry's rule for skipping an
// apply (host/src/controller/intent.rs).
func Reflects(live, intent any) bool {
	switch want := intent.(type) {
	case map[string]any:
		have, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, w := range want {
			h, ok := have[k]
			if !ok || !Reflects(h, w) {
				return false
			}
		}
		return true
	case []any:
		have, ok := live.([]any)
		if !ok || len(have) != len(want) {
			return false
		}
		for i := range want {
			if !Reflects(have[i], want[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(live, intent)
	}
}

// ObjectReflects is Reflects for Go values: both are encoded to JSON and
// decoded again, and apiVersion and kind are left out of the intent (typed
// objects from the cache carry no TypeMeta).
func ObjectReflects(live, intent any) (bool, error) {
	var have, want map[string]any
	if err := roundTrip(live, &have); err != nil {
		return false, err
	}
	if err := roundTrip(intent, &want); err != nil {
		return false, err
	}
	delete(want, "apiVersion")
	delete(want, "kind")
	return Reflects(have, want), nil
}

func roundTrip(in any, out *map[string]any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}
