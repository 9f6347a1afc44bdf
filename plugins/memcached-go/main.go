// Command memcached-go is the kubebuilder tutorial's Memcached operator as
// a Gantry plugin in Go: the same logic as the Rust plugin in
// plugins/memcached, with the same answers and error messages.
//
// A Memcached (spec.size, spec.containerPort) becomes a Deployment of
// memcached with that many replicas. Status reports the ready replicas of
// the observed Deployment and an Available condition.
//
// Config (all optional): image (default memcached:1.6.26-alpine).
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	gantry "gantry.dev/go-sdk"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultImage is used when the binding's config names none.
const DefaultImage = "memcached:1.6.26-alpine"

// Spec is Memcached.spec.
type Spec struct {
	// Size is the number of memcached replicas (1 to 10; default 1).
	Size int32
	// ContainerPort is the port memcached listens on (default 11211).
	ContainerPort int32
}

// UnmarshalJSON decodes the spec with serde's rules (as the Rust plugin does).
func (s *Spec) UnmarshalJSON(raw []byte) error {
	value, err := parse(raw)
	if err != nil {
		return err
	}
	*s = Spec{Size: 1, ContainerPort: 11211}
	fields := []*int32{&s.Size, &s.ContainerPort}
	switch v := value.(type) {
	case []any:
		if len(v) > len(fields) {
			return invalidf("invalid length %d, expected fewer elements in array", len(v))
		}
		for i, item := range v {
			if *fields[i], err = i32(item); err != nil {
				return err
			}
		}
	case map[string]any:
		for key, item := range v {
			var field *int32
			switch key {
			case "size":
				field = fields[0]
			case "containerPort":
				field = fields[1]
			default:
				continue
			}
			if *field, err = i32(item); err != nil {
				return err
			}
		}
	default:
		return invalidType(value, "struct MemcachedSpec")
	}
	return nil
}

// Config is the binding's config.
type Config struct {
	// Image is the container image.
	Image *string
}

// UnmarshalJSON decodes the config with serde's rules (unknown fields refused).
func (c *Config) UnmarshalJSON(raw []byte) error {
	value, err := parse(raw)
	if err != nil {
		return err
	}
	*c = Config{}
	switch v := value.(type) {
	case []any:
		if len(v) == 0 {
			return invalidf("invalid length 0, expected struct Config with 1 element")
		}
		if len(v) > 1 {
			return invalidf("invalid length %d, expected fewer elements in array", len(v))
		}
		c.Image, err = optionalString(v[0])
		return err
	case map[string]any:
		for key, item := range v {
			if key != "image" {
				return invalidf("unknown field `%s`, expected `image`", key)
			}
			if c.Image, err = optionalString(item); err != nil {
				return err
			}
		}
		return nil
	}
	return invalidType(value, "struct Config")
}

// observedDeployment is an appsv1.Deployment checked the way k8s-openapi
// checks the fields the plugin reads.
type observedDeployment struct{ appsv1.Deployment }

func (d *observedDeployment) UnmarshalJSON(raw []byte) error {
	value, err := parse(raw)
	if err != nil {
		return err
	}
	object, _ := value.(map[string]any)
	if spec, ok := object["spec"]; ok && spec != nil {
		fields, ok := spec.(map[string]any)
		if !ok {
			return invalidType(spec, "DeploymentSpec")
		}
		if replicas := fields["replicas"]; replicas != nil {
			if _, err := i32(replicas); err != nil {
				return err
			}
		}
		for _, required := range []string{"selector", "template"} {
			if _, ok := fields[required]; !ok {
				return invalidf("missing field `%s`", required)
			}
		}
	}
	if status, ok := object["status"]; ok && status != nil {
		fields, ok := status.(map[string]any)
		if !ok {
			return invalidType(status, "DeploymentStatus")
		}
		if ready := fields["readyReplicas"]; ready != nil {
			if _, err := i32(ready); err != nil {
				return err
			}
		}
	}
	return json.Unmarshal(raw, &d.Deployment)
}

// Memcached is the plugin.
type Memcached struct{}

// Reconcile wants the Deployment and reports its ready replicas.
func (Memcached) Reconcile(req *gantry.Request) (*gantry.Response, error) {
	if req.Finalizing() {
		return gantry.NewResponse().Finalized(), nil
	}
	var config Config
	if err := req.Config(&config); err != nil {
		return nil, err
	}
	var spec Spec
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	if spec.Size < 1 || spec.Size > 10 {
		return nil, gantry.Permanent("InvalidSpec", fmt.Sprintf("spec.size must be between 1 and 10, got %d", spec.Size))
	}
	name, err := req.ParentName()
	if err != nil {
		return nil, err
	}
	image := DefaultImage
	if config.Image != nil {
		image = *config.Image
	}

	var observed observedDeployment
	found, err := req.ObservedNamed("Deployment", name, &observed)
	if err != nil {
		return nil, err
	}
	var ready int32
	var current *int32
	if found {
		ready = observed.Status.ReadyReplicas
		current = observed.Spec.Replicas
	}

	response := gantry.NewResponse().
		Child(deployment(name, spec, image)).
		Status(map[string]int32{"readyReplicas": ready})
	message := fmt.Sprintf("%d/%d replicas ready", ready, spec.Size)
	if ready >= spec.Size {
		response.Condition(metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "DeploymentReady", Message: message})
	} else {
		response.Condition(metav1.Condition{Type: "Available", Status: metav1.ConditionFalse, Reason: "Scaling", Message: message})
	}
	if current != nil && *current != spec.Size {
		response.Event(corev1.EventTypeNormal, "Scaling", fmt.Sprintf("scaling memcached from %d to %d replicas", *current, spec.Size))
	}
	return response, nil
}

// ValidateConfig refuses configs that do not decode and an empty image.
func (Memcached) ValidateConfig(raw json.RawMessage) error {
	var config Config
	if err := gantry.DecodeConfig(raw, &config); err != nil {
		return errors.New("invalid config: " + err.Error())
	}
	if config.Image != nil && blank(*config.Image) {
		return errors.New("config.image must not be empty")
	}
	return nil
}

// deployment is the Deployment a Memcached wants.
func deployment(name string, spec Spec, image string) *appsv1.Deployment {
	labels := func() map[string]string {
		return map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": name}
	}
	yes, no, user := true, false, int64(1001)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: &spec.Size,
			Selector: &metav1.LabelSelector{MatchLabels: labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   &yes,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "memcached",
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"memcached", "--memory-limit=64", "-o", "modern", "-v"},
						Ports: []corev1.ContainerPort{{
							ContainerPort: spec.ContainerPort, Name: "memcached", Protocol: corev1.ProtocolTCP,
						}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             &yes,
							RunAsUser:                &user,
							AllowPrivilegeEscalation: &no,
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

func init() { gantry.Register(Memcached{}) }

func main() {}
