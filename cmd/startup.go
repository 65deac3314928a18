package cmd

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// StartupOptions holds the flags of `kubectl mesh startup`.
type StartupOptions struct {
	configFlags   *genericclioptions.ConfigFlags
	Selector      string
	AllNamespaces bool
	Output        string
	Args          []string

	namespace string
	client    *inspect.Client
	now       func() time.Time
	genericiooptions.IOStreams
}

// StartupReportDoc is one pod's report as printed with -o json|yaml.
type StartupReportDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*startup.StartupReport
}

// NewStartupCmd builds `kubectl mesh startup`.
func NewStartupCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &StartupOptions{configFlags: configFlags, IOStreams: streams, now: time.Now}
	c := &cobra.Command{
		Use:   "startup [POD | TYPE/NAME | -l SELECTOR | -A]",
		Short: "Show how a pod's init containers and sidecars started, in what order, and what went wrong",
		Long: `Show a pod's startup: every init container's exit state (istio-init,
istio-validation: exit code, reason, restarts, the last lines of its log, known
failures recognised), the real start order of every container on a timeline,
native sidecars and holdApplicationUntilProxyStarts recognised, kubelet events
merged in, and the ordering hazards, each with its fix.

For many pods (-n, -l, -A, a workload): one row per pod, worst first.`,
		Example: `  kubectl mesh startup reviews-v1-5f4d8b7c9-x2x8z -n bookinfo
  kubectl mesh startup deploy/reviews -n bookinfo
  kubectl mesh startup -A -o json`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Show the pods matching this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Show every pod in the cluster")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputJSON, outputYAML}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// Complete fills the options from the flags and the kubeconfig.
func (o *StartupOptions) Complete(args []string) error {
	o.Args = args
	var err error
	o.namespace, _, o.client, err = connect(o.configFlags)
	return err
}

// Validate checks the flags.
func (o *StartupOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	switch {
	case len(o.Args) > 0 && (o.AllNamespaces || o.Selector != ""):
		return usageErrorf("give a POD or TYPE/NAME, or -l / -A, not both")
	case len(o.Args) > 2:
		return usageErrorf("expected POD, TYPE/NAME or TYPE NAME, got %d arguments", len(o.Args))
	}
	return nil
}

// Run reads the pods, their events and the failed containers' logs, and prints.
func (o *StartupOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var pods []corev1.Pod
	single := false
	ns := o.namespace
	switch {
	case len(o.Args) > 0:
		var err error
		pods, single, err = o.resolve(ctx)
		if err != nil {
			return err
		}
	default:
		if o.AllNamespaces {
			ns = ""
		}
		err := o.client.EachPodPage(ctx, ns, o.Selector, func(page []corev1.Pod) error {
			pods = append(pods, page...)
			return nil
		})
		if err != nil {
			return explainAPIError(err, "list pods")
		}
	}
	evNS := ns
	if single || len(o.Args) > 0 {
		evNS = o.namespace
	}
	// One pod (also a workload's only pod) gets the detailed view.
	detail := len(pods) == 1
	podName := ""
	if detail {
		podName = pods[0].Name
	}
	events, err := o.client.PodEvents(ctx, evNS, podName)
	var notes []string
	if err != nil {
		if !apierrors.IsForbidden(err) {
			return err
		}
		notes = append(notes, "events unavailable: forbidden: the user may not list events")
	}
	now := o.now()
	reports := make([]*startup.StartupReport, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		facts := startup.StartupFacts{Pod: p, Events: events[string(p.UID)], Now: now}
		if ref := metav1.GetControllerOf(p); ref != nil {
			facts.OwnerKind = ref.Kind
		}
		if detail {
			facts.Logs = o.failedLogs(ctx, p)
		}
		r := startup.AnalyzeStartup(facts)
		if p.Spec.NodeName == "" {
			r.Notes = append(r.Notes, "not scheduled yet: no container has been created (see the events for why)")
		}
		r.Notes = append(r.Notes, notes...)
		reports = append(reports, r)
	}
	if o.Output != "" {
		if single {
			return printStructured(o.Out, o.Output, StartupReportDoc{APIVersion: ReportAPIVersion, Kind: "StartupReport", StartupReport: reports[0]})
		}
		sortStartup(reports)
		return printList(o.Out, o.Output, "StartupReportList", len(reports), func(i int) any { return reports[i] })
	}
	p := newPrinter(o.Out)
	if detail {
		printStartup(p, reports[0])
		return nil
	}
	if len(reports) == 0 {
		fmt.Fprintln(o.ErrOut, "No pods found.")
		return nil
	}
	printStartupRows(p, reports)
	return nil
}

// failedLogs reads the log tails of the init containers that failed and of
// containers that crash-loop: the only logs the report needs.
func (o *StartupOptions) failedLogs(ctx context.Context, p *corev1.Pod) map[string]startup.LogTail {
	logs := map[string]startup.LogTail{}
	check := func(sts []corev1.ContainerStatus) {
		for _, s := range sts {
			bad := s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 ||
				s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" ||
				s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0
			if bad {
				logs[s.Name] = o.client.LogTail(ctx, p, s.Name, s.RestartCount > 0, 20)
			}
		}
	}
	check(p.Status.InitContainerStatuses)
	check(p.Status.ContainerStatuses)
	return logs
}

// resolve turns POD, TYPE/NAME or TYPE NAME into pods; single is set for one pod.
func (o *StartupOptions) resolve(ctx context.Context) ([]corev1.Pod, bool, error) {
	infos, err := resolveArgs(o.configFlags, o.namespace, o.Args)
	if err != nil {
		return nil, false, err
	}
	var pods []corev1.Pod
	for _, info := range infos {
		u := info.Object.(*unstructured.Unstructured)
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, false, &UsageError{Err: fmt.Errorf("%s creates no pods", describe(u.Object))}
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, false, err
		}
		if p, ok := typed.(*corev1.Pod); ok {
			pods = append(pods, *p)
			continue
		}
		kind, name, _, _, selector, ok := podTemplate(typed)
		if !ok {
			return nil, false, &UsageError{Err: fmt.Errorf("%s creates no pods: startup shows pods and workloads with a pod template", describe(u.Object))}
		}
		if selector == nil {
			return nil, false, fmt.Errorf("%s %s has no pod selector: name one of its pods", kind, name)
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return nil, false, err
		}
		err = o.client.EachPodPage(ctx, info.Namespace, sel.String(), func(page []corev1.Pod) error {
			pods = append(pods, page...)
			return nil
		})
		if err != nil {
			return nil, false, explainAPIError(err, "list pods")
		}
		if len(pods) == 0 {
			return nil, false, fmt.Errorf("%s %s has no pods", kind, name)
		}
		return pods, false, nil
	}
	return pods, len(pods) == 1, nil
}

func sortStartup(rs []*startup.StartupReport) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := startup.StartupSeverity(rs[i]), startup.StartupSeverity(rs[j])
		if a != b {
			return a > b
		}
		if rs[i].Namespace != rs[j].Namespace {
			return rs[i].Namespace < rs[j].Namespace
		}
		return rs[i].Name < rs[j].Name
	})
}

func printStartupRows(p *printer, rs []*startup.StartupReport) {
	sortStartup(rs)
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		hazards := "-"
		if len(r.Hazards) > 0 {
			var ids []string
			for _, h := range r.Hazards {
				ids = append(ids, h.ID+"("+h.Container+")")
			}
			hazards = p.paint(injection.EffectWarning, strings.Join(ids, ", "))
		}
		init := r.InitResult
		if init == "failed" || init == "crash-looping" {
			init = p.paint(injection.EffectBlocks, init)
		}
		rows = append(rows, []string{escape(r.Namespace), escape(r.Name), r.Phase, init, escape(strings.Join(r.StartOrder, ",")), hazards})
	}
	p.table([]string{"NAMESPACE", "POD", "PHASE", "INIT", "START ORDER", "HAZARDS"}, rows)
}

func fmtOffset(t *time.Time, origin time.Time) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("+%.1fs", t.Sub(origin).Seconds())
}

func exitOf(cs startup.ContainerStartup) string {
	if cs.ExitCode == nil {
		return "-"
	}
	return fmt.Sprint(*cs.ExitCode)
}

// printStartup prints one pod: its containers, the timeline, hazards and events.
func printStartup(p *printer, r *startup.StartupReport) {
	origin := r.CreatedAt
	fmt.Fprintf(p.out, "Pod %s/%s: %s on %s, created %s\n", escape(r.Namespace), escape(r.Name), r.Phase, dash(r.Node), origin.UTC().Format(time.RFC3339))
	mode := "classic sidecar"
	switch {
	case r.Mesh == "":
		mode = "no sidecar"
	case r.Native:
		mode = "native sidecar"
	case r.Hold:
		mode = "classic sidecar, app held until the proxy is ready"
	}
	fmt.Fprintf(p.out, "Mesh: %s (%s); init: %s; order: %s\n\n", dash(r.Mesh), mode, r.InitResult, r.OrderVerdict)
	row := func(cs startup.ContainerStartup) []string {
		state := cs.State
		if cs.Reason != "" {
			state += " (" + cs.Reason + ")"
		}
		last := "-"
		if lt := cs.LastTermination; lt != nil {
			last = fmt.Sprintf("exit %d %s", lt.ExitCode, lt.Reason)
		}
		ready := "no"
		if cs.Ready {
			ready = "yes"
		}
		return []string{cs.Name, cs.Role, escape(state), exitOf(cs), fmtOffset(cs.StartedAt, origin), fmtOffset(cs.FinishedAt, origin), ready, fmt.Sprint(cs.Restarts), last}
	}
	var rows [][]string
	for _, cs := range r.InitContainers {
		rows = append(rows, row(cs))
	}
	p.table([]string{"INIT CONTAINER", "ROLE", "STATE", "EXIT", "STARTED", "FINISHED", "READY", "RESTARTS", "LAST TERMINATION"}, rows)
	fmt.Fprintln(p.out)
	rows = nil
	for _, cs := range r.Containers {
		rows = append(rows, row(cs))
	}
	p.table([]string{"CONTAINER", "ROLE", "STATE", "EXIT", "STARTED", "FINISHED", "READY", "RESTARTS", "LAST TERMINATION"}, rows)
	for _, cs := range append(append([]startup.ContainerStartup{}, r.InitContainers...), r.Containers...) {
		if cs.Failure != "" {
			fmt.Fprintf(p.out, "\n%s %s: %s\n", p.paint(injection.EffectBlocks, "failure"), cs.Name, escape(cs.Failure))
		}
		if cs.Log != nil {
			if cs.Log.Unavailable != "" {
				fmt.Fprintf(p.out, "\nlog of %s unavailable: %s\n", cs.Name, escape(cs.Log.Unavailable))
			}
			for _, part := range []struct {
				name  string
				lines []string
			}{{"previous run", cs.Log.Previous}, {"current run", cs.Log.Current}} {
				if len(part.lines) == 0 {
					continue
				}
				fmt.Fprintf(p.out, "\nlast lines of %s (%s):\n", cs.Name, part.name)
				for _, l := range part.lines {
					fmt.Fprintf(p.out, "  | %s\n", escape(l))
				}
			}
		}
	}
	fmt.Fprintf(p.out, "\n%s (0s = pod created; start order: %s)\n", p.bold("Timeline"), strings.Join(r.StartOrder, " → "))
	fmt.Fprintln(p.out, "# ran and finished, = running, x failed, * restarted, R ready, > still running")
	printTimeline(p, r, origin)
	if len(r.Hazards) > 0 {
		fmt.Fprintf(p.out, "\n%s\n", p.bold("Hazards"))
		for _, h := range r.Hazards {
			fmt.Fprintf(p.out, "  %s %s (%s): %s\n    fix: %s\n", p.paint(injection.EffectWarning, "!"), h.ID, h.Container, escape(h.Message), escape(h.Fix))
		}
	}
	if len(r.Events) > 0 {
		fmt.Fprintf(p.out, "\n%s\n", p.bold("Events"))
		var rows [][]string
		for _, e := range r.Events {
			rows = append(rows, []string{fmtOffset(&e.Time, origin), e.Reason, dash(e.Container), fmt.Sprintf("%d", e.Count), escape(truncate(e.Message, 120))})
		}
		p.table([]string{"AT", "REASON", "CONTAINER", "COUNT", "MESSAGE"}, rows)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(p.out, "\nnote: %s\n", escape(n))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// printTimeline draws one bar per container on a common time axis: '#' a
// completed run, '=' running, 'x' the end of a failed run, '*' the start of
// the latest restart, 'R' when it became ready (when known), '>' still
// running past the axis.
func printTimeline(p *printer, r *startup.StartupReport, origin time.Time) {
	const width = 48
	end := origin
	all := append(append([]startup.ContainerStartup{}, r.InitContainers...), r.Containers...)
	for _, cs := range all {
		var lastEnd *time.Time
		if cs.LastTermination != nil {
			lastEnd = cs.LastTermination.FinishedAt
		}
		for _, t := range []*time.Time{cs.FirstStartedAt, cs.StartedAt, cs.FinishedAt, cs.ReadyAt, lastEnd} {
			if t != nil && t.After(end) {
				end = *t
			}
		}
	}
	span := end.Sub(origin)
	if span <= 0 {
		span = time.Second
	}
	pos := func(t time.Time) int {
		i := int(float64(width-1) * float64(t.Sub(origin)) / float64(span))
		return min(max(i, 0), width-1)
	}
	nameWidth := len("CONTAINER")
	for _, cs := range all {
		nameWidth = max(nameWidth, len(cs.Name))
	}
	label := fmt.Sprintf("%.1fs", span.Seconds())
	fmt.Fprintf(p.out, "%-*s   %s%s%s\n", nameWidth, "CONTAINER", " 0s", strings.Repeat(" ", width-len(label)-1), label)
	for _, cs := range all {
		bar := []rune(strings.Repeat(" ", width))
		style := injection.EffectInfoOnly
		if cs.FirstStartedAt != nil {
			from := pos(*cs.FirstStartedAt)
			to := width - 1
			fill := '='
			failedRun := cs.ExitCode != nil && *cs.ExitCode != 0
			switch {
			case cs.FinishedAt != nil:
				to, fill = pos(*cs.FinishedAt), '#'
			case cs.State == "waiting" && cs.LastTermination != nil && cs.LastTermination.FinishedAt != nil:
				// Waiting to restart: the bar ends where the last run ended.
				to, fill = pos(*cs.LastTermination.FinishedAt), '#'
				failedRun = cs.LastTermination.ExitCode != 0
			}
			for i := from; i <= to; i++ {
				bar[i] = fill
			}
			switch {
			case failedRun:
				bar[to] = 'x'
				style = injection.EffectBlocks
			case cs.FinishedAt == nil && cs.State == "running":
				bar[width-1] = '>'
				style = injection.EffectInject
			}
			if cs.Restarts > 0 && cs.StartedAt != nil {
				bar[pos(*cs.StartedAt)] = '*'
			}
			if cs.ReadyAt != nil {
				bar[pos(*cs.ReadyAt)] = 'R'
			}
		}
		detail := cs.State
		if cs.Reason != "" {
			detail += " (" + cs.Reason + ")"
		}
		if cs.Restarts > 0 {
			detail += fmt.Sprintf(", %d restarts", cs.Restarts)
		}
		fmt.Fprintf(p.out, "%-*s   |%s|   %s\n", nameWidth, escape(cs.Name), p.paint(style, string(bar)), escape(detail))
	}
}
