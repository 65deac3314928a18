// Command kubectl-mesh is the kubectl plugin `kubectl mesh`.
package main

import (
	"os"

	"github.com/kubectl-mesh/kubectl-mesh/cmd"
)

func main() {
	os.Exit(cmd.Execute(os.Args[1:]))
}
