package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/inject"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// WhyInjectedOptions holds the flags and state of `kubectl mesh why-injected`.
type WhyInjectedOptions struct {
	configFlags *genericclioptions.ConfigFlags

	Filenames     []string
	Selector      string
	AllNamespaces bool
	Output        string
	// All lists every factor, those with no effect too.
	All bool
	// Verify proves each answer with a server-side dry-run create.
	Verify bool
	// FailOn is the status that exits 4, as diagnose's --fail-on.
	FailOn string
	Args   []string

	// Watch re-prints a sweep's rows whose answer changes (-w).
	Watch bool
	// SortBy orders a sweep's list (--sort-by, a JSONPath), sortBy parsed.
	SortBy string
	sortBy *sortBy

	namespace  string
	explicitNS bool
	client     *inspect.Client
	// eng explains injection for the targets the flags name.
	eng *inject.Engine
	genericiooptions.IOStreams
}

// A list of reports is printed (streamed) as
//
//	{apiVersion, kind: InjectionReportList, items: [InjectionReport…],
//	 summary: [NamespaceSummary…] (namespace and cluster sweeps), incomplete: [string…]}

// NewWhyInjectedCmd builds `kubectl mesh why-injected`.
func NewWhyInjectedCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &WhyInjectedOptions{configFlags: configFlags, IOStreams: streams}
	c := &cobra.Command{
		Use:   "why-injected [POD | TYPE/NAME | -f FILE | -l SELECTOR | -A]",
		Short: "Explain whether pods are (or will be) injected with a sidecar, and why",
		Long: `Explain whether a pod was injected with the mesh's sidecar, whether it would be
if it were created now, and every factor that decides it: the namespace's and
the pod's labels as Istio's webhook selectors see them, which webhook the
apiserver calls, the injector's own checks (hostNetwork, ignored namespaces,
sidecar.istio.io/inject as the running Istio version parses it, never/always
inject selectors, policy), the webhook's backend, and ambient mode.

A pod, a workload (its pod template and its pods), or manifests before they are
applied (-f). Without a target: every pod of the namespace (-n, -l) or of the
cluster (-A), one row each, pods whose state differs from what they would get
if re-created first.

Exit codes, as diagnose's for its injection check (the same findings decide
both): 0 nothing failed (warnings too, unless --fail-on warning); 4 a problem
was found (a pod or template that cannot be created, a sidecar that differs
from what admission gives now, …); 3 nothing failed but an answer is
unknown; 1 error; 2 usage error.`,
		Example: `  # Why is (or isn't) this pod injected?
  kubectl mesh why-injected reviews-v1-5f4d8b7c9-x2x8z -n bookinfo

  # A deployment's pod template and its pods
  kubectl mesh why-injected deploy/reviews -n bookinfo

  # Manifests before they are applied
  kubectl mesh why-injected -f deployment.yaml

  # Every pod in the cluster: which ones need a restart?
  kubectl mesh why-injected -A`,
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("all") {
				// On stderr: the output may be JSON.
				fmt.Fprintln(o.ErrOut, "Warning: --all is deprecated, use --all-factors (in kubectl, --all means every resource)")
			}
			// Every flag is checked before the kubeconfig is read and
			// before any request.
			o.Args = args
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(args); err != nil {
				return err
			}
			ctx := c.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if o.Watch {
				// -w runs until Ctrl-C: it ends as kubectl's commands end (130).
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			return o.Run(ctx)
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Manifest file(s) to explain before they are applied (- for standard input)")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Explain the pods matching this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Explain every pod in the cluster")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml; name (each subject as KIND/NAME, as kubectl get -o name); or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	c.Flags().BoolVar(&o.All, "all-factors", false, "List every factor, also those with no effect (by default they are counted in one line per kind)")
	// --all means every resource in kubectl: the old name still works, and says so.
	c.Flags().BoolVar(&o.All, "all", false, "List every factor (the old name of --all-factors)")
	_ = c.Flags().MarkHidden("all")
	c.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After the sweep (-n, -l, -A), watch its pods and events and print each row whose answer changes, as kubectl get -w (Ctrl-C stops)")
	c.Flags().BoolVar(&o.Verify, "verify", false, "Prove each answer: create the pod as a server-side dry run (nothing is persisted) and show what admission did beside the prediction (needs create pods)")
	c.Flags().StringVar(&o.FailOn, "fail-on", diagnose.Fail, "The status that exits 4: fail, or warning (warnings fail too), as diagnose's")
	c.Flags().StringVar(&o.SortBy, "sort-by", "", sortByHelp)
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{diagnose.Fail, diagnose.Warning}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("filename", "yaml", "yml", "json")
	return c
}

// Complete fills the options from the flags and the kubeconfig.
func (o *WhyInjectedOptions) Complete(args []string) error {
	o.Args = args
	ns, explicit, client, err := connect(o.configFlags)
	if err != nil {
		return err
	}
	o.namespace, o.client, o.explicitNS = ns, client, explicit
	o.eng = o.newEngine()
	return nil
}

// newEngine is an engine for one run of the request (-w makes one a run).
func (o *WhyInjectedOptions) newEngine() *inject.Engine {
	return &inject.Engine{Flags: o.configFlags, Client: o.client, Mesh: injection.Istio{}, Namespace: o.namespace, ExplicitNamespace: o.explicitNS,
		Filenames: o.Filenames, Args: o.Args, Selector: o.Selector, AllNamespaces: o.AllNamespaces, In: o.In,
		KeepFactors: o.Output != "", Verify: o.Verify, Progress: dryRunProgress(o.ErrOut)}
}

// dryRunProgress shows --verify's dry runs on a terminal's stderr.
func dryRunProgress(errOut io.Writer) func(total int) (func(int), func()) {
	return func(total int) (func(int), func()) {
		pr := render.NewProgress(errOut, "dry runs (--verify)", total)
		return pr.Add, pr.Finish
	}
}

// Validate checks that the flags make sense together.
func (o *WhyInjectedOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	if o.FailOn != diagnose.Fail && o.FailOn != diagnose.Warning {
		return usageErrorf("--fail-on must be fail or warning, not %q", o.FailOn)
	}
	if o.Watch && (len(o.Filenames) > 0 || len(o.Args) > 0 || o.Verify) {
		return usageErrorf("--watch follows a sweep (-n, -l or -A): not with a POD, -f or --verify")
	}
	var err error
	if o.sortBy, err = sweepSortBy(o.SortBy, o.Args, o.Filenames); err != nil {
		return err
	}
	return validateTargets(o.Filenames, o.Args, o.Selector, o.AllNamespaces)
}

// validateTargets checks that the targets a command is given make sense
// together: -f, POD / TYPE/NAME, -l and -A.
func validateTargets(filenames, args []string, selector string, all bool) error {
	switch {
	case len(filenames) > 0 && len(args) > 0:
		return usageErrorf("give either -f or a POD / TYPE/NAME, not both")
	case len(filenames) > 0 && (all || selector != ""):
		return usageErrorf("-f cannot be combined with -A or -l")
	case len(args) > 0 && all:
		return usageErrorf("-A explains every pod; it takes no POD or TYPE/NAME")
	case len(args) > 0 && selector != "":
		return usageErrorf("-l selects pods; it takes no POD or TYPE/NAME")
	case len(args) > 2:
		return usageErrorf("expected POD, TYPE/NAME or TYPE NAME, got %d arguments", len(args))
	}
	if err := validateSelector(selector); err != nil {
		return err
	}
	return validateFiles(filenames)
}

// Run reads the cluster once, explains the targets and prints the answer.
func (o *WhyInjectedOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// A sweep's pods and FailedCreate events are read while the mesh's
	// configuration is (none of them needs the others to be asked for).
	var pre *inject.SweepReads
	if len(o.Filenames) == 0 && len(o.Args) == 0 {
		pre = o.eng.StartSweep(ctx)
		defer pre.Close()
	}
	facts, err := o.eng.MeshFacts(ctx)
	if err != nil {
		return err
	}
	var reports []*injection.InjectionReport
	// One pod (or one object of a file) prints one report; a workload, its
	// template and its pods; a sweep, a list with a summary, keeping only
	// what it prints of each pod (but for --verify, which proves the
	// reports first).
	var kept *injectionSweep
	list := true
	// Each report's exit by diagnose's rule, over its injection check (the
	// sweep's pods are given with their reports).
	x := outcome{failOn: o.FailOn}
	var pods []*corev1.Pod
	switch {
	case len(o.Filenames) > 0:
		reports, err = o.eng.FromFiles(ctx, facts)
		list = len(reports) != 1
	case len(o.Args) > 0:
		reports, err = o.eng.FromArgs(ctx, facts)
		list = len(reports) != 1 || reports[0].Kind != "Pod"
	case o.Verify:
		err = o.eng.Sweep(ctx, facts, pre, func(r *injection.InjectionReport, p *corev1.Pod) error {
			reports = append(reports, r)
			pods = append(pods, p)
			return nil
		})
	default:
		kept = o.newSweep(facts, false)
		err = o.eng.Sweep(ctx, facts, pre, func(r *injection.InjectionReport, p *corev1.Pod) error {
			d := injectionSlice(r, p, o.eng.InjectionTemplate(ctx, p))
			x.add(d)
			return kept.add(r, d)
		})
	}
	if err != nil {
		return err
	}
	if o.Verify {
		if err := o.eng.VerifyReports(ctx, reports); err != nil {
			return err
		}
		if pre != nil {
			kept = o.newSweep(facts, anyVerified(reports))
			for i, r := range reports {
				if err := kept.add(r, injectionSlice(r, pods[i], o.eng.InjectionTemplate(ctx, pods[i]))); err != nil {
					return err
				}
			}
		}
	}
	incomplete := inject.FactsIncomplete(facts)
	// Each report's slice, made with its pod (a named target's pods were
	// kept as read): what it shows and its exit, one answer with diagnose.
	var ds []*diagnose.Diagnosis
	if kept == nil {
		for i, r := range reports {
			p := o.eng.LivePod(r)
			if i < len(pods) {
				p = pods[i]
			}
			if len(o.Filenames) > 0 {
				ds = append(ds, manifestSlice(r, o.Filenames))
				continue
			}
			ds = append(ds, injectionSlice(r, p, o.eng.InjectionTemplate(ctx, p)))
		}
		refusedTemplates(reports)
		changedByAdmission(reports, ds)
	}
	if kept != nil {
		err = kept.print(incomplete)
	} else {
		err = o.print(reports, list, incomplete, ds...)
	}
	if err != nil {
		return err
	}
	if o.Watch {
		return o.watch(ctx, kept.sigs)
	}
	for _, d := range ds {
		x.add(d)
	}
	return x.exit(incomplete)
}

// newSweep keeps a sweep's reports for o's output.
func (o *WhyInjectedOptions) newSweep(facts *injection.ClusterFacts, verified bool) *injectionSweep {
	var p *render.Printer
	if o.Output == "" {
		p = render.NewPrinter(o.Out)
	}
	return newInjectionSweep(o, p, facts, verified)
}

// changedByAdmission puts into the verdict of a workload's template whose
// pods (the reports after it, with their slices ds) an admission mutator
// kept out of the mesh the finding diagnose makes of them (KM-INJ-017):
// the template alone says what the injector would do, not what admission
// does to its pods first.
func changedByAdmission(reports []*injection.InjectionReport, ds []*diagnose.Diagnosis) {
	for i, r := range reports {
		if r.Kind == "Pod" {
			continue
		}
		for j := i + 1; j < len(reports) && reports[j].Kind == "Pod"; j++ {
			for _, f := range ds[j].Findings {
				if f.Code == diagnose.CodeInjectLabelChanged && f.Status == diagnose.Fail {
					r.Verdict += " But admission changes its pods first (" + f.Code + "): " + f.Evidence
					if r.Fix == "" {
						r.Fix = f.Fix
					}
					return
				}
			}
		}
	}
}

// refusedTemplates puts into the verdict and fix of each template whose
// pods admission refuses now (by something other than the mesh's own
// webhooks) the finding diagnose makes of it: the same cause and fix.
func refusedTemplates(reports []*injection.InjectionReport) {
	for _, r := range reports {
		if r.Kind == "Pod" || r.RefusedBy == nil || r.CreationBlocked {
			continue
		}
		for _, f := range injectionSlice(r, nil).Findings {
			if f.Status == diagnose.Fail && f.Code == diagnose.CodeWorkloadShort {
				r.Verdict += " But admission refuses its pods now (" + f.Code + "): " + f.Evidence
				r.Fix = f.Fix
				break
			}
		}
	}
}
