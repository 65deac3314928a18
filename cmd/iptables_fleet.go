package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// AuditLine is one pod of a fleet audit (`kubectl mesh iptables -n/-l/-A`).
type AuditLine struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node"`
	// Mesh is how the pod is meshed: "istio sidecar", "istio sidecar (CNI)", "istio ambient", "none".
	Mesh string `json:"mesh"`
	capture.AuditSummary
	// Error says why the pod's rules could not be read (then nothing else is known).
	Error string `json:"error,omitempty"`
	// Report is the pod's full capture report (JSON/YAML only).
	Report *capture.CaptureReport `json:"report,omitempty"`
	// needs is the permission whose lack is the Error, when it is one.
	needs string
}

// fleetNodes is how many nodes are read at once.
const fleetNodes = 4

// isFleet: no POD and no dump, but pods to select (-A, -l or an explicit -n).
func (o *IptablesOptions) isFleet(explicitNS bool) bool {
	return o.Pod == "" && len(o.FromFiles) == 0 && (o.AllNamespaces || o.Selector != "" || explicitNS)
}

// runFleet reads the capture rules of every selected running pod with one
// short-lived node pod per node (never an ephemeral container), explains
// each against what its own arguments call for, and prints one line per pod,
// worst first.
func (o *IptablesOptions) runFleet(ctx context.Context, ns string, client *inspect.Client) error {
	switch {
	case o.Via == nsexec.ViaEphemeral && o.viaSet:
		return usageErrorf("the fleet audit reads every pod of a node with one node pod; --via ephemeral is for one POD")
	case o.Interval > 0 || o.expectSet || len(o.Traces) > 0 || len(o.PodIPs) > 0 || len(o.Nameservers) > 0:
		return usageErrorf("--interval, --expect-args, --trace, --pod-ip and --nameserver are for one POD; the audit compares each pod with its own arguments")
	case o.Output == outputRaw || o.Connections:
		return usageErrorf("-o raw and --connections are for one POD")
	}
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
		return explainAPIError(err, "list pods")
	}
	if selected == 0 {
		fmt.Fprintln(o.ErrOut, "No running pods found.")
		return nil
	}
	lines, nodes, err := o.readFleet(ctx, client, byNode, false)
	if err != nil {
		return err
	}
	sort.SliceStable(lines, func(i, j int) bool {
		a, b := lines[i], lines[j]
		if ra, rb := a.rank(), b.rank(); ra != rb {
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
	drifted, failed := 0, 0
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
		}
		hazards := l.HazardText()
		if l.Error != "" {
			hazards = l.Error
		}
		rows = append(rows, []string{render.Escape(l.Namespace), render.Escape(l.Pod), render.Escape(l.Mesh), render.Escape(render.Dash(l.Backend)), fmt.Sprint(l.Rules), drift,
			portOf(l.Inbound), portOf(l.Outbound), portOf(l.DNS), render.Escape(render.Dash(hazards))})
	}
	p.Para("", fmt.Sprintf("%d pods on %d nodes read with %d node pods (no ephemeral container): %d with drift, %d unreadable",
		len(lines), nodes, nodes, drifted, failed))
	fmt.Fprintln(p.Out)
	p.Table([]string{"NAMESPACE", "POD", "MESH", "BACKEND", "RULES", "DRIFT", "INBOUND", "OUTBOUND", "DNS", "HAZARDS"}, rows)
	p.Para("", "INBOUND, OUTBOUND, DNS: the proxy port a connection to the app's port, to an outside address and to the DNS server goes to, or no (not captured)")
	return nil
}

// readFleet reads the rules of the pods of each node of byNode with one
// node pod per node, a few nodes at once, and explains each pod's;
// connections keeps each pod's connection-tracking table in its report.
// It returns a line per pod, in no order, and how many nodes were read.
func (o *IptablesOptions) readFleet(ctx context.Context, client *inspect.Client, byNode map[string][]*corev1.Pod, connections bool) ([]*AuditLine, int, error) {
	nodes := make([]string, 0, len(byNode))
	ambient := false
	selected := 0
	for n, pods := range byNode {
		nodes = append(nodes, n)
		selected += len(pods)
		for _, p := range pods {
			_, ok := p.Annotations[istio.AnnotationRedirection]
			ambient = ambient || ok
		}
	}
	sort.Strings(nodes)
	// Ambient pods are compared with what istio-cni's ConfigMap calls for:
	// read once (unread, they are not compared, and each line says so).
	fleet := fleetFacts{client: client, connections: connections}
	if ambient {
		var err error
		if fleet.cni, fleet.cniUnread, err = istioCNIConfig(ctx, client); err != nil {
			return nil, 0, err
		}
	}

	runner := &nsexec.Runner{Client: client.Kube}
	progress := newProgress(o.ErrOut, len(nodes), selected)
	var mu sync.Mutex
	var lines []*AuditLine
	sem := make(chan struct{}, fleetNodes)
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(node string, pods []*corev1.Pod) {
			defer wg.Done()
			defer func() { <-sem }()
			got := o.auditNode(ctx, runner, fleet, node, pods)
			mu.Lock()
			lines = append(lines, got...)
			mu.Unlock()
			progress.done(len(pods))
		}(node, byNode[node])
	}
	wg.Wait()
	progress.clear()
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	return lines, len(nodes), nil
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

func (l *AuditLine) rank() int {
	if l.Error != "" {
		return -1
	}
	if l.Mesh == "none" && l.Rules == 0 {
		return 3 // not meshed and nothing captured: as it should be
	}
	return l.Worst()
}

// auditNode reads every pod of node with one node pod and explains each.
// fleetFacts are what the audit reads once for every node: istio-cni's
// ConfigMap, for ambient pods (cniUnread says why it is not there); and
// whether the pods' connections are explained too.
type fleetFacts struct {
	client      *inspect.Client
	cni         *corev1.ConfigMap
	cniUnread   string
	connections bool
}

func (o *IptablesOptions) auditNode(ctx context.Context, runner *nsexec.Runner, fleet fleetFacts, node string, pods []*corev1.Pod) []*AuditLine {
	image := o.Image
	ambient := false
	for _, p := range pods {
		if image == "" {
			image = imageOf(p, "")
		}
		_, ok := p.Annotations[istio.AnnotationRedirection]
		ambient = ambient || ok
	}
	if image == "" && ambient {
		// Only ambient pods here: the istio-cni agent's image has the tools
		// (not found or not readable: each line says there is no image).
		image, _ = agentImage(ctx, fleet.client, node)
	}
	lines := make([]*AuditLine, 0, len(pods))
	need := ""
	fail := func(why string) []*AuditLine {
		for _, p := range pods {
			lines = append(lines, &AuditLine{Namespace: p.Namespace, Pod: p.Name, Node: node, Mesh: meshOf(p), Error: why, needs: need})
		}
		return lines
	}
	if image == "" {
		return fail("no pod on this node has a mesh image with iptables to read the rules with: give one with --image")
	}
	dumps, _, err := runner.DumpNode(ctx, node, o.NodeNS, image, pods, o.Timeout)
	if err != nil {
		var perm *nsexec.PermissionError
		if errors.As(err, &perm) {
			need = perm.Need
		}
		return fail("node pod: " + err.Error())
	}
	for _, p := range pods {
		l := &AuditLine{Namespace: p.Namespace, Pod: p.Name, Node: node, Mesh: meshOf(p)}
		lines = append(lines, l)
		d := dumps[p.Namespace+"/"+p.Name]
		if d.Err != "" {
			l.Error = d.Err
			continue
		}
		in, _, backend, err := liveInput(p, &nsexec.Result{Via: nsexec.ViaNode, Sections: d.Sections})
		if errors.Is(err, errNoRules) {
			// Read, and no table holds a rule: nothing is captured.
			l.AuditSummary = capture.AuditSummary{Backend: "-", Inbound: "not captured", Outbound: "not captured", DNS: "not captured", Hazards: []string{}}
			if l.Mesh != "none" {
				l.Hazards = append(l.Hazards, "no capture rules")
			}
			if fleet.connections {
				l.Report = noRules(p, in)
			}
			continue
		}
		if err != nil {
			l.Error = err.Error()
			continue
		}
		if in.Context == nil {
			in.Context = &capture.PodContext{ProxyUID: istio.ProxyUID}
		}
		if !fleet.connections {
			in.Conntrack, in.Sockets, in.ConntrackRead = "", "", false // the audit reads rules, not flows
		}
		if _, ok := p.Annotations[istio.AnnotationRedirection]; ok && in.ExpectArgs == nil {
			if fleet.cni != nil {
				in.Ambient = ambientExpectation(fleet.cni, p)
			} else {
				in.Notes = append(in.Notes, fleet.cniUnread+": the in-pod rules are not compared")
			}
		}
		kept := in.Notes[:0]
		for _, n := range in.Notes {
			if fleet.connections || !strings.HasPrefix(n, "the connection tracking table") {
				kept = append(kept, n)
			}
		}
		in.Notes = kept
		traces := auditTraces(p, in.PodIPs, in.Nameservers)
		in.Traces = []string{traces.In, traces.Out}
		if traces.DNS != "" {
			in.Traces = append(in.Traces, traces.DNS)
		}
		rep, err := capture.ExplainCapture(in)
		if err != nil {
			l.Error = err.Error()
			continue
		}
		l.AuditSummary = capture.Summarize(rep, traces, backend)
		l.Report = rep
	}
	return lines
}

// auditTraces are the three connections every pod is traced with: inbound to
// its first app port (8080 if none), outbound to an address outside the
// cluster (TEST-NET-3), and a DNS query to its first nameserver.
func auditTraces(p *corev1.Pod, ips []netip.Addr, nameservers []string) capture.AuditTraces {
	port := 8080
	for _, c := range p.Spec.Containers {
		if c.Name != istio.ProxyContainer && len(c.Ports) > 0 {
			port = int(c.Ports[0].ContainerPort)
			break
		}
	}
	// An outside address of the pod's family (TEST-NET-3, or the IPv6
	// documentation prefix for an IPv6-only pod); IPv6 addresses bracketed.
	out := "out:203.0.113.10:443"
	if len(ips) > 0 && ips[0].Is6() {
		out = "out:[2001:db8::10]:443"
	}
	t := capture.AuditTraces{In: fmt.Sprintf("in:%d", port), Out: out}
	if len(nameservers) > 0 {
		if a, err := netip.ParseAddr(nameservers[0]); err == nil {
			t.DNS = "out:" + netip.AddrPortFrom(a, 53).String() + "/udp"
		}
	}
	return t
}

// meshOf says how a pod is meshed, from its containers.
func meshOf(p *corev1.Pod) string {
	proxy, init := false, false
	for _, c := range p.Spec.InitContainers {
		proxy = proxy || c.Name == istio.ProxyContainer
		init = init || c.Name == istio.InitContainer
	}
	for _, c := range p.Spec.Containers {
		proxy = proxy || c.Name == istio.ProxyContainer
	}
	switch {
	case proxy && init:
		return "istio sidecar"
	case proxy:
		return "istio sidecar (CNI)"
	case p.Annotations[istio.AnnotationRedirection] != "":
		return "istio ambient"
	}
	return "none"
}

// progress is a one-line counter on a terminal's stderr for long audits.
type progress struct {
	mu          sync.Mutex
	p           *render.Printer
	nodes, pods int
	doneN       int
	doneP       int
}

func newProgress(errOut any, nodes, pods int) *progress {
	pr := &progress{nodes: nodes, pods: pods}
	if w, ok := errOut.(interface{ Write([]byte) (int, error) }); ok && render.IsTerminal(w) {
		pr.p = &render.Printer{Out: w}
		pr.show()
	}
	return pr
}

func (pr *progress) show() {
	fmt.Fprintf(pr.p.Out, "\rreading capture rules: %d/%d nodes, %d/%d pods", pr.doneN, pr.nodes, pr.doneP, pr.pods)
}

func (pr *progress) done(pods int) {
	if pr.p == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.doneN++
	pr.doneP += pods
	pr.show()
}

func (pr *progress) clear() {
	if pr.p != nil {
		fmt.Fprintf(pr.p.Out, "\r%s\r", strings.Repeat(" ", 60))
	}
}
