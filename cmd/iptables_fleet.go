package cmd

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/engine/rules"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// isFleet: no POD and no dump, but pods to select (-A, -l or an explicit -n).
func (o *IptablesOptions) isFleet(explicitNS bool) bool {
	return o.Pod == "" && len(o.FromFiles) == 0 && (o.AllNamespaces || o.Selector != "" || explicitNS)
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
