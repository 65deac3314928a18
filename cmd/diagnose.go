package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/checkup"
	"github.com/kubectl-mesh/kubectl-mesh/engine/inject"
	"github.com/kubectl-mesh/kubectl-mesh/engine/podstart"
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
	ListChecks    bool
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
	// DryRun is --dry-run: none, or client (print what --rules would
	// create, and diagnose nothing).
	DryRun string
	Args   []string

	// Watch re-prints a sweep's rows whose answer changes (-w), as
	// kubectl get -w does.
	Watch bool
	// SortBy orders a sweep's list (--sort-by, a JSONPath), sortBy parsed.
	SortBy string
	sortBy *sortBy

	namespace  string
	explicitNS bool
	client     *inspect.Client
	eng        *checkup.Engine
	genericiooptions.IOStreams
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
It only reads, except with --rules or --connections: for one pod they add an
ephemeral container to it (it can never be removed; --via node instead
creates a node pod, deleted when done, which leaves nothing behind), for many
pods they create one privileged node pod per node in --node-namespace
(default "default", deleted when done); each is announced on stderr before
it is made, and --dry-run prints them as YAML instead, creating nothing.

  injection    injected as expected? (a mismatch, refused at admission, the
               wrong revision) — as why-injected answers; --verify adds the
               proof of a dry-run create; a workload short of its pods
  init         istio-init, istio-validation or ambient mode's CNI setup; the
               app's init containers, volumes that cannot be mounted
  start        the proxy started and ready, before the app where it must be;
               every container's waiting reason and exit, a pod not Ready
               past its start, one the scheduler cannot place, a failed Job
  capture      the live rules against what the pod's arguments call for
               (--rules: reads the pod's network namespace)
  connections  live flows that bypass the proxy (--connections)

Each check is pass, warning, fail, unknown (a fact could not be read; the
permission that would settle it is named) or not checked. Then, for each
check that did not pass, the kubectl-mesh command that shows it in full.

A broken pod is never a pass: what Kubernetes reports (the kubelet's and the
controllers' reasons and messages) is a finding of its own, put down to the
mesh where the mesh caused it, and said to be the platform's where no mesh
check explains it.

For many pods (a workload, a Service's pods as service/NAME, -n, -l, -A): one row per pod, and one per
Deployment, StatefulSet, DaemonSet or Job short of its pods, worst first,
grouped by the first failing check, and a count per check. --rules then
reads every pod of a node with one short-lived node pod (never an ephemeral
container per pod).

Exit codes: 0 every check that ran passed (warnings too, unless
--fail-on warning); 4 a check failed; 3 nothing failed but an answer is
unknown; 1 error; 2 usage error.`,
		Example: `  # What is wrong with this pod?
  kubectl mesh diagnose reviews-v1-5f4d8b7c9-x2x8z -n bookinfo

  # ... its live rules and connections too, read by a node pod deleted when
  # done (leaves nothing behind; without --via node, an ephemeral container
  # is added to the pod, which cannot be removed)
  kubectl mesh diagnose reviews-v1-5f4d8b7c9-x2x8z -n bookinfo --connections --via node

  # ... or print what that would create, as YAML, and create nothing
  kubectl mesh diagnose reviews-v1-5f4d8b7c9-x2x8z -n bookinfo --connections --via node --dry-run

  # Every pod a Service sends to (one outside the mesh among them is named)
  kubectl mesh diagnose service/reviews -n bookinfo

  # Every pod of the cluster, worst first
  kubectl mesh diagnose -A

  # A CI gate: the step fails (exit 4) when any check fails, or warns too
  kubectl mesh diagnose -n shop
  kubectl mesh diagnose -n shop --fail-on warning`,
		RunE: func(c *cobra.Command, args []string) error {
			o.viaSet = c.Flags().Changed("via")
			if o.viaSet {
				o.Rules = true // --via says how to read the rules: it asks for them
			}
			if o.ListChecks {
				// The catalogue: no cluster is read.
				if len(args) > 0 || o.AllNamespaces || o.Selector != "" || len(o.Filenames) > 0 {
					return usageErrorf("--list-checks takes no targets")
				}
				if err := validateOutput(o.Output, "wide"); err != nil {
					return err
				}
				return listChecks(o.Out, o.Output)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Every flag is checked before the kubeconfig is read and
			// before any request.
			o.Args = args
			if o.Connections {
				o.Rules = true
			}
			if err := o.Validate(); err != nil {
				return err
			}
			if err := o.Complete(args); err != nil {
				return err
			}
			err := o.Run(ctx)
			var stopped *InterruptedError
			if err != nil && ctx.Err() != nil && !errors.As(err, &stopped) {
				return &InterruptedError{Err: fmt.Errorf("interrupted (every node pod created has been deleted)")}
			}
			return err
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Manifest file(s) to diagnose before they are applied: admission only (- for standard input)")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Diagnose the pods matching this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Diagnose every pod in the cluster")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json, yaml, or wide (a sweep's rows with each finding in full); name (each subject as KIND/NAME, as kubectl get -o name); or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	c.Flags().BoolVar(&o.Verify, "verify", false, "Prove the injection answer with a server-side dry-run create (needs create pods)")
	c.Flags().BoolVar(&o.Rules, "rules", false, "Read the live capture rules and compare them with what the pod's arguments call for (one pod: an ephemeral container, or --via node; many: one node pod per node)")
	c.Flags().BoolVar(&o.Connections, "connections", false, "Read the live connections too and find flows that bypass the proxy (implies --rules)")
	c.Flags().StringVar(&o.Via, "via", nsexec.ViaEphemeral, "How the rules of one pod are read (implies --rules): ephemeral or node")
	c.Flags().StringVar(&o.Image, "image", "", "Image with iptables to read the rules with (default: the pod's proxy image)")
	c.Flags().StringVar(&o.NodeNS, "node-namespace", "default", "Namespace for node pods")
	c.Flags().DurationVar(&o.Timeout, "timeout", 60*time.Second, "How long to wait for a dump of the rules")
	c.Flags().BoolVarP(&o.Watch, "watch", "w", false, "After the sweep (-n, -l, -A), watch its pods and events and print each row whose answer changes, as kubectl get -w (Ctrl-C stops)")
	c.Flags().BoolVar(&o.ListChecks, "list-checks", false, "Print the catalogue of checks (code, stage, what each reads, the istioctl analyze code) and exit")
	addDryRunFlag(c.Flags(), &o.DryRun, "what --rules or --connections would create (the ephemeral container, or the node pods)")
	c.Flags().StringVar(&o.FailOn, "fail-on", diagnose.Fail, "The status that exits 4: fail, or warning (warnings fail too)")
	c.Flags().StringVar(&o.SortBy, "sort-by", "", sortByHelp)
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML, "wide"}, cobra.ShellCompDirectiveNoFileComp))
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
	o.namespace, o.client, o.explicitNS = ns, client, explicit
	o.eng = o.newEngine()
	return nil
}

// newEngine is an engine for one run of the request (-w makes one a run:
// engines keep nothing between runs).
func (o *DiagnoseOptions) newEngine() *checkup.Engine {
	ns, explicit, client := o.namespace, o.explicitNS, o.client
	eng := &checkup.Engine{
		Inject: &inject.Engine{Flags: o.configFlags, Client: client, Mesh: injection.Istio{}, Namespace: ns, ExplicitNamespace: explicit,
			Filenames: o.Filenames, Args: o.Args, Selector: o.Selector, AllNamespaces: o.AllNamespaces, In: o.In, Verify: o.Verify,
			Progress: dryRunProgress(o.ErrOut)},
		Starts: &podstart.Engine{Client: client, Now: time.Now}, Client: client,
		Verify: o.Verify, Rules: o.Rules, Connections: o.Connections,
		Via: o.Via, ViaSet: o.viaSet, Image: o.Image, NodeNamespace: o.NodeNS, Timeout: o.Timeout,
		Progress: func(nodes, pods int) (func(int), func()) {
			pr := render.NewProgress(o.ErrOut, "reading capture rules (pods)", pods)
			return pr.Add, pr.Finish
		},
		Announce: announcer(o.ErrOut)}
	if o.DryRun == dryRunClient {
		eng.Announce, eng.DryRun = nil, dryRunPrinter(o.Out)
	}
	return eng
}

// Run diagnoses the targets (or sweeps), prints the diagnoses and picks the
// exit: a problem found (4), else an unknown answer (3), else 0.
func (o *DiagnoseOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.DryRun == dryRunClient {
		// What --rules would create was printed as it would be created;
		// nothing was read through it, so nothing is diagnosed.
		if len(o.Filenames) == 0 && len(o.Args) == 0 {
			_, err := o.eng.Sweep(ctx, func(*diagnose.Diagnosis) error { return nil })
			return err
		}
		_, _, _, err := o.eng.Targets(ctx)
		return err
	}
	if len(o.Filenames) == 0 && len(o.Args) == 0 {
		// A sweep keeps only what it prints of each diagnosis.
		kept := newDiagnoseSweep(o)
		incomplete, err := o.eng.Sweep(ctx, kept.add)
		if err != nil {
			return err
		}
		if err := kept.print(incomplete); err != nil {
			return err
		}
		if o.Watch {
			return o.watch(ctx, kept)
		}
		return kept.outcome.exit(incomplete)
	}
	ds, list, incomplete, err := o.eng.Targets(ctx)
	if err != nil {
		return err
	}
	return o.finish(ds, list, incomplete)
}

// Validate checks the flags.
func (o *DiagnoseOptions) Validate() error {
	if err := validateOutput(o.Output, "wide"); err != nil {
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
	if err := validateDryRun(o.DryRun, o.Output); err != nil {
		return err
	}
	if o.Watch && (len(o.Filenames) > 0 || len(o.Args) > 0 || o.Rules || o.Verify || o.DryRun == dryRunClient) {
		return usageErrorf("--watch follows a sweep (-n, -l or -A): not with a POD, -f, --rules, --connections, --verify or --dry-run")
	}
	if err := o.parseSortBy(); err != nil {
		return err
	}
	if o.DryRun == dryRunClient && !o.Rules && !o.Connections {
		return usageErrorf("--dry-run prints what --rules or --connections would create; without them diagnose creates nothing")
	}
	return validateTargets(o.Filenames, o.Args, o.Selector, o.AllNamespaces)
}

// finish prints the diagnoses and picks the exit: a problem found (4), else
// an unknown answer (3), else 0.
func (o *DiagnoseOptions) finish(ds []*diagnose.Diagnosis, list bool, incomplete []string) error {
	render.SortDiagnoses(ds)
	if err := o.print(ds, list, incomplete); err != nil {
		return err
	}
	x := outcome{failOn: o.FailOn}
	for _, d := range ds {
		x.add(d)
	}
	return x.exit(incomplete)
}

// outcome is what decides the exit of a diagnosis, counted as they come:
// every command's (diagnose, why-injected, startup) by the same rule.
type outcome struct {
	// failOn is the status that exits 4: fail, or warning.
	failOn  string
	failed  []string // the first three problems found
	nFailed int
	unknown bool
}

func (x *outcome) add(d *diagnose.Diagnosis) {
	switch {
	case d.Status == diagnose.Fail, x.failOn == diagnose.Warning && warned(d):
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
