package cmd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// shimScript is kubectl_complete-mesh: kubectl (1.26+) runs it to complete
// `kubectl mesh …`. The same file ships in the release archives.
const shimScript = `#!/bin/sh
# kubectl (1.26+) runs kubectl_complete-<plugin> from PATH to complete a
# plugin's arguments: ` + "`kubectl mesh <TAB>`" + ` ends up here.
exec kubectl mesh __complete "$@"
`

// addCompletionShim adds `kubectl mesh completion shim` under cobra's
// completion command, and completion of -n and --context values.
func addCompletionShim(root *cobra.Command, flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) {
	root.InitDefaultCompletionCmd()
	var completion *cobra.Command
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			completion = c
		}
	}
	if completion != nil {
		var install bool
		var dir string
		shim := &cobra.Command{
			Use:   "shim [--install [--dir DIR]]",
			Short: "Print (or install) kubectl_complete-mesh, which gives `kubectl mesh` completion inside kubectl's own",
			Long: `kubectl (1.26+) completes a plugin's arguments by running kubectl_complete-<plugin>
from PATH. This prints that script, or with --install writes it next to the
kubectl-mesh found on PATH (or into --dir), executable.`,
			Args: cobra.NoArgs,
			RunE: func(_ *cobra.Command, _ []string) error {
				if !install {
					_, err := fmt.Fprint(streams.Out, shimScript)
					return err
				}
				if dir == "" {
					found, err := exec.LookPath("kubectl-mesh")
					if err != nil {
						return fmt.Errorf("kubectl-mesh is not on PATH; give the directory with --dir")
					}
					dir = filepath.Dir(found)
				}
				path := filepath.Join(dir, "kubectl_complete-mesh")
				if err := os.WriteFile(path, []byte(shimScript), 0o755); err != nil {
					return err
				}
				_, err := fmt.Fprintf(streams.Out, "wrote %s\n", path)
				return err
			},
		}
		shim.Flags().BoolVar(&install, "install", false, "Write the script instead of printing it")
		shim.Flags().StringVar(&dir, "dir", "", "Directory to write it to (default: where kubectl-mesh is on PATH)")
		completion.AddCommand(shim)
	}
	_ = root.RegisterFlagCompletionFunc("namespace", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cfg, err := flags.ToRESTConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		client, err := metadataClient(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return filterPrefix(listNamespaces(client), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		raw, err := flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for n := range raw.Contexts {
			names = append(names, n)
		}
		return filterPrefix(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}

func filterPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if len(n) >= len(prefix) && n[:len(prefix)] == prefix {
			out = append(out, n)
		}
	}
	return out
}
