package cmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/internal/buildinfo"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// VersionReport is what `kubectl mesh version -o json|yaml` prints.
type VersionReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	buildinfo.Info
}

// VersionOptions holds the flags of `kubectl mesh version`.
type VersionOptions struct {
	Output string
	genericiooptions.IOStreams
}

// NewVersionCmd builds `kubectl mesh version`.
func NewVersionCmd(streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{IOStreams: streams}
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date of kubectl-mesh",
		Example: `  kubectl mesh version
  kubectl mesh version -o json`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// Validate checks the flags.
func (o *VersionOptions) Validate() error { return validateOutput(o.Output) }

// Run prints the version.
func (o *VersionOptions) Run() error {
	info := buildinfo.Get()
	if o.Output != "" {
		return render.Structured(o.Out, o.Output, VersionReport{APIVersion: render.APIVersion, Kind: "Version", Info: info})
	}
	_, err := fmt.Fprintf(o.Out, "kubectl-mesh %s\n  commit:   %s\n  built:    %s\n  go:       %s\n  platform: %s\n",
		info.Version, info.Commit, info.Date, info.GoVersion, info.Platform)
	return err
}
