// Command guestbook is the Kubernetes Guestbook as a Gantry plugin in Go: a
// Guestbook (webapp.example.com/v1) becomes the PHP frontend (Deployment and
// Service) and a Redis leader and followers (a Deployment and a Service
// each). The status reports the replicas and ready replicas of each tier,
// and one condition per tier; the host's Ready condition follows them.
package main

import (
	"fmt"

	gantry "gantry.dev/go-sdk"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The images of the upstream Guestbook, used when the spec names none (the
// CRD defaults them too).
const (
	DefaultFrontendImage = "us-docker.pkg.dev/google-samples/containers/gke/gb-frontend:v5"
	DefaultLeaderImage   = "docker.io/redis:6.0.5"
	DefaultFollowerImage = "us-docker.pkg.dev/google-samples/containers/gke/gb-redis-follower:v2"
)

// Spec is Guestbook.spec.
type Spec struct {
	// Frontend is the web tier.
	Frontend Frontend `json:"frontend"`
	// Redis is the storage tier.
	Redis Redis `json:"redis"`
}

// Frontend is spec.frontend.
type Frontend struct {
	// Replicas of the frontend (1 to 10; default 3).
	Replicas *int32 `json:"replicas,omitempty"`
	// Image of the frontend.
	Image string `json:"image,omitempty"`
	// ServiceType of the frontend Service (default ClusterIP).
	ServiceType corev1.ServiceType `json:"serviceType,omitempty"`
}

// Redis is spec.redis.
type Redis struct {
	// FollowerReplicas is the number of read replicas (0 to 10; default 2).
	FollowerReplicas *int32 `json:"followerReplicas,omitempty"`
	// LeaderImage is the Redis leader's image.
	LeaderImage string `json:"leaderImage,omitempty"`
	// FollowerImage is the Redis followers' image.
	FollowerImage string `json:"followerImage,omitempty"`
}

// TierStatus is the status of one tier.
type TierStatus struct {
	// Replicas wanted.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas of the tier's Deployment.
	ReadyReplicas int32 `json:"readyReplicas"`
}

// Status is the plugin's part of Guestbook.status.
type Status struct {
	// Frontend tier.
	Frontend TierStatus `json:"frontend"`
	// RedisLeader tier.
	RedisLeader TierStatus `json:"redisLeader"`
	// RedisFollower tier.
	RedisFollower TierStatus `json:"redisFollower"`
	// URL of the frontend inside the cluster.
	URL string `json:"url"`
}

// tier is one Deployment and its Service.
type tier struct {
	component string // app.kubernetes.io/component and the name suffix
	condition string // the condition type reporting it
	replicas  int32
	image     string
	port      int32
	env       []corev1.EnvVar
	service   corev1.ServiceType
}

func int32Or(v *int32, fallback int32) int32 {
	if v == nil {
		return fallback
	}
	return *v
}

func stringOr(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

// withDefaults fills what the CRD defaults, for requests that did not pass
// through the API server (gantry plugin run), and checks the ranges.
func withDefaults(spec Spec) (Spec, error) {
	frontend := int32Or(spec.Frontend.Replicas, 3)
	followers := int32Or(spec.Redis.FollowerReplicas, 2)
	if frontend < 1 || frontend > 10 {
		return spec, gantry.Permanent("InvalidSpec", fmt.Sprintf("spec.frontend.replicas must be between 1 and 10, got %d", frontend))
	}
	if followers < 0 || followers > 10 {
		return spec, gantry.Permanent("InvalidSpec", fmt.Sprintf("spec.redis.followerReplicas must be between 0 and 10, got %d", followers))
	}
	spec.Frontend.Replicas, spec.Redis.FollowerReplicas = &frontend, &followers
	spec.Frontend.Image = stringOr(spec.Frontend.Image, DefaultFrontendImage)
	spec.Frontend.ServiceType = corev1.ServiceType(stringOr(string(spec.Frontend.ServiceType), string(corev1.ServiceTypeClusterIP)))
	spec.Redis.LeaderImage = stringOr(spec.Redis.LeaderImage, DefaultLeaderImage)
	spec.Redis.FollowerImage = stringOr(spec.Redis.FollowerImage, DefaultFollowerImage)
	return spec, nil
}

// Guestbook is the plugin.
type Guestbook struct{}

// Reconcile wants the three tiers and reports how ready they are.
func (Guestbook) Reconcile(req *gantry.Request) (*gantry.Response, error) {
	if req.Finalizing() {
		return gantry.NewResponse().Finalized(), nil
	}
	var spec Spec
	if err := req.Spec(&spec); err != nil {
		return nil, err
	}
	spec, err := withDefaults(spec)
	if err != nil {
		return nil, err
	}
	name, err := req.ParentName()
	if err != nil {
		return nil, err
	}
	leaderHost := name + "-redis-leader"
	followerHost := name + "-redis-follower"
	fromEnv := []corev1.EnvVar{
		{Name: "GET_HOSTS_FROM", Value: "env"},
		{Name: "REDIS_LEADER_SERVICE_HOST", Value: leaderHost},
	}
	tiers := []tier{
		{component: "frontend", condition: "FrontendReady", replicas: *spec.Frontend.Replicas, image: spec.Frontend.Image, port: 80,
			env:     append(fromEnv, corev1.EnvVar{Name: "REDIS_FOLLOWER_SERVICE_HOST", Value: followerHost}),
			service: spec.Frontend.ServiceType},
		{component: "redis-leader", condition: "RedisLeaderReady", replicas: 1, image: spec.Redis.LeaderImage, port: 6379},
		{component: "redis-follower", condition: "RedisFollowersReady", replicas: *spec.Redis.FollowerReplicas, image: spec.Redis.FollowerImage, port: 6379, env: fromEnv},
	}

	response := gantry.NewResponse()
	statuses := make([]TierStatus, len(tiers))
	for i, t := range tiers {
		child := name + "-" + t.component
		response.Child(deployment(name, child, t)).Child(service(name, child, t))
		var observed appsv1.Deployment
		if _, err := req.ObservedNamed("Deployment", child, &observed); err != nil {
			return nil, err
		}
		ready := observed.Status.ReadyReplicas
		statuses[i] = TierStatus{Replicas: t.replicas, ReadyReplicas: ready}
		condition := metav1.Condition{Type: t.condition, Status: metav1.ConditionTrue, Reason: "DeploymentReady",
			Message: fmt.Sprintf("%s: %d/%d replicas ready", child, ready, t.replicas)}
		if ready < t.replicas {
			condition.Status, condition.Reason = metav1.ConditionFalse, "Scaling"
		}
		response.Condition(condition)
	}
	namespace := req.ParentNamespace()
	return response.Status(Status{
		Frontend:      statuses[0],
		RedisLeader:   statuses[1],
		RedisFollower: statuses[2],
		URL:           fmt.Sprintf("http://%s-frontend.%s.svc", name, namespace),
	}), nil
}

func labels(instance, component string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "guestbook",
		"app.kubernetes.io/instance":  instance,
		"app.kubernetes.io/component": component,
	}
}

func deployment(instance, name string, t tier) *appsv1.Deployment {
	replicas := t.replicas
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(instance, t.component)},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels(instance, t.component)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels(instance, t.component)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  t.component,
						Image: t.image,
						Env:   t.env,
						Ports: []corev1.ContainerPort{{ContainerPort: t.port, Name: "serve", Protocol: corev1.ProtocolTCP}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("100Mi"),
						}},
					}},
				},
			},
		},
	}
}

func service(instance, name string, t tier) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(instance, t.component)},
		Spec: corev1.ServiceSpec{
			Type:     t.service,
			Selector: labels(instance, t.component),
			Ports:    []corev1.ServicePort{{Port: t.port, TargetPort: intstr.FromString("serve"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

func init() { gantry.Register(Guestbook{}) }

func main() {}
