package converter

import (
	"errors"
	"strings"
	"testing"
)

// toDesired sets apiVersion, and refuses objects with spec.bad.
var toDesired = Func(func(object Object, desired string) (Object, error) {
	if spec, _ := object["spec"].(map[string]any); spec["bad"] == true {
		return nil, errors.New("spec.bad is set")
	}
	object["apiVersion"] = desired
	return object, nil
})

func TestEachObjectIsConvertedInOrderAndNumbersKeepTheirText(t *testing.T) {
	in := [][]byte{
		[]byte(`{"apiVersion":"x.dev/v1alpha1","metadata":{"name":"a","namespace":"n"},"spec":{"big":12345678901234567890,"f":1.50,"html":"<&>"}}`),
		[]byte(`{"apiVersion":"x.dev/v1alpha1","metadata":{"name":"b"}}`),
	}
	out, err := ConvertAll(toDesired, in, "x.dev/v1")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"apiVersion":"x.dev/v1","metadata":{"name":"a","namespace":"n"},"spec":{"big":12345678901234567890,"f":1.50,"html":"<&>"}}`,
		`{"apiVersion":"x.dev/v1","metadata":{"name":"b"}}`,
	}
	for i := range want {
		if string(out[i]) != want[i] {
			t.Errorf("object %d:\n got %s\nwant %s", i, out[i], want[i])
		}
	}
}

func TestErrorsNameTheObject(t *testing.T) {
	in := [][]byte{
		[]byte(`{"apiVersion":"x.dev/v1alpha1","metadata":{"name":"a","namespace":"n"}}`),
		[]byte(`{"apiVersion":"x.dev/v1alpha1","metadata":{"name":"b","namespace":"n"},"spec":{"bad":true}}`),
	}
	if _, err := ConvertAll(toDesired, in, "x.dev/v1"); err == nil || err.Error() != "n/b: spec.bad is set" {
		t.Fatalf("got %v", err)
	}
	for _, hostile := range []string{`[]`, `null`, `{"a":1} {}`, `{`, ``} {
		_, err := ConvertAll(toDesired, [][]byte{[]byte(hostile)}, "x.dev/v1")
		if err == nil || !strings.HasPrefix(err.Error(), "object 0: not a JSON object") {
			t.Errorf("%q: got %v", hostile, err)
		}
	}
	none := Func(func(Object, string) (Object, error) { return nil, nil })
	if _, err := ConvertAll(none, in[:1], "x.dev/v1"); err == nil || err.Error() != "n/a: the converter returned no object" {
		t.Fatalf("got %v", err)
	}
}

func TestCallWithoutARegisteredConverterSaysSo(t *testing.T) {
	registered = nil
	if _, err := Call(nil, "x.dev/v1"); err == nil || !strings.Contains(err.Error(), "converter.Register") {
		t.Fatalf("got %v", err)
	}
	Register(toDesired)
	defer Register(nil)
	if out, err := Call([][]byte{[]byte(`{"apiVersion":"v1"}`)}, "x.dev/v1"); err != nil || string(out[0]) != `{"apiVersion":"x.dev/v1"}` {
		t.Fatalf("got %s, %v", out, err)
	}
}

func TestVersionOf(t *testing.T) {
	for apiVersion, want := range map[any]string{"x.dev/v1beta1": "v1beta1", "v1": "v1", "": "", nil: "", 7: ""} {
		if got := VersionOf(Object{"apiVersion": apiVersion}); got != want {
			t.Errorf("%v: got %q, want %q", apiVersion, got, want)
		}
	}
}
