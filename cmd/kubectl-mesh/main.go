// Command kubectl-mesh is the kubectl plugin `kubectl mesh`.
package main

import (
	"os"
	"runtime/debug"

	"github.com/kubectl-mesh/kubectl-mesh/cmd"
)

func main() {
	// A soft heap limit: sweeping a large cluster stays small (the GC works
	// harder near the limit, it never fails because of it). GOMEMLIMIT wins.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(96 << 20)
	}
	os.Exit(cmd.Execute(os.Args[1:]))
}
