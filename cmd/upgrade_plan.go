package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/upgrade"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	xupgrade "github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// UpgradePlanOptions holds the flags of `kubectl mesh upgrade-plan`.
type UpgradePlanOptions struct {
	configFlags   *genericclioptions.ConfigFlags
	To            string
	Selector      string
	AllNamespaces bool
	Output        string
	FailOn        string
	Args          []string

	namespace string
	client    *inspect.Client
	genericiooptions.IOStreams
}

// NewUpgradePlanCmd builds `kubectl mesh upgrade-plan`.
func NewUpgradePlanCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &UpgradePlanOptions{configFlags: configFlags, IOStreams: streams}
	c := &cobra.Command{
		Use:   "upgrade-plan --to REVISION|TAG [TYPE/NAME... | -l SELECTOR | -A]",
		Short: "Before moving workloads to another Istio revision: what each becomes when restarted, whether it starts, and the commands in a safe order",
		Long: `Plan the move of workloads to another Istio revision (a canary upgrade) or, without
--to, the restart under what selects each now (after a tag moved). Read-only: it
changes nothing.

For each workload (Deployment, StatefulSet, DaemonSet, CronJob, Job, and bare pods
applied with kubectl apply), the pod it has now is compared with the pod its
template becomes under the target: the target revision's real injector is asked
(as the apiserver asks it at admission, from its webhook's clientConfig), and the
injected pod is put through the admission chain with a dry-run create. Compared:
the sidecar, its revision, image and release, native or classic, hold, the init
containers, istio-init's arguments, DNS capture, the proxy's resources and the
probe rewrite. Whether it starts: admission's answer (PodSecurity, quotas,
LimitRanges, policies, the injector's own refusal), then the catalogue's checks
that read a pod's spec.

The plan lists the label changes first, then one restart per workload, those that
will not start first with their fix.

Exit codes, as diagnose's: 0 every workload starts; 4 one will not (or, with
--fail-on warning, one has a hazard); 3 whether one starts is unknown; 1 error;
2 usage error.`,
		Example: `  kubectl mesh upgrade-plan --to canary -n shop
  kubectl mesh upgrade-plan --to canary -A -o json
  kubectl mesh upgrade-plan -n shop            # after moving a tag: what each restart gives`,
		RunE: func(c *cobra.Command, args []string) error {
			o.Args = args
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringVar(&o.To, "to", "", "The revision or tag to move to (default: what selects each workload now)")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Plan the workloads whose pods match this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Plan every namespace")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml; name (each subject as KIND/NAME, as kubectl get -o name); or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	c.Flags().StringVar(&o.FailOn, "fail-on", diagnose.Fail, "The status that exits 4: fail, or warning (hazards fail too)")
	_ = c.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{diagnose.Fail, diagnose.Warning}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// Validate checks the flags before any request.
func (o *UpgradePlanOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	if o.FailOn != diagnose.Fail && o.FailOn != diagnose.Warning {
		return usageErrorf("--fail-on must be fail or warning, not %q", o.FailOn)
	}
	if len(o.Args) > 0 && o.AllNamespaces {
		return usageErrorf("give TYPE/NAME or -A, not both")
	}
	for _, a := range o.Args {
		kind, _, ok := strings.Cut(a, "/")
		if ok && planKind(kind) == "" {
			return usageErrorf("%q: upgrade-plan plans deployments, statefulsets, daemonsets, cronjobs, jobs and pods", a)
		}
	}
	return validateSelector(o.Selector)
}

// planKind is the kind a kubectl resource name stands for ("" for one
// upgrade-plan does not plan).
func planKind(s string) string {
	switch strings.ToLower(s) {
	case "deploy", "deployment", "deployments":
		return "Deployment"
	case "sts", "statefulset", "statefulsets":
		return "StatefulSet"
	case "ds", "daemonset", "daemonsets":
		return "DaemonSet"
	case "cj", "cronjob", "cronjobs":
		return "CronJob"
	case "job", "jobs":
		return "Job"
	case "po", "pod", "pods":
		return "Pod"
	}
	return ""
}

// Complete reads the kubeconfig.
func (o *UpgradePlanOptions) Complete() error {
	var err error
	o.namespace, _, o.client, err = connect(o.configFlags)
	return err
}

// Run plans and prints.
func (o *UpgradePlanOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var names []string
	for _, a := range o.Args {
		if kind, name, ok := strings.Cut(a, "/"); ok {
			names = append(names, planKind(kind)+"/"+name)
		} else {
			names = append(names, "pod/"+a)
		}
	}
	eng := &upgrade.Engine{Client: o.client}
	plan, err := eng.Plan(ctx, upgrade.Request{Namespace: o.namespace, AllNamespaces: o.AllNamespaces, Selector: o.Selector, Names: names, To: o.To})
	if err != nil {
		return err
	}
	if len(names) > 0 && len(plan.Workloads) == 0 && plan.Skipped == 0 {
		return fmt.Errorf("no such workload in namespace %s: %s", o.namespace, strings.Join(o.Args, ", "))
	}
	if o.Output != "" {
		if err := render.Structured(o.Out, o.Output, render.UpgradePlanDoc{APIVersion: render.APIVersion, Kind: "UpgradePlan", Plan: plan}); err != nil {
			return err
		}
	} else {
		render.UpgradePlan(render.NewPrinter(o.Out), plan)
	}
	return planExit(plan, o.FailOn)
}

// planExit exits by diagnose's rule: 4 when a workload will not start (or
// has a hazard, with --fail-on warning), 3 when whether one does is unknown.
func planExit(p *xupgrade.Plan, failOn string) error {
	var failed []string
	unknown := false
	for _, w := range p.Workloads {
		switch {
		case w.Starts == xupgrade.StartsNo, failOn == diagnose.Warning && w.Starts == xupgrade.StartsWarning:
			failed = append(failed, strings.ToLower(w.Kind)+" "+w.Namespace+"/"+w.Name)
		case w.Starts == xupgrade.StartsUnknown:
			unknown = true
		}
	}
	if len(failed) > 0 {
		more := ""
		if len(failed) > 3 {
			more = fmt.Sprintf(" and %d more", len(failed)-3)
			failed = failed[:3]
		}
		return &ProblemError{Err: fmt.Errorf("a workload will not start after the move: %s%s", strings.Join(failed, ", "), more)}
	}
	if unknown {
		return &IncompleteError{Err: fmt.Errorf("whether some workloads start after the move is unknown (see above)")}
	}
	return nil
}
