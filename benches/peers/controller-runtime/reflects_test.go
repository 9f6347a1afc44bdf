package main

import (
	"encoding/json"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestExtraLiveFieldsAreFineChangedOrMissingOnesAreNot(t *testing.T) {
	// The cases of host/src/controller/intent.rs.
	intent := decode(t, `{"spec": {"replicas": 3, "template": {"containers": [{"name": "a", "image": "x"}]}}}`)
	live := `{"spec": {"replicas": 3, "paused": false,
		"template": {"containers": [{"name": "a", "image": "x", "terminationMessagePath": "/dev/termination-log"}]}},
		"status": {"readyReplicas": 1}}`
	if !Reflects(decode(t, live), intent) {
		t.Fatal("extra live fields must not matter")
	}
	changed := decode(t, live).(map[string]any)
	changed["spec"].(map[string]any)["replicas"] = 2.0
	if Reflects(changed, intent) {
		t.Fatal("a changed field must matter")
	}
	longer := decode(t, live).(map[string]any)
	template := longer["spec"].(map[string]any)["template"].(map[string]any)
	template["containers"] = append(template["containers"].([]any), map[string]any{"name": "b"})
	if Reflects(longer, intent) {
		t.Fatal("list lengths differ")
	}
	if Reflects(decode(t, `{}`), intent) {
		t.Fatal("a missing field must matter")
	}
	if !Reflects(decode(t, `{"a": 1.0}`), decode(t, `{"a": 1}`)) {
		t.Fatal("numbers compare by value")
	}
}
