// Package argv0 gives the program a name: the sandbox runs plugins without
// arguments, so os.Args is empty, and packages that read os.Args[0] while
// they initialize (k8s.io/klog, which k8s.io/apimachinery imports) panic.
//
// Go initializes packages in the order of their import paths among those
// whose imports are done: this one needs only os and sorts before
// "k8s.io/...", so it runs first.
package argv0

import "os"

func init() {
	if len(os.Args) == 0 {
		os.Args = []string{"gantry-plugin"}
	}
}
