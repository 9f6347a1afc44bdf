// Package gantry is the Go SDK for Gantry reconcile plugins: the reconcile
// logic of a Kubernetes operator, built into a WebAssembly component that
// the Gantry host runs in a sandbox. The host does the watching, applying,
// pruning, status and finalizers; the plugin is a pure function from a
// [Request] to a [Response].
//
// A plugin is a main package that registers its reconciler in init:
//
//	package main
//
//	import (
//		gantry "gantry.dev/go-sdk"
//		corev1 "k8s.io/api/core/v1"
//		metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
//	)
//
//	type hello struct{}
//
//	func (hello) Reconcile(req *gantry.Request) (*gantry.Response, error) {
//		name, err := req.ParentName()
//		if err != nil {
//			return nil, err
//		}
//		cm := corev1.ConfigMap{
//			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
//			ObjectMeta: metav1.ObjectMeta{Name: name + "-hello"},
//		}
//		return gantry.NewResponse().Child(&cm), nil
//	}
//
//	func init() { gantry.Register(hello{}) }
//
//	func main() {}
//
// `gantry plugin build DIR` compiles it with the standard Go toolchain for
// GOOS=wasip1 GOARCH=wasm (-buildmode=c-shared) and turns the module into
// a component of the `reconciler` world (`reconciler-capable` when it
// uses gantry.dev/go-sdk/http or gantry.dev/go-sdk/metrics, the host's
// outbound HTTP and metrics). The same code runs natively under `go test`:
// build a request with [NewRequest] and call your reconciler.
//
// Admission policies use the package gantry.dev/go-sdk/policy instead,
// CRD converters gantry.dev/go-sdk/converter (a plugin uses one of the
// three).
package gantry
