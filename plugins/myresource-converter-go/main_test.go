package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gantry.dev/go-sdk/converter"
)

func alpha(image string) converter.Object {
	object, err := converter.Decode([]byte(`{
		"apiVersion": "example.com/v1alpha1", "kind": "MyResource",
		"metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
		"spec": {"replicas": 3, "image": ` + quote(image) + `, "owner": "ops"}}`))
	if err != nil {
		panic(err)
	}
	return object
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// convert converts a copy of object.
func convert(t *testing.T, object converter.Object, to string) converter.Object {
	t.Helper()
	raw, _ := converter.Encode(object)
	out, err := converter.ConvertAll(MyResource{}, [][]byte{raw}, to)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := converter.Decode(out[0])
	return back
}

func TestUpRenamesAndSplits(t *testing.T) {
	v1 := convert(t, alpha("registry:5000/web:1.2@sha256:ab"), "example.com/v1")
	spec, _ := converter.Encode(v1["spec"].(map[string]any))
	if want := `{"image":{"digest":"sha256:ab","repository":"registry:5000/web","tag":"1.2"},"instances":3,"owner":"ops"}`; string(spec) != want {
		t.Fatalf("spec %s, want %s", spec, want)
	}
	if v1["apiVersion"] != "example.com/v1" {
		t.Fatalf("apiVersion %v", v1["apiVersion"])
	}
}

func TestRoundTripsAreLosslessBothWays(t *testing.T) {
	for _, image := range []string{"web", "web:", "web:1", "host:5000/web", "web@sha256:1", "a/b:c@d"} {
		original := alpha(image)
		back := convert(t, convert(t, original, "example.com/v1"), "example.com/v1alpha1")
		if !reflect.DeepEqual(back, original) {
			t.Errorf("%s: %v came back as %v", image, original, back)
		}
	}
	v1 := convert(t, alpha("web:1"), "example.com/v1")
	v1["spec"].(map[string]any)["paused"] = true
	down := convert(t, v1, "example.com/v1alpha1")
	if got := down["metadata"].(map[string]any)["annotations"].(map[string]any)[V1Fields]; got != `{"paused":true}` {
		t.Fatalf("annotation %v", got)
	}
	if _, ok := down["spec"].(map[string]any)["paused"]; ok {
		t.Fatal("paused stayed in the v1alpha1 spec")
	}
	if back := convert(t, down, "example.com/v1"); !reflect.DeepEqual(back, v1) {
		t.Fatalf("%v came back as %v", v1, back)
	}
}

func TestWhatCannotBeConvertedSaysWhy(t *testing.T) {
	v1 := convert(t, alpha("web:1"), "example.com/v1")
	v1["spec"].(map[string]any)["image"].(map[string]any)["repository"] = "web:2"
	if _, err := (MyResource{}).Convert(v1, "example.com/v1alpha1"); err == nil || !strings.Contains(err.Error(), "must not carry a tag") {
		t.Fatalf("got %v", err)
	}
	if _, err := (MyResource{}).Convert(alpha("web"), "example.com/v2"); err == nil || err.Error() != "cannot convert MyResource from v1alpha1 to v2" {
		t.Fatalf("got %v", err)
	}
	bad := alpha("web")
	bad["spec"].(map[string]any)["image"] = json.Number("7")
	if _, err := (MyResource{}).Convert(bad, "example.com/v1"); err == nil || err.Error() != "spec.image must be a string at v1alpha1, not 7" {
		t.Fatalf("got %v", err)
	}
}
