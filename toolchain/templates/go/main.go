// Command __NAME__ is a Gantry reconcile plugin in Go.
//
// A parent with spec.who wants a ConfigMap <name>-greeting whose message
// is "<config.greeting>, <spec.who>!".
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apiv1 "__NAME__/api/v1"

	gantry "gantry.dev/go-sdk"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Config is the binding's config.
type Config struct {
	Greeting string `json:"greeting"`
}

// Plugin is the reconciler.
type Plugin struct{}

// Reconcile wants the greeting ConfigMap.
func (Plugin) Reconcile(req *gantry.Request) (*gantry.Response, error) {
	if req.Finalizing() {
		return gantry.NewResponse().Finalized(), nil
	}
	var config Config
	if err := req.Config(&config); err != nil {
		return nil, err
	}
	var spec apiv1.GreetingSpec
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	if spec.Who == "" {
		return nil, gantry.InvalidInput("spec.who must be a non-empty string")
	}
	name, err := req.ParentName()
	if err != nil {
		return nil, err
	}
	greeting := config.Greeting
	if greeting == "" {
		greeting = "Hello"
	}
	// The API server (and `gantry plugin run`) fills in the CRD's default.
	message := fmt.Sprintf("%s, %s%s", greeting, spec.Who, spec.Punctuation)
	child := corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-greeting"},
		Data:       map[string]string{"message": message},
	}
	return gantry.NewResponse().
		Child(&child).
		Status(apiv1.GreetingStatus{Message: message}).
		Condition(metav1.Condition{
			Type:    "Greeted",
			Status:  metav1.ConditionTrue,
			Reason:  "ConfigMapWritten",
			Message: fmt.Sprintf("%s says %s", child.Name, message),
		}), nil
}

// ValidateConfig refuses a config that does not decode or has a blank greeting.
func (Plugin) ValidateConfig(raw json.RawMessage) error {
	var config Config
	if err := gantry.DecodeConfig(raw, &config); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	if _, set := fields(raw)["greeting"]; set && strings.TrimSpace(config.Greeting) == "" {
		return errors.New("config.greeting must not be empty")
	}
	return nil
}

func fields(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

func init() { gantry.Register(Plugin{}) }

// main never runs in the component: the host calls the registered plugin.
func main() {}
