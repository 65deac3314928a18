package cmd

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/podstart"
	"github.com/kubectl-mesh/kubectl-mesh/engine/target"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"

	"github.com/kubectl-mesh/kubectl-mesh/internal/strs"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// StartupOptions holds the flags of `kubectl mesh startup`.
type StartupOptions struct {
	configFlags   *genericclioptions.ConfigFlags
	Selector      string
	AllNamespaces bool
	Output        string
	// FailOn is the status that exits 4, as diagnose's --fail-on.
	FailOn string
	Args   []string
	// SortBy orders a sweep's list (--sort-by, a JSONPath), sortBy parsed.
	SortBy string
	sortBy *sortBy

	namespace string
	client    *inspect.Client
	eng       *podstart.Engine
	genericiooptions.IOStreams
}

// NewStartupCmd builds `kubectl mesh startup`.
func NewStartupCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StartupOptions{configFlags: configFlags, IOStreams: streams}
	c := &cobra.Command{
		Use:   "startup [POD | TYPE/NAME | -l SELECTOR | -A]",
		Short: "Show how a pod's init containers and sidecars started, in what order, and what went wrong",
		Long: `Show a pod's startup: every init container's exit state (istio-init,
istio-validation: exit code, reason, restarts, the last lines of its log, known
failures recognised), the real start order of every container on a timeline,
native sidecars and holdApplicationUntilProxyStarts recognised, kubelet events
merged in, and the ordering hazards, each with its fix.

On top, diagnose's init and start checks on the pod: the same codes,
statuses and fixes as diagnose gives them.

For many pods (-n, -l, -A, a workload): one row per pod, worst first, with
those checks' status and first code.

Exit codes, as diagnose's over its init and start checks: 0 nothing failed
(warnings too, unless --fail-on warning); 4 a problem was found; 3 nothing
failed but an answer is unknown; 1 error; 2 usage error.`,
		Example: `  kubectl mesh startup reviews-v1-5f4d8b7c9-x2x8z -n bookinfo
  kubectl mesh startup deploy/reviews -n bookinfo
  kubectl mesh startup -A -o json`,
		RunE: func(c *cobra.Command, args []string) error {
			// Every flag is checked before the kubeconfig is read and
			// before any request.
			o.Args = args
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(args); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Show the pods matching this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Show every pod in the cluster")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml; name (each subject as KIND/NAME, as kubectl get -o name); or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	c.Flags().StringVar(&o.FailOn, "fail-on", diagnose.Fail, "The status that exits 4: fail, or warning (warnings fail too), as diagnose's")
	c.Flags().StringVar(&o.SortBy, "sort-by", "", sortByHelp)
	_ = c.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{diagnose.Fail, diagnose.Warning}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// Complete fills the options from the flags and the kubeconfig.
func (o *StartupOptions) Complete(args []string) error {
	o.Args = args
	var err error
	o.namespace, _, o.client, err = connect(o.configFlags)
	o.eng = &podstart.Engine{Client: o.client, Now: time.Now, AllNamespaces: o.AllNamespaces}
	return err
}

// Validate checks the flags.
func (o *StartupOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	if o.FailOn != diagnose.Fail && o.FailOn != diagnose.Warning {
		return usageErrorf("--fail-on must be fail or warning, not %q", o.FailOn)
	}
	var err error
	if o.sortBy, err = sweepSortBy(o.SortBy, o.Args, nil); err != nil {
		return err
	}
	switch {
	case len(o.Args) > 0 && (o.AllNamespaces || o.Selector != ""):
		return usageErrorf("give a POD or TYPE/NAME, or -l / -A, not both")
	case len(o.Args) > 2:
		return usageErrorf("expected POD, TYPE/NAME or TYPE NAME, got %d arguments", len(o.Args))
	}
	return validateSelector(o.Selector)
}

// Run reads the pods, their events and the failed containers' logs, and prints.
func (o *StartupOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(o.Args) > 0 {
		pods, single, err := target.Pods(ctx, o.configFlags, o.client, o.namespace, o.Args)
		if err != nil {
			return err
		}
		// One pod (also a workload's only pod) gets the detailed view.
		detail := len(pods) == 1
		podName := ""
		if detail {
			podName = pods[0].Name
		}
		events, incomplete, err := o.eng.Events(ctx, o.namespace, podName)
		if err != nil {
			return err
		}
		reports := make([]*startup.StartupReport, 0, len(pods))
		ds := make([]*diagnose.Diagnosis, 0, len(pods))
		for i := range pods {
			r := o.eng.Analyze(ctx, &pods[i], events, incomplete, detail)
			reports = append(reports, r)
			ds = append(ds, startupSlice(r, &pods[i], o.eng.Facts(ctx, &pods[i], r)))
		}
		return o.finish(single, detail, reports, ds)
	}

	// A sweep: the events are read while the pods stream in, and each pod
	// is analysed as it comes (only its report is kept). The first pod waits
	// for a second: a sweep that finds one pod shows it in detail.
	ns := o.namespace
	if o.AllNamespaces {
		ns = ""
	}
	ctx, cancel := context.WithCancel(ctx) // ends the pods' stream too, however the sweep ends
	defer cancel()
	pending := o.eng.EventsAsync(ctx, ns)
	defer pending.Stop()
	var held *corev1.Pod
	kept := newStartupSweep(o)
	seen := 0
	err := o.client.StreamPods(ctx, ns, o.Selector).Each(func(page []corev1.Pod) error {
		events, incomplete, err := pending.Wait()
		if err != nil {
			return err
		}
		for i := range page {
			seen++
			if seen == 1 {
				held = &page[i]
				continue
			}
			if held != nil {
				r := o.eng.Analyze(ctx, held, events, incomplete, false)
				if err := kept.add(r, held, o.eng.Facts(ctx, held, r)); err != nil {
					return err
				}
				held = nil
			}
			r := o.eng.Analyze(ctx, &page[i], events, incomplete, false)
			if err := kept.add(r, &page[i], o.eng.Facts(ctx, &page[i], r)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return inspect.ExplainAPIError(err, "list pods")
	}
	events, incomplete, err := pending.Wait()
	if err != nil {
		return err
	}
	if held != nil {
		r := o.eng.Analyze(ctx, held, events, incomplete, true)
		return o.finish(false, true, []*startup.StartupReport{r}, []*diagnose.Diagnosis{startupSlice(r, held, o.eng.Facts(ctx, held, r))})
	}
	if err := kept.print(); err != nil {
		return err
	}
	return kept.outcome.exit(kept.incomplete)
}

// finish prints the reports and exits by diagnose's rule over their init
// and start checks (ds): a problem found, else an incomplete answer.
func (o *StartupOptions) finish(single, detail bool, reports []*startup.StartupReport, ds []*diagnose.Diagnosis) error {
	if err := o.print(single, detail, reports, ds); err != nil {
		return err
	}
	x := outcome{failOn: o.FailOn}
	var incomplete []string
	for i, r := range reports {
		x.add(ds[i])
		if len(r.Incomplete) > 0 && incomplete == nil {
			incomplete = r.Incomplete
		}
	}
	return x.exit(incomplete)
}

func (o *StartupOptions) print(single, detail bool, reports []*startup.StartupReport, ds []*diagnose.Diagnosis) error {
	if o.Output != "" {
		if single {
			return render.Structured(o.Out, o.Output, render.StartupReportDoc{APIVersion: render.APIVersion, Kind: "StartupReport",
				StartupItem: render.StartupItem{StartupReport: reports[0], Diagnosis: ds[0]}})
		}
		items := make([]render.StartupItem, len(reports))
		for i := range reports {
			items[i] = render.StartupItem{StartupReport: reports[i], Diagnosis: ds[i]}
		}
		sort.SliceStable(items, func(i, j int) bool {
			a, b := startup.StartupSeverity(items[i].StartupReport), startup.StartupSeverity(items[j].StartupReport)
			if a != b {
				return a > b
			}
			return render.KeyBefore(items[i].Namespace, items[i].Name, items[j].Namespace, items[j].Name)
		})
		return render.List(o.Out, o.Output, "StartupReportList", len(items), func(i int) any { return items[i] })
	}
	for _, r := range reports {
		render.Sanitize(r)
	}
	p := render.NewPrinter(o.Out)
	if detail {
		if ds[0].Status != diagnose.Pass {
			// diagnose's first finding and its fix on top; a pass is
			// what the view below says.
			render.SliceAnswer(p, "Checks init and start", ds[0])
		}
		render.Startup(p, reports[0])
		return nil
	}
	if len(reports) == 0 {
		fmt.Fprintln(o.ErrOut, "No pods found.")
		return nil
	}
	render.StartupRows(p, reports, ds)
	var unknowns []string
	for _, r := range reports {
		unknowns = append(unknowns, r.Incomplete...)
	}
	render.Incomplete(p, strs.Dedupe(unknowns))
	return nil
}
