package cmd

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

const outputRaw = "raw"

// IptablesOptions holds the flags of `kubectl mesh iptables`.
type IptablesOptions struct {
	configFlags *genericclioptions.ConfigFlags
	// Parallel is how many pods of a node the fleet audit reads at once
	// (0: the node's CPUs).
	Parallel  int
	Pod       string
	Container string
	Via       string
	Image     string
	Interval  time.Duration
	NodeNS    string
	Force     bool
	Timeout   time.Duration
	// AllNamespaces and Selector: the pods of the fleet audit (`iptables
	// audit`); on `iptables` itself, they are refused with a word on it.
	AllNamespaces bool
	Selector      string
	// DryRun is --dry-run: none, or client (print what would be created).
	DryRun  string
	changed func(flag string) bool
	// Connections classifies the pod's live flows (captured or bypassing).
	Connections bool

	FromFiles  []string
	PodIPs     []string
	ExpectArgs string
	// IstioVersion is the Istio release whose istio-iptables wrote the
	// rules (--istio-version): the rules are compared with its model.
	IstioVersion string
	expectSet    bool
	Nameservers  []string
	Traces       []string
	Output       string

	raw         [][]byte
	live        *nsexec.Result
	liveBackend string
	namespace   string
	client      *inspect.Client
	// fleet: the audit of every selected pod (`iptables audit`).
	fleet bool
	// dryRan: a --dry-run printed what would be created (nothing to explain).
	dryRan bool
	input  capture.CaptureInput
	genericiooptions.IOStreams
}

// NewIptablesCmd builds `kubectl mesh iptables`.
func NewIptablesCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &IptablesOptions{configFlags: configFlags, IOStreams: streams}
	c := &cobra.Command{
		Use:   "iptables (POD | TYPE/NAME | --from-file DUMP [--from-file DUMP6]) [flags]",
		Short: "Explain a pod's traffic-capture rules, compare them with what they should be, trace connections",
		Long: `Read the packet-filter rules of a pod's network namespace and explain them:
every Istio (and Linkerd proxy-init) rule in plain language, as a tree from
PREROUTING and OUTPUT with packet counters; the drift from the rules the pod's
istio-init arguments (or, in CNI mode, its annotations) call for; and where
given connections go (--trace).

What it changes: a POD read adds an ephemeral container to the pod (it can
never be removed; --via node instead creates a privileged node pod, deleted
when done, and leaves nothing behind). Each is announced on stderr before it
is made; --dry-run prints it as YAML and creates nothing. --from-file
changes nothing. The fleet audit of every pod of a namespace is its own
command, 'kubectl mesh iptables audit' (see its --help): -n alone never
creates anything.

POD: the rules are dumped from the running pod, both backends (nft, legacy)
and both families, with counters:
  --via ephemeral (default)  an ephemeral debug container in the pod (image:
                             the pod's own proxy image; root, NET_ADMIN and
                             NET_RAW only, not privileged). Ephemeral
                             containers cannot be removed from a pod: it stays
                             listed (terminated) until the pod is deleted.
  --via node                 a short-lived privileged pod on the pod's node
                             that enters the pod's network namespace with
                             nsenter; always deleted, also on Ctrl-C.
--interval 10s dumps twice and shows what each rule counted in between.

TYPE/NAME (deploy/web, sts/db, …): one of the workload's pods, picked as
kubectl logs picks it (running and ready first, then the oldest); it says
which when there are several. 'kubectl mesh iptables audit' reads them all.
A pod named "audit" is pod/audit.

--from-file: read a dump instead (- for standard input), in the form it was
pasted: iptables-save (either backend, with or without counters),
iptables -S (with or without -t, several tables one after the other),
iptables -L -v [-n] [--line-numbers] [-x] (counters kept; names such as
"anywhere" read back), or 'nft list ruleset' when istio-init ran with
--native-nftables (Istio's inet istio-proxy-* tables, both families). A
paste's "$ iptables -t nat -S" line names the table that follows; what a
form leaves out (-S has no counters) is said.

The rules istio-iptables writes differ by Istio release: they are compared
with the rules of the release that wrote them, read from the pod's
istio-init (or proxy) image tag, or given with --istio-version. Istio 1.20
to the current release are modelled; for any other release the rules are
explained and traced, not compared (drift unknown).

Trace SPEC:
  out:IP:PORT[/tcp|udp][,uid=N][,gid=N][,mark=N]  a connection the pod opens (default uid 0; mark: its
                                                  socket's SO_MARK, e.g. 0x539 for ztunnel's own)
  in:[IP:]PORT[/tcp|udp][,src=IP][,iface=NAME]    a connection into the pod
IPv6 as [fd00::1]:443. A destination that is one of the pod's addresses
(--pod-ip) leaves through lo.`,
		Example: `  # Explain a pod's live rules through a node pod that is deleted when done
  # (leaves nothing behind; without --via node, an ephemeral container is
  # added to the pod, which cannot be removed)
  kubectl mesh iptables web-7d4b9c8f6-abcde -n shop --via node

  # What would that create? Print it as YAML, create nothing
  kubectl mesh iptables web-7d4b9c8f6-abcde -n shop --via node --dry-run

  # Audit every pod of a namespace (one privileged node pod per node):
  # see 'kubectl mesh iptables audit --help'
  kubectl mesh iptables audit -n shop

  # Dump the rules on the node, then explain them
  nsenter -t "$PID" -n iptables-save -c > pod.rules
  kubectl mesh iptables --from-file pod.rules --pod-ip 10.1.2.3

  # Are they the rules istio-init's arguments call for, in Istio 1.24?
  kubectl mesh iptables --from-file pod.rules --istio-version 1.24 \
    --expect-args '-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020'

  # Where does a connection to 10.96.0.10:53/udp go? And one into port 8080?
  kubectl mesh iptables --from-file pod.rules --pod-ip 10.1.2.3 \
    --trace out:10.96.0.10:53/udp --trace in:8080`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Pod = args[0]
			}
			return o.complete(cmd)
		},
	}
	c.Flags().StringVarP(&o.Container, "container", "c", "", "The container whose image the debug container runs (default: istio-proxy's, else istio-init's)")
	c.Flags().StringVar(&o.Via, "via", nsexec.ViaEphemeral, "How to reach the pod's network namespace: ephemeral or node")
	c.Flags().BoolVar(&o.Connections, "connections", false, "With a POD: read its connection-tracking table in the same dump and say which live flows the proxy took and which bypass it (and the rule that let each through)")
	// -A and -l selected the fleet audit's pods before it was its own
	// command: kept, hidden, to say so.
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "The fleet audit's: see 'kubectl mesh iptables audit'")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "The fleet audit's: see 'kubectl mesh iptables audit'")
	_ = c.Flags().MarkHidden("all-namespaces")
	_ = c.Flags().MarkHidden("selector")
	addDryRunFlag(c.Flags(), &o.DryRun, "the ephemeral container (or with --via node the node pod) that would be created")
	c.Flags().StringVar(&o.Image, "image", "", "Image with iptables for the debug container (default: the pod's proxy image)")
	c.Flags().DurationVar(&o.Interval, "interval", 0, "Dump twice, this long apart, and show each rule's counter deltas")
	c.Flags().StringVar(&o.NodeNS, "node-namespace", "default", "Namespace for --via node's node pod")
	c.Flags().BoolVar(&o.Force, "force", false, "Add an ephemeral container even to a pod that is not Running")
	c.Flags().DurationVar(&o.Timeout, "timeout", 60*time.Second, "How long to wait for the dump")
	_ = c.RegisterFlagCompletionFunc("via", cobra.FixedCompletions([]string{nsexec.ViaEphemeral, nsexec.ViaNode}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringArrayVar(&o.FromFiles, "from-file", nil, "a dump to read: iptables-save, iptables -S, iptables -L -v or nft list ruleset output (- for standard input); twice for separate IPv4 and IPv6 dumps")
	c.Flags().StringSliceVar(&o.PodIPs, "pod-ip", nil, "The pod's addresses (for --trace, and for --expect-args: they decide whether istio-iptables writes IPv6 rules)")
	c.Flags().StringVar(&o.ExpectArgs, "expect-args", "", "istio-iptables arguments to compare the rules with, shell-quoted as in a pod spec")
	c.Flags().StringVar(&o.IstioVersion, "istio-version", "", "the Istio release that wrote the rules (e.g. 1.24.6): they are compared with what its istio-iptables writes; default: a POD's proxy image tag, else the newest modelled release")
	c.Flags().StringArrayVar(&o.Nameservers, "nameserver", nil, "The pod's DNS servers, for DNS capture rules (repeatable)")
	c.Flags().StringArrayVar(&o.Traces, "trace", nil, "Trace a connection: out:IP:PORT[/proto][,uid=N][,gid=N][,mark=N] or in:[IP:]PORT[/proto][,src=IP][,iface=NAME] (repeatable)")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json, yaml or raw (the dumps as read); name (each subject as KIND/NAME, as kubectl get -o name); or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML, outputRaw}, cobra.ShellCompDirectiveNoFileComp))
	c.AddCommand(NewIptablesAuditCmd(configFlags, streams))
	return c
}

// complete runs the command once its arguments are in o: every flag is
// checked before anything is read from the cluster or created in it (an
// ephemeral container can never be removed), then it connects and runs.
func (o *IptablesOptions) complete(cmd *cobra.Command) error {
	o.expectSet = cmd.Flags().Changed("expect-args")
	o.changed = cmd.Flags().Changed
	if err := o.Validate(); err != nil {
		return err
	}
	if err := o.Complete(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return o.Run(ctx)
}

// Complete connects for a POD or the fleet audit (no request is sent
// yet); dumps from files were read by Validate.
func (o *IptablesOptions) Complete() error {
	if o.Pod == "" && !o.fleet {
		return nil
	}
	ns, _, client, err := connect(o.configFlags)
	if err != nil {
		return err
	}
	o.namespace, o.client = ns, client
	return nil
}

// readFiles reads the dumps given with --from-file.
func (o *IptablesOptions) readFiles() error {
	stdinUsed := false
	for _, f := range o.FromFiles {
		if f == "-" {
			if stdinUsed {
				return usageErrorf("--from-file - can be given once")
			}
			stdinUsed = true
		}
		b, err := engine.ReadInput(f, o.In)
		if err != nil {
			return err
		}
		o.raw = append(o.raw, b)
	}
	return nil
}

// Run reads (the fleet audit, or a POD's rules), explains and prints.
func (o *IptablesOptions) Run(ctx context.Context) error {
	if o.fleet {
		err := o.runFleet(ctx, o.namespace, o.client)
		if err != nil && ctx.Err() != nil {
			return &InterruptedError{Err: fmt.Errorf("interrupted (every node pod created has been deleted)")}
		}
		return err
	}
	if o.Pod != "" {
		err := o.readLive(ctx)
		if err != nil && ctx.Err() != nil {
			// Interrupted at any step (reading the pod, the dump, the
			// cleanup): exit as kubectl does, whatever the step's error.
			return &InterruptedError{Err: fmt.Errorf("interrupted (a node pod, if one was created, has been deleted)")}
		}
		if err != nil {
			return err
		}
		if o.dryRan {
			return nil // printed what would be created; nothing was read
		}
		if err := o.validateCommon(); err != nil {
			return err
		}
	}
	rep, err := capture.ExplainCapture(o.input)
	if err != nil {
		return err
	}
	rep.Live = o.liveInfo()
	switch o.Output {
	case outputRaw:
		// The dumps as read; on a terminal, their control characters escaped.
		tty := render.IsTerminal(o.Out)
		for _, b := range o.raw {
			if tty {
				b = []byte(render.EscapeLines(string(b)))
			}
			if _, err := o.Out.Write(b); err != nil {
				return err
			}
		}
		return nil
	case render.JSON, render.YAML:
		return render.Structured(o.Out, o.Output, render.CaptureReportDoc{APIVersion: render.APIVersion, Kind: "CaptureReport", CaptureReport: rep})
	}
	render.Sanitize(rep)
	render.Capture(render.NewPrinter(o.Out), rep)
	return nil
}
