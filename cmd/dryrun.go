package cmd

import (
	"fmt"
	"io"
	"sync"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// Values of --dry-run, as kubectl's: none (the default) creates, client
// prints what would be created and creates nothing. A bare --dry-run is
// client.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
)

// addDryRunFlag adds --dry-run to a command that creates something in the
// cluster (an ephemeral container, node pods); what describes what it creates.
func addDryRunFlag(fs *pflag.FlagSet, p *string, what string) {
	fs.StringVar(p, "dry-run", dryRunNone, `Must be "none" or "client". If client, only print `+what+`, as YAML, without creating it (a bare --dry-run is client)`)
	fs.Lookup("dry-run").NoOptDefVal = dryRunClient
}

// validateDryRun checks --dry-run's value and that -o does not ask for
// another format: a dry run prints the objects as YAML.
func validateDryRun(v, output string) error {
	switch v {
	case dryRunNone, "":
		return nil
	case dryRunClient:
	case "server":
		return usageErrorf(`--dry-run=server is not supported: use --dry-run=client, which prints what would be created`)
	default:
		return usageErrorf(`invalid --dry-run value %q: must be "none" or "client"`, v)
	}
	if output != "" && output != render.YAML {
		return usageErrorf("--dry-run prints what would be created as YAML; -o %s is for the answer of a real run", output)
	}
	return nil
}

// dryRunPrinter prints each object it is given as a YAML document on w,
// separated by "---" as kubectl separates them.
func dryRunPrinter(w io.Writer) func(obj any) error {
	var mu sync.Mutex
	n := 0
	return func(obj any) error {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			if _, err := fmt.Fprintln(w, "---"); err != nil {
				return err
			}
		}
		n++
		_, err = w.Write(b)
		return err
	}
}
