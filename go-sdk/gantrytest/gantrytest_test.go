package gantrytest_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"gantry.dev/go-sdk/gantrytest"
	appsv1 "k8s.io/api/apps/v1"
)

func TestBinaryNamesWhatIsMissing(t *testing.T) {
	t.Setenv("GANTRY", "")
	t.Setenv("PATH", t.TempDir())
	_, err := gantrytest.Binary("")
	if err == nil || !strings.Contains(err.Error(), "set GANTRY") {
		t.Fatalf("want an error that says to set GANTRY, got %v", err)
	}
	if path, err := gantrytest.Binary("/opt/gantry"); err != nil || path != "/opt/gantry" {
		t.Fatalf("an explicit binary: %q, %v", path, err)
	}
}

// The Guestbook example (Go) in service: a Guestbook gets its frontend
// Deployment. Runs with the gantry binary named by $GANTRY, as the host's
// tests (host/tests/plugin_serve.rs) give it, not whatever is on PATH.
func TestGuestbookServesAndReconciles(t *testing.T) {
	if os.Getenv("GANTRY") == "" {
		t.Skip("set GANTRY to the gantry binary to run this test")
	}
	started := time.Now()
	env := gantrytest.Start(t, "../../plugins/guestbook", &gantrytest.Options{Timeout: 5 * time.Minute})
	t.Logf("binding %s (sha256 %s) served in %s", env.Binding, env.SHA256[:12], time.Since(started))
	if env.Namespace != "gantry-system" || env.Binding != "guestbook" {
		t.Fatalf("namespace %q, binding %q", env.Namespace, env.Binding)
	}
	if _, err := os.Stat(env.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	guestbook := map[string]any{
		"apiVersion": "webapp.example.com/v1",
		"kind":       "Guestbook",
		"metadata":   map[string]any{"name": "gb", "namespace": "default"},
		"spec":       map[string]any{"frontend": map[string]any{"replicas": 2}},
	}
	if err := env.Create(ctx, guestbook); err != nil {
		t.Fatal(err)
	}
	var frontend appsv1.Deployment
	err := env.Eventually(60*time.Second, func() (bool, error) {
		return true, env.Get(ctx, "apps/v1", "Deployment", "default", "gb-frontend", &frontend)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, env.Log())
	}
	if frontend.Spec.Replicas == nil || *frontend.Spec.Replicas != 2 {
		t.Fatalf("frontend replicas: %v", frontend.Spec.Replicas)
	}
	owners := frontend.OwnerReferences
	if len(owners) != 1 || owners[0].Kind != "Guestbook" || owners[0].Name != "gb" {
		t.Fatalf("owner references: %+v", owners)
	}
	if err := env.Get(ctx, "apps/v1", "Deployment", "default", "nothing", &frontend); !errors.Is(err, gantrytest.ErrNotFound) {
		t.Fatalf("a missing Deployment: %v", err)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
}
