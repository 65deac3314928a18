package cmd

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/rules"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// NewIptablesAuditCmd builds `kubectl mesh iptables audit`: the fleet
// audit, its own command because it creates privileged pods on every node
// it reads, which `-n` alone (read-only everywhere in kubectl) must never do.
func NewIptablesAuditCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &IptablesOptions{configFlags: configFlags, IOStreams: streams, fleet: true}
	c := &cobra.Command{
		Use:   "audit [-n NS | -l SELECTOR | -A] [flags]",
		Short: "Audit the capture rules of every selected pod, with one privileged node pod per node",
		Long: `Read the capture rules of every selected running pod (the namespace's, as
kubectl get pods selects them: -n, -l, -A) and compare each with what its
own arguments call for; trace a connection into its app port, one out to an
outside address and DNS: one line per pod, worst first.

What it changes: one short-lived privileged pod (hostPID, hostNetwork,
tolerating every taint) per node with a selected pod, in --node-namespace
(default "default"); each reads all of its node's pods in one go, and is
deleted when its node is read, also on error or Ctrl-C. No ephemeral
container is added to any pod. They are announced on stderr before they are
made; --dry-run prints them as YAML and creates nothing.`,
		Example: `  # Which node pods would the audit of namespace shop create? (creates nothing)
  kubectl mesh iptables audit -n shop --dry-run

  # Audit every pod of namespace shop: drift, DNS and capture, worst first
  kubectl mesh iptables audit -n shop

  # Every pod of the cluster, as JSON
  kubectl mesh iptables audit -A -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.complete(cmd)
		},
	}
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Audit every running pod of the cluster")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Audit the running pods matching this label selector")
	c.Flags().StringVar(&o.Image, "image", "", "Image with iptables for the node pods (default: a pod's proxy image on that node)")
	c.Flags().StringVar(&o.NodeNS, "node-namespace", "default", "Namespace for the node pods")
	c.Flags().DurationVar(&o.Timeout, "timeout", 60*time.Second, "How long to wait for a node's dump")
	c.Flags().IntVar(&o.Parallel, "parallel", 0, "How many pods of a node the node pod reads at once (0: as many as the node has CPUs); each pod within 20s")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml; name (each subject as KIND/NAME, as kubectl get -o name); or a template, as kubectl get takes it: jsonpath=…, go-template=…, custom-columns=… (and their -file forms)")
	addDryRunFlag(c.Flags(), &o.DryRun, "the node pods that would be created")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	o.Via = nsexec.ViaNode
	return c
}

// runFleet reads the capture rules of every selected running pod with one
// short-lived node pod per node (never an ephemeral container), explains
// each against what its own arguments call for, and prints one line per pod,
// worst first.
func (o *IptablesOptions) runFleet(ctx context.Context, ns string, client *inspect.Client) error {
	// Its flags were checked by Validate (validateFlags).
	if o.AllNamespaces {
		ns = ""
	}
	byNode := map[string][]*corev1.Pod{}
	selected := 0
	err := client.EachPodPage(ctx, ns, o.Selector, func(pods []corev1.Pod) error {
		for i := range pods {
			p := pods[i]
			if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" || p.Spec.HostNetwork {
				continue
			}
			selected++
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], &p)
		}
		return nil
	})
	if err != nil {
		return inspect.ExplainAPIError(err, "list pods")
	}
	if selected == 0 {
		fmt.Fprintln(o.ErrOut, "No running pods found.")
		return nil
	}
	if o.DryRun == dryRunClient {
		// Each node pod as it would be created; the pods that could not
		// be read anyway (no image to read them with) are said on stderr.
		lines, _, err := rules.Audit(ctx, client, byNode, rules.AuditOptions{Image: o.Image, NodeNamespace: o.NodeNS, Timeout: o.Timeout, Parallel: o.Parallel, DryRun: dryRunPrinter(o.Out)})
		if err != nil {
			return err
		}
		for _, l := range lines {
			fmt.Fprintf(o.ErrOut, "pod %s/%s would not be read: %s\n", render.Escape(l.Namespace), render.Escape(l.Pod), render.Escape(l.Error))
		}
		return nil
	}
	progress := render.NewProgress(o.ErrOut, fmt.Sprintf("reading capture rules (%d nodes, one node pod each): pods", len(byNode)), selected)
	lines, nodes, err := rules.Audit(ctx, client, byNode, rules.AuditOptions{Image: o.Image, NodeNamespace: o.NodeNS, Timeout: o.Timeout, Parallel: o.Parallel, Done: progress.Add, Announce: announcer(o.ErrOut)})
	progress.Finish()
	if err != nil {
		return err
	}
	sort.SliceStable(lines, func(i, j int) bool {
		a, b := lines[i], lines[j]
		if ra, rb := a.Rank(), b.Rank(); ra != rb {
			return ra < rb
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Pod < b.Pod
	})
	if o.Output != "" {
		return render.List(o.Out, o.Output, "CaptureAuditList", len(lines), func(i int) any { return lines[i] })
	}
	for _, l := range lines {
		render.Sanitize(l)
	}
	p := render.NewPrinter(o.Out)
	rows := make([][]string, 0, len(lines))
	drifted, failed, unmodelled := 0, 0, 0
	for _, l := range lines {
		drift := "-"
		switch {
		case l.Error != "":
			failed++
			drift = p.Paint("blocks", "error")
		case l.Drift != nil && *l.Drift:
			drifted++
			var parts []string
			if l.Missing > 0 {
				parts = append(parts, fmt.Sprintf("%d missing", l.Missing))
			}
			if l.Extra > 0 {
				parts = append(parts, fmt.Sprintf("%d extra", l.Extra))
			}
			if len(parts) == 0 {
				parts = append(parts, "reordered")
			}
			drift = p.Paint("blocks", strings.Join(parts, ", "))
		case l.Drift != nil:
			drift = "none"
		case l.NoRuleModel != "":
			unmodelled++
			drift = "unknown"
		}
		hazards := l.HazardText()
		if l.Error != "" {
			hazards = l.Error
		}
		rows = append(rows, []string{render.Escape(l.Namespace), render.Escape(l.Pod), render.Escape(l.Mesh), render.Escape(render.Dash(l.Backend)), fmt.Sprint(l.Rules), drift,
			portOf(l.Inbound), portOf(l.Outbound), portOf(l.DNS), render.Escape(render.Dash(hazards))})
	}
	summary := fmt.Sprintf("%d pods on %d nodes read with %d node pods (no ephemeral container): %d with drift, %d unreadable",
		len(lines), nodes, nodes, drifted, failed)
	if unmodelled > 0 {
		summary += fmt.Sprintf(", %d not compared (no rule model for their Istio release)", unmodelled)
	}
	p.Para("", summary)
	fmt.Fprintln(p.Out)
	p.Table([]string{"NAMESPACE", "POD", "MESH", "BACKEND", "RULES", "DRIFT", "INBOUND", "OUTBOUND", "DNS", "HAZARDS"}, rows)
	p.Para("", "INBOUND, OUTBOUND, DNS: the proxy port a connection to the app's port, to an outside address and to the DNS server goes to, or no (not captured)")
	return nil
}

// portOf shows "captured (15006)" as "15006" and "not captured" as "no" in
// the audit table (the JSON keeps the words).
func portOf(s string) string {
	if p, ok := strings.CutPrefix(s, "captured ("); ok {
		return strings.TrimSuffix(p, ")")
	}
	if s == "not captured" {
		return "no"
	}
	return render.Escape(s)
}
