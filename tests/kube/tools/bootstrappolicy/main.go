// Command bootstrappolicy writes, as JSON on stdout, the RBAC objects
// kube-apiserver creates at start (its bootstrap policy), as the RBAC
// post-start hook gathers them: the cluster roles and bindings, the
// controllers' roles and bindings, and the roles and bindings of
// kube-system and kube-public. Used by scripts/kube-bootstrap-policy.
package main

import (
	"encoding/json"
	"os"

	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"
)

// typed gives each object of objects (a slice of RBAC objects) its kind.
func typed(objects any, kind string) []map[string]any {
	raw, err := json.Marshal(objects)
	if err != nil {
		panic(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	for _, o := range out {
		o["apiVersion"], o["kind"] = "rbac.authorization.k8s.io/v1", kind
	}
	return out
}

func main() {
	roles := map[string][]map[string]any{}
	for ns, r := range bootstrappolicy.NamespaceRoles() {
		roles[ns] = typed(r, "Role")
	}
	bindings := map[string][]map[string]any{}
	for ns, b := range bootstrappolicy.NamespaceRoleBindings() {
		bindings[ns] = typed(b, "RoleBinding")
	}
	p := map[string]any{
		"clusterRoles": typed(append(bootstrappolicy.ClusterRoles(), bootstrappolicy.ControllerRoles()...), "ClusterRole"),
		"clusterRoleBindings": typed(append(bootstrappolicy.ClusterRoleBindings(),
			bootstrappolicy.ControllerRoleBindings()...), "ClusterRoleBinding"),
		"roles":        roles,
		"roleBindings": bindings,
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(p); err != nil {
		panic(err)
	}
}
