package kjson

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestEmptyValueStructsAreLeftOutAndPointersKept(t *testing.T) {
	replicas := int32(2)
	d := appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name: "web", Image: "nginx",
						Ports: []corev1.ContainerPort{{ContainerPort: 80}},
					}},
					Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	got, err := Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx","name":"web","ports":[{"containerPort":80}]}],"volumes":[{"emptyDir":{},"name":"scratch"}]}}}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestCustomEncodingsAndNumbersSurvive(t *testing.T) {
	s := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 6379, TargetPort: intstr.FromString("redis")}}},
	}
	got, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"db"},"spec":{"ports":[{"port":6379,"targetPort":"redis"}]}}`; string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	limits := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	got, _ = Marshal(corev1.ResourceRequirements{Limits: limits})
	if want := `{"limits":{"memory":"64Mi"}}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	big := map[string]any{"n": json.Number("12345678901234567890")}
	got, _ = Marshal(big)
	if string(got) != `{"n":12345678901234567890}` {
		t.Fatalf("numbers changed: %s", got)
	}
}
