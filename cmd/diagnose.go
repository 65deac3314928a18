package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/inject"
	"github.com/kubectl-mesh/kubectl-mesh/engine/podstart"
	"github.com/kubectl-mesh/kubectl-mesh/engine/rules"
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// DiagnoseOptions holds the flags of `kubectl mesh diagnose`.
type DiagnoseOptions struct {
	configFlags   *genericclioptions.ConfigFlags
	Filenames     []string
	Selector      string
	AllNamespaces bool
	Output        string
	// Verify proves the injection answer with a dry-run create.
	Verify bool
	// Rules reads the pods' live capture rules; Connections their live
	// flows too (it implies Rules).
	Rules, Connections bool
	Via, Image, NodeNS string
	viaSet             bool
	Timeout            time.Duration
	// FailOn is the worst status that still exits 0: fail (the default)
	// or warning.
	FailOn string
	Args   []string

	namespace string
	client    *inspect.Client
	inj       *inject.Engine
	starts    *podstart.Engine
	genericiooptions.IOStreams
}

// CheckCount counts one check's statuses over a list of diagnoses; First
// is how many have it as their first failing (or warning) check.
type CheckCount struct {
	Name       string `json:"name"`
	First      int    `json:"first"`
	Pass       int    `json:"pass"`
	Warning    int    `json:"warning"`
	Fail       int    `json:"fail"`
	Unknown    int    `json:"unknown"`
	NotChecked int    `json:"notChecked"`
}

// A list of diagnoses is printed as
//
//	{apiVersion, kind: DiagnosisList, items: [Diagnosis…], summary: [CheckCount…], incomplete: [string…]}

// NewDiagnoseCmd builds `kubectl mesh diagnose`.
func NewDiagnoseCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &DiagnoseOptions{configFlags: configFlags, IOStreams: streams}
	c := &cobra.Command{
		Use:   "diagnose [POD | TYPE/NAME | -f FILE | -l SELECTOR | -A]",
		Short: "Walk a pod's data-plane setup in the order it happens and stop at the first thing that broke",
		Long: `Answer "what is wrong with this pod?": every check of its data-plane setup,
in the order things happen to a pod, the first failing one and its fix on top.

  injection    injected as expected? (a mismatch, refused at admission, the
               wrong revision) — as why-injected answers; --verify adds the
               proof of a dry-run create
  init         istio-init, istio-validation or ambient mode's CNI setup
  start        the proxy started and ready, before the app where it must be
  capture      the live rules against what the pod's arguments call for
               (--rules: reads the pod's network namespace)
  connections  live flows that bypass the proxy (--connections)

Each check is pass, warning, fail, unknown (a fact could not be read; the
permission that would settle it is named) or not checked. Then, for each
check that did not pass, the kubectl-mesh command that shows it in full.

For many pods (a workload, -n, -l, -A): one row per pod, worst first,
grouped by the first failing check, and a count per check. --rules then
reads every pod of a node with one short-lived node pod (never an ephemeral
container per pod).

Exit codes: 0 every check that ran passed (warnings too, unless
--fail-on warning); 4 a check failed; 3 nothing failed but an answer is
unknown; 1 error; 2 usage error.`,
		Example: `  # What is wrong with this pod?
  kubectl mesh diagnose reviews-v1-5f4d8b7c9-x2x8z -n bookinfo

  # ... its live rules and connections too
  kubectl mesh diagnose reviews-v1-5f4d8b7c9-x2x8z -n bookinfo --connections

  # Every pod of the cluster, worst first; fail a CI gate on any problem
  kubectl mesh diagnose -A || echo "exit $?"`,
		RunE: func(c *cobra.Command, args []string) error {
			o.viaSet = c.Flags().Changed("via")
			if o.viaSet {
				o.Rules = true // --via says how to read the rules: it asks for them
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			err := o.Run(ctx)
			if err != nil && ctx.Err() != nil {
				return &InterruptedError{Err: fmt.Errorf("interrupted (every node pod created has been deleted)")}
			}
			return err
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Manifest file(s) to diagnose before they are applied: admission only (- for standard input)")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Diagnose the pods matching this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Diagnose every pod in the cluster")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml")
	c.Flags().BoolVar(&o.Verify, "verify", false, "Prove the injection answer with a server-side dry-run create (needs create pods)")
	c.Flags().BoolVar(&o.Rules, "rules", false, "Read the live capture rules and compare them with what the pod's arguments call for (one pod: an ephemeral container, or --via node; many: one node pod per node)")
	c.Flags().BoolVar(&o.Connections, "connections", false, "Read the live connections too and find flows that bypass the proxy (implies --rules)")
	c.Flags().StringVar(&o.Via, "via", nsexec.ViaEphemeral, "How the rules of one pod are read (implies --rules): ephemeral or node")
	c.Flags().StringVar(&o.Image, "image", "", "Image with iptables to read the rules with (default: the pod's proxy image)")
	c.Flags().StringVar(&o.NodeNS, "node-namespace", "default", "Namespace for node pods")
	c.Flags().DurationVar(&o.Timeout, "timeout", 60*time.Second, "How long to wait for a dump of the rules")
	c.Flags().StringVar(&o.FailOn, "fail-on", diagnose.Fail, "The status that exits 4: fail, or warning (warnings fail too)")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("via", cobra.FixedCompletions([]string{nsexec.ViaEphemeral, nsexec.ViaNode}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("fail-on", cobra.FixedCompletions([]string{diagnose.Fail, diagnose.Warning}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("filename", "yaml", "yml", "json")
	return c
}

// Complete fills the options from the flags and the kubeconfig; the
// subjects' options read with the same client.
func (o *DiagnoseOptions) Complete(args []string) error {
	o.Args = args
	if o.Connections {
		o.Rules = true
	}
	ns, explicit, client, err := connect(o.configFlags)
	if err != nil {
		return err
	}
	o.namespace, o.client = ns, client
	o.inj = &inject.Engine{Flags: o.configFlags, Client: client, Mesh: injection.Istio{}, Namespace: ns, ExplicitNamespace: explicit,
		Filenames: o.Filenames, Args: args, Selector: o.Selector, AllNamespaces: o.AllNamespaces, In: o.In, Verify: o.Verify}
	o.starts = &podstart.Engine{Client: client, Now: time.Now}
	return nil
}

// Validate checks the flags.
func (o *DiagnoseOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	switch {
	case o.FailOn != diagnose.Fail && o.FailOn != diagnose.Warning:
		return usageErrorf("--fail-on must be fail or warning, not %q", o.FailOn)
	case o.Via != nsexec.ViaEphemeral && o.Via != nsexec.ViaNode:
		return usageErrorf("--via %q: ephemeral or node", o.Via)
	case o.Timeout <= 0:
		return usageErrorf("--timeout must be positive")
	case len(o.Filenames) > 0 && o.Rules:
		return usageErrorf("--rules and --connections read running pods; a manifest (-f) has none")
	case len(o.Args) == 0 && o.viaSet && o.Via == nsexec.ViaEphemeral:
		return usageErrorf("--rules over many pods reads every pod of a node with one node pod; --via ephemeral is for one POD")
	}
	return validateTargets(o.Filenames, o.Args, o.Selector, o.AllNamespaces)
}

// item is one diagnosis with what it was made from, kept until every fact
// it needs is read.
type item struct {
	facts diagnose.Facts
	pod   *corev1.Pod
}

// Run reads the facts, composes the diagnoses and prints them.
func (o *DiagnoseOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(o.Filenames) == 0 && len(o.Args) == 0 {
		return o.sweep(ctx)
	}
	facts, err := o.inj.MeshFacts(ctx)
	if err != nil {
		return err
	}
	var reports []*injection.InjectionReport
	if len(o.Filenames) > 0 {
		reports, err = o.inj.FromFiles(ctx, facts)
	} else {
		reports, err = o.inj.FromArgs(ctx, facts)
	}
	if err != nil {
		return err
	}
	incomplete := inject.FactsIncomplete(facts)

	// The pods of the reports: their startup, and with --rules their rules.
	var podReports []*injection.InjectionReport
	for _, r := range reports {
		if r.Kind == "Pod" && len(o.Filenames) == 0 {
			podReports = append(podReports, r)
		}
	}
	pods, err := o.podsOf(ctx, podReports)
	if err != nil {
		return err
	}
	single := len(o.Filenames) == 0 && len(reports) == 1 && reports[0].Kind == "Pod"
	var items []*item
	if len(podReports) > 0 {
		name := ""
		if single {
			name = podReports[0].Name
		}
		events, evIncomplete, err := o.starts.Events(ctx, podReports[0].Namespace, name)
		if err != nil {
			return err
		}
		incomplete = append(incomplete, evIncomplete...)
		for i, r := range podReports {
			it := &item{pod: pods[i], facts: diagnose.Facts{Injection: r}}
			if pods[i] == nil {
				it.facts.NoPod = "the pod was deleted meanwhile"
			} else {
				// Named pods: the logs of their failing containers are read,
				// so that the finding names the cause.
				it.facts.Startup = o.starts.Analyze(ctx, pods[i], events, evIncomplete, true)
			}
			items = append(items, it)
		}
	}
	for _, r := range reports {
		switch {
		case len(o.Filenames) > 0:
			items = append(items, &item{facts: diagnose.Facts{Injection: r, NoPod: "a manifest, not created yet: its pods are checked once they run"}})
		case r.Kind != "Pod" && r.CreationBlocked:
			// Its new pods are refused (its old ones, if any, are above).
			items = append(items, &item{facts: diagnose.Facts{Injection: r, NoPod: "admission refuses the pods of its template: none was created from it"}})
		case r.Kind != "Pod" && len(podReports) == 0:
			items = append(items, &item{facts: diagnose.Facts{Injection: r, NoPod: "it has no pods"}})
		}
	}
	// --via ephemeral reads one pod: refused for several before any dry
	// run, ephemeral container or node pod.
	if running := runningPods(items); o.Rules && o.viaSet && o.Via == nsexec.ViaEphemeral && running > 1 {
		return usageErrorf("--via ephemeral reads one pod; %d running pods are selected: without --via, one node pod per node reads them all", running)
	}
	if o.Verify {
		if err := o.inj.VerifyReports(ctx, reports); err != nil {
			return err
		}
	}
	if o.Rules {
		if err := o.readRules(ctx, items, single); err != nil {
			return err
		}
	}
	ds := make([]*diagnose.Diagnosis, 0, len(items))
	for _, it := range items {
		d := diagnose.Diagnose(it.facts)
		if len(o.Filenames) > 0 {
			// A manifest is not in the cluster: why-injected reads the file.
			d.Checks[0].Detail = "kubectl mesh why-injected -f " + strings.Join(o.Filenames, " -f ")
		}
		ds = append(ds, d)
	}
	return o.finish(ds, !single, dedupe(incomplete))
}

// rulesSkipped says why --rules reads no rules of an item's pod, "" when
// it reads them.
func rulesSkipped(it *item) string {
	p := it.pod
	switch {
	case p.Spec.HostNetwork:
		return "the pod uses the node's network (hostNetwork): it has no rules of its own"
	case rules.MeshOf(p) == "none" && (it.facts.Injection == nil || !it.facts.Injection.Ambient):
		return "not in the mesh (no sidecar, not in ambient mode): no capture rules are called for"
	case p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "":
		return fmt.Sprintf("the pod is %s, not Running: its rules are read once it runs", render.Dash(string(p.Status.Phase)))
	}
	return ""
}

// runningPods counts the items' pods whose rules --rules reads.
func runningPods(items []*item) int {
	n := 0
	for _, it := range items {
		if it.pod != nil && rulesSkipped(it) == "" {
			n++
		}
	}
	return n
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// podsOf reads the pods the reports are about, in their order: one GET for
// one pod, else one list of their namespace.
func (o *DiagnoseOptions) podsOf(ctx context.Context, reports []*injection.InjectionReport) ([]*corev1.Pod, error) {
	if len(reports) == 0 {
		return nil, nil
	}
	ns := reports[0].Namespace
	if len(reports) == 1 {
		p, err := o.client.Kube.CoreV1().Pods(ns).Get(ctx, reports[0].Name, metav1.GetOptions{})
		if err != nil {
			return nil, inspect.ExplainAPIError(err, "get pods")
		}
		return []*corev1.Pod{p}, nil
	}
	byName := map[string]*corev1.Pod{}
	err := o.client.EachPodPage(ctx, ns, "", func(page []corev1.Pod) error {
		for i := range page {
			byName[page[i].Name] = &page[i]
		}
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	out := make([]*corev1.Pod, 0, len(reports))
	for _, r := range reports {
		out = append(out, byName[r.Name]) // nil: deleted meanwhile
	}
	return out, nil
}

// sweep diagnoses every pod of the namespace (-n, -l) or the cluster (-A):
// one list of the pods shared by both subjects, the FailedCreate events
// (why-injected) and the pods' events (startup) read meanwhile.
func (o *DiagnoseOptions) sweep(ctx context.Context) error {
	pre := o.inj.StartSweep(ctx)
	defer pre.Close()
	ns := o.inj.SweepNamespace()
	var events map[string][]corev1.Event
	var evIncomplete []string
	var evErr error
	evDone := make(chan struct{})
	evCtx, cancel := context.WithCancel(ctx)
	go func() {
		defer close(evDone)
		events, evIncomplete, evErr = o.starts.Events(evCtx, ns, "")
	}()
	defer func() { cancel(); <-evDone }()

	facts, err := o.inj.MeshFacts(ctx)
	if err != nil {
		return err
	}
	// Verify and --rules diagnose once every report and rule is read;
	// otherwise each pod's diagnosis is made as it comes, and only it is kept.
	keepFacts := o.Verify || o.Rules
	var items []*item
	kept := newDiagnoseSweep(o)
	err = o.inj.Sweep(ctx, facts, pre, func(r *injection.InjectionReport, p *corev1.Pod) error {
		it := item{facts: diagnose.Facts{Injection: r}}
		if p == nil {
			it.facts.NoPod = "admission refuses its pods: none was created"
		} else {
			<-evDone
			if evErr != nil {
				return evErr
			}
			it.facts.Startup = o.starts.Analyze(ctx, p, events, evIncomplete, false)
		}
		if keepFacts {
			if p != nil && o.Rules {
				pod := *p
				it.pod = &pod
			}
			items = append(items, &it)
			return nil
		}
		return kept.add(diagnose.Diagnose(it.facts))
	})
	if err != nil {
		return err
	}
	<-evDone
	if evErr != nil {
		return evErr
	}
	if o.Verify {
		reports := make([]*injection.InjectionReport, 0, len(items))
		for _, it := range items {
			reports = append(reports, it.facts.Injection)
		}
		if err := o.inj.VerifyReports(ctx, reports); err != nil {
			return err
		}
	}
	if o.Rules {
		if err := o.readRules(ctx, items, false); err != nil {
			return err
		}
	}
	for _, it := range items {
		if err := kept.add(diagnose.Diagnose(it.facts)); err != nil {
			return err
		}
	}
	incomplete := dedupe(append(inject.FactsIncomplete(facts), evIncomplete...))
	if err := kept.print(incomplete); err != nil {
		return err
	}
	return kept.outcome.exit(incomplete)
}

// readRules reads the live rules (and with --connections the flows) of the
// items' running pods: of one pod through an ephemeral container (or a node
// pod with --via node), of many with one node pod per node.
func (o *DiagnoseOptions) readRules(ctx context.Context, items []*item, one bool) error {
	byNode := map[string][]*corev1.Pod{}
	itemOf := map[string]*item{}
	for _, it := range items {
		p := it.pod
		if p == nil {
			continue
		}
		if skipped := rulesSkipped(it); skipped != "" {
			it.facts.CaptureSkipped = skipped
		} else {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			itemOf[p.Namespace+"/"+p.Name] = it
		}
		it.facts.Connections = o.Connections
	}
	if len(itemOf) == 0 {
		return nil
	}
	if len(itemOf) == 1 && (one || o.viaSet) {
		for _, it := range itemOf {
			return o.readOne(ctx, it)
		}
	}
	if o.viaSet && o.Via == nsexec.ViaEphemeral {
		return usageErrorf("--via ephemeral reads one pod; %d running pods are selected: without --via, one node pod per node reads them all", len(itemOf))
	}
	progress := newProgress(o.ErrOut, len(byNode), len(itemOf))
	lines, _, err := rules.Audit(ctx, o.client, byNode, rules.AuditOptions{Image: o.Image, NodeNamespace: o.NodeNS, Timeout: o.Timeout,
		Connections: o.Connections, Done: progress.done})
	progress.clear()
	if err != nil {
		return err
	}
	for _, l := range lines {
		it := itemOf[l.Namespace+"/"+l.Pod]
		switch {
		case it == nil:
		case l.Error != "":
			it.facts.CaptureUnknown = "the rules could not be read: " + l.Error
			if l.Needs != "" {
				it.facts.CaptureNeeds = []string{l.Needs}
			}
		case l.Report == nil:
			// Read, and no table holds a rule.
			it.facts.Capture = rules.NoRules(it.pod, capture.CaptureInput{})
		default:
			it.facts.Capture = l.Report
		}
	}
	return nil
}

// readOne reads one pod's rules the way `kubectl mesh iptables POD` does.
func (o *DiagnoseOptions) readOne(ctx context.Context, it *item) error {
	read, err := rules.ReadPod(ctx, o.client, rules.Request{Pod: it.pod, Via: o.Via, Image: o.Image, NodeNamespace: o.NodeNS,
		Timeout: o.Timeout, Connections: o.Connections})
	var rep *capture.CaptureReport
	if err == nil {
		rep, err = capture.ExplainCapture(read.Input)
	}
	var perm *nsexec.PermissionError
	switch {
	case ctx.Err() != nil:
		return err
	case errors.As(err, &perm):
		it.facts.CaptureUnknown, it.facts.CaptureNeeds = "the rules could not be read: "+perm.Msg, []string{perm.Need}
	case err != nil:
		it.facts.CaptureUnknown = "the rules could not be read: " + err.Error()
	default:
		rep.Live = &capture.LiveSource{Namespace: it.pod.Namespace, Pod: it.pod.Name, Via: read.Result.Via, Container: read.Result.Container, Backend: read.Backend}
		it.facts.Capture = rep
	}
	return nil
}

// finish prints the diagnoses and picks the exit: a problem found (4), else
// an unknown answer (3), else 0.
func (o *DiagnoseOptions) finish(ds []*diagnose.Diagnosis, list bool, incomplete []string) error {
	sortDiagnoses(ds)
	if err := o.print(ds, list, incomplete); err != nil {
		return err
	}
	var x outcome
	for _, d := range ds {
		x.add(o, d)
	}
	return x.exit(incomplete)
}

// outcome is what decides the exit of a diagnosis, counted as they come.
type outcome struct {
	failed  []string // the first three problems found
	nFailed int
	unknown bool
}

func (x *outcome) add(o *DiagnoseOptions, d *diagnose.Diagnosis) {
	switch {
	case d.Status == diagnose.Fail, o.FailOn == diagnose.Warning && warned(d):
		x.nFailed++
		if len(x.failed) < 3 {
			x.failed = append(x.failed, fmt.Sprintf("%s %s/%s (%s)", strings.ToLower(d.WorkloadKind), d.Namespace, d.Name, d.First))
		}
	case d.Status == diagnose.Unknown:
		x.unknown = true
	}
}

// warned: a check of d warned (whatever else is unknown).
func warned(d *diagnose.Diagnosis) bool {
	for _, c := range d.Checks {
		if c.Status == diagnose.Warning {
			return true
		}
	}
	return false
}

func (x *outcome) exit(incomplete []string) error {
	if x.nFailed > 0 {
		more := ""
		if x.nFailed > len(x.failed) {
			more = fmt.Sprintf(" and %d more", x.nFailed-len(x.failed))
		}
		return &ProblemError{Err: fmt.Errorf("a problem was found: %s%s", strings.Join(x.failed, ", "), more)}
	}
	if x.unknown || len(incomplete) > 0 {
		why := "some checks could not be settled (see unknown above)"
		if len(incomplete) > 0 {
			why = strings.Join(incomplete, "; ")
		}
		return &IncompleteError{Err: fmt.Errorf("the answer is incomplete, some facts could not be read: %s", why)}
	}
	return nil
}

// statusRank orders diagnoses worst first.
var statusRank = map[string]int{diagnose.Fail: 0, diagnose.Unknown: 1, diagnose.Warning: 2, diagnose.Pass: 3}

// checkRank is a check's place in causal order; no check is last.
func checkRank(name string) int {
	for i, c := range diagnose.Order {
		if c == name {
			return i
		}
	}
	return len(diagnose.Order)
}

// sortDiagnoses puts the worst first, grouped by the first failing check,
// then by namespace and name.
func sortDiagnoses(ds []*diagnose.Diagnosis) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if ra, rb := statusRank[a.Status], statusRank[b.Status]; ra != rb {
			return ra < rb
		}
		if ca, cb := checkRank(a.First), checkRank(b.First); ca != cb {
			return ca < cb
		}
		return render.KeyBefore(a.Namespace, a.Name, b.Namespace, b.Name)
	})
}

// countChecks is the list's summary: each check's statuses.
func countChecks(ds []*diagnose.Diagnosis) []CheckCount {
	out := make([]CheckCount, len(diagnose.Order))
	for i, n := range diagnose.Order {
		out[i].Name = n
	}
	for _, d := range ds {
		addCounts(out, d)
	}
	return out
}

// addCounts counts d's checks into counts (countChecks's).
func addCounts(counts []CheckCount, d *diagnose.Diagnosis) {
	for _, c := range d.Checks {
		i := checkRank(c.Name)
		if i >= len(counts) {
			continue
		}
		switch c.Status {
		case diagnose.Pass:
			counts[i].Pass++
		case diagnose.Warning:
			counts[i].Warning++
		case diagnose.Fail:
			counts[i].Fail++
		case diagnose.Unknown:
			counts[i].Unknown++
		default:
			counts[i].NotChecked++
		}
		if c.Name == d.First {
			counts[i].First++
		}
	}
}
