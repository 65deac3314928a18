package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/meshversion"
	"github.com/kubectl-mesh/kubectl-mesh/internal/buildinfo"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// VersionReport is what `kubectl mesh version -o json|yaml` prints: the
// client's build, and (without --client) what the cluster runs.
type VersionReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	buildinfo.Info
	Cluster *meshversion.Report `json:"cluster,omitempty"`
}

// VersionOptions holds the flags of `kubectl mesh version`.
type VersionOptions struct {
	Output string
	Client bool

	configFlags *genericclioptions.ConfigFlags
	eng         *meshversion.Engine
	genericiooptions.IOStreams
}

// NewVersionCmd builds `kubectl mesh version`.
func NewVersionCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{configFlags: configFlags, IOStreams: streams}
	c := &cobra.Command{
		Use:   "version",
		Short: "Print kubectl-mesh's version, the server's Kubernetes, the mesh's revisions and its proxies' versions",
		Long: `Print kubectl-mesh's version and build, then, as kubectl version and istioctl version do,
what the cluster runs: the server's Kubernetes release, the mesh's control-plane revisions (the
release each runs, where that was read, whether kubectl-mesh models it, the tags pointing at it),
and the data plane: the injected pods counted by revision and proxy version. --client prints the
first part only, without a connection.`,
		Example: `  kubectl mesh version
  kubectl mesh version --client
  kubectl mesh version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml; or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	c.Flags().BoolVar(&o.Client, "client", false, "Print the client's version only (no connection to the cluster)")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// Validate checks the flags.
func (o *VersionOptions) Validate() error {
	if o.Output == render.Name {
		return usageErrorf("version has no subjects to name: -o json or yaml")
	}
	return validateOutput(o.Output)
}

// Complete connects, unless only the client's version is asked for.
func (o *VersionOptions) Complete() error {
	if o.Client {
		return nil
	}
	_, _, client, err := connect(o.configFlags)
	o.eng = &meshversion.Engine{Client: client}
	return err
}

// Run prints the version, then what the cluster runs.
func (o *VersionOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	info := buildinfo.Get()
	rep := VersionReport{APIVersion: render.APIVersion, Kind: "Version", Info: info}
	var err error
	if o.eng != nil {
		rep.Cluster, err = o.eng.Run(ctx)
	}
	if o.Output != "" {
		if err != nil {
			return err
		}
		return render.Structured(o.Out, o.Output, rep)
	}
	if _, werr := fmt.Fprintf(o.Out, "kubectl-mesh %s\n  commit:   %s\n  built:    %s\n  go:       %s\n  platform: %s\n",
		info.Version, info.Commit, info.Date, info.GoVersion, info.Platform); werr != nil {
		return werr
	}
	if err != nil {
		return err // as kubectl version: the client's part, then why the server's is missing
	}
	if rep.Cluster != nil {
		render.MeshVersion(render.NewPrinter(o.Out), rep.Cluster)
		if len(rep.Cluster.Incomplete) > 0 {
			return &IncompleteError{Err: fmt.Errorf("the answer is incomplete, some facts could not be read: %s", strings.Join(rep.Cluster.Incomplete, "; "))}
		}
	}
	return nil
}
