package rules

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
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
	// Needs is the permission whose lack is the Error, when it is one.
	Needs string `json:"-"`
}

// fleetNodes is how many nodes are read at once.
const fleetNodes = 4

// AuditOptions say how Audit reads: the image (default: a pod's proxy
// image), the node pods' namespace and timeout, whether the connections are
// kept, and Done, told of each node read (its pods' count), for progress.
type AuditOptions struct {
	Image, NodeNamespace string
	Timeout              time.Duration
	Connections          bool
	// Listeners reads each pod's socket tables too, for its listeners
	// (diagnose's live checks); the audit's lines do not need them, and on
	// a node with many connections they cost more than the rules.
	Listeners bool
	Done      func(pods int)
	// Parallel is how many pods of a node are read at once (0: as many as
	// the node has CPUs).
	Parallel int
	// Announce, when set, is told once, before any is created, how many
	// node pods the audit creates, where and how.
	Announce func(string)
	// DryRun, when set, is given each node pod instead of its creation,
	// one node after another in the nodes' order; nothing is read, and
	// only the pods that could not be read for another reason have a line.
	DryRun func(obj any) error
}

// Audit reads the rules of the pods of each node of byNode with one node
// pod per node, a few nodes at once, and explains each pod's; Connections
// keeps each pod's connection-tracking table in its report. It returns a
// line per pod, in no order, and how many nodes were read.
func Audit(ctx context.Context, client *inspect.Client, byNode map[string][]*corev1.Pod, opts AuditOptions) ([]*AuditLine, int, error) {
	nodes := make([]string, 0, len(byNode))
	ambient := false
	for n, pods := range byNode {
		nodes = append(nodes, n)
		for _, p := range pods {
			_, ok := p.Annotations[istio.AnnotationRedirection]
			ambient = ambient || ok
		}
	}
	sort.Strings(nodes)
	// Ambient pods are compared with what istio-cni's ConfigMap calls for:
	// read once (unread, they are not compared, and each line says so).
	fleet := fleetFacts{client: client, connections: opts.Connections}
	if ambient {
		var err error
		if fleet.cni, fleet.cniUnread, err = CNIConfig(ctx, client); err != nil {
			return nil, 0, err
		}
	}

	if opts.Announce != nil && len(nodes) > 0 && opts.DryRun == nil {
		ns := opts.NodeNamespace
		if ns == "" {
			ns = "default"
		}
		pods := 0
		for _, n := range nodes {
			pods += len(byNode[n])
		}
		s := "s"
		if len(nodes) == 1 {
			s = ""
		}
		opts.Announce(fmt.Sprintf("reading %d pods with %d node pod%s (one per node, in namespace %s; privileged, hostPID, hostNetwork, tolerating every taint): each is deleted when its node is read, also on error or Ctrl-C; no ephemeral container is added", pods, len(nodes), s, ns))
	}
	runner := &nsexec.Runner{Client: client.Kube, DryRun: opts.DryRun}
	var mu sync.Mutex
	var lines []*AuditLine
	parallel := fleetNodes
	if opts.DryRun != nil {
		parallel = 1 // printed in the nodes' order
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Add(1)
		sem <- struct{}{}
		go func(node string, pods []*corev1.Pod) {
			defer wg.Done()
			defer func() { <-sem }()
			got := auditNode(ctx, runner, fleet, opts, node, pods)
			mu.Lock()
			lines = append(lines, got...)
			mu.Unlock()
			if opts.Done != nil {
				opts.Done(len(pods))
			}
		}(node, byNode[node])
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, 0, ctx.Err()
	}
	return lines, len(nodes), nil
}

// Rank orders audit lines worst first: unreadable, then by the worst
// finding; a pod outside the mesh with no rules last.
func (l *AuditLine) Rank() int {
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

func auditNode(ctx context.Context, runner *nsexec.Runner, fleet fleetFacts, opts AuditOptions, node string, pods []*corev1.Pod) []*AuditLine {
	// The node's istio-cni release, read once, for its ambient pods.
	var agentRelease, agentFrom string
	image := opts.Image
	ambient := false
	for _, p := range pods {
		if image == "" {
			image = ImageOf(p, "")
		}
		_, ok := p.Annotations[istio.AnnotationRedirection]
		ambient = ambient || ok
	}
	if image == "" && ambient {
		// Only ambient pods here: the istio-cni agent's image has the tools
		// (not found or not readable: each line says there is no image).
		image, _ = AgentImage(ctx, fleet.client, node)
	}
	lines := make([]*AuditLine, 0, len(pods))
	need := ""
	fail := func(why string) []*AuditLine {
		for _, p := range pods {
			lines = append(lines, &AuditLine{Namespace: p.Namespace, Pod: p.Name, Node: node, Mesh: MeshOf(p), Error: why, Needs: need})
		}
		return lines
	}
	if image == "" {
		return fail("no pod on this node has a mesh image with iptables to read the rules with: give one with --image")
	}
	dumps, _, err := runner.DumpNode(ctx, nsexec.NodeRequest{Node: node, Namespace: opts.NodeNamespace, Image: image, Pods: pods,
		Parallel: opts.Parallel, Conntrack: opts.Connections, Sockets: opts.Listeners, Timeout: opts.Timeout})
	if errors.Is(err, nsexec.ErrDryRun) {
		return nil
	}
	if err != nil {
		var perm *nsexec.PermissionError
		if errors.As(err, &perm) {
			need = perm.Need
		}
		return fail("node pod: " + err.Error())
	}
	for _, p := range pods {
		l := &AuditLine{Namespace: p.Namespace, Pod: p.Name, Node: node, Mesh: MeshOf(p)}
		lines = append(lines, l)
		d := dumps[p.Namespace+"/"+p.Name]
		if d.Err != "" {
			l.Error = d.Err
			continue
		}
		in, _, backend, err := LiveInput(p, &nsexec.Result{Via: nsexec.ViaNode, Sections: d.Sections})
		if errors.Is(err, ErrNoRules) {
			// Read, and no table holds a rule: nothing is captured.
			l.AuditSummary = capture.AuditSummary{Backend: "-", Inbound: "not captured", Outbound: "not captured", DNS: "not captured", Hazards: []string{}}
			if l.Mesh != "none" {
				l.Hazards = append(l.Hazards, "no capture rules")
			}
			if fleet.connections {
				l.Report = NoRules(p, in)
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
				in.Ambient = AmbientExpectation(fleet.cni, p)
				if agentFrom == "" && agentRelease == "" {
					agentRelease, agentFrom = AgentRelease(ctx, fleet.client, node, fleet.cni, "")
				}
				in.Ambient.Release, in.Ambient.ReleaseFrom = agentRelease, agentFrom
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

// MeshOf says how a pod is meshed, from its containers.
func MeshOf(p *corev1.Pod) string {
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
