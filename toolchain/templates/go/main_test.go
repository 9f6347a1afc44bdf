// Unit tests of the plugin's logic, natively: `go test ./...`. The cases in
// tests/ run the built component instead (`gantry plugin test .`).
package main

import (
	"encoding/json"
	"errors"
	"testing"

	gantry "gantry.dev/go-sdk"
)

func TestGreetsWhoTheSpecNames(t *testing.T) {
	req := gantry.NewRequest(`{"apiVersion":"example.com/v1","kind":"Greeting",
		"metadata":{"name":"world","namespace":"default"},"spec":{"who":"World","punctuation":"!"}}`).
		WithConfig(map[string]string{"greeting": "Hi"})
	resp, err := Plugin{}.Reconcile(req)
	if err != nil {
		t.Fatal(err)
	}
	var child struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(resp.Children()[0], &child); err != nil || child.Data["message"] != "Hi, World!" {
		t.Fatalf("child %s (%v)", resp.Children()[0], err)
	}
	if err := (Plugin{}).ValidateConfig(json.RawMessage(`{"greeting":" "}`)); err == nil {
		t.Fatal("a blank greeting is accepted")
	}
}

func TestAParentWithoutWhoIsInvalidInput(t *testing.T) {
	req := gantry.NewRequest(`{"apiVersion":"example.com/v1","kind":"Greeting",
		"metadata":{"name":"nobody","namespace":"default"},"spec":{}}`)
	_, err := Plugin{}.Reconcile(req)
	var plugin *gantry.Error
	if !errors.As(err, &plugin) || plugin.Reason != gantry.ReasonInvalidInput || plugin.Retryable {
		t.Fatalf("want a permanent InvalidInput error, got %v", err)
	}
}
