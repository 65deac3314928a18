package diagnose

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeSidecarTipsNode: the pod waits unscheduled for want of cpu or
// memory, and without the sidecar's requests it would fit a node's room
// now.
const CodeSidecarTipsNode = "KM-START-024"

// FactNodeRoom is what the nodes have left: their allocatable less what
// the pods bound to them request.
var FactNodeRoom = Fact{"the nodes' allocatable and what the pods bound to them request (read when a pod with the sidecar is unschedulable for want of cpu or memory)", "list nodes, list pods (all namespaces)"}

func init() {
	register(&Spec{Code: CodeSidecarTipsNode, Title: "the sidecar's requests leave no node room", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactNodeRoom},
		Means:   "The scheduler places a pod by what it requests against what each node has left (allocatable less the requests of the pods bound to it), and the sidecar's requests count like the app's: a native sidecar's (istio-proxy as an init container that keeps running) is added to every init container after it, and to the app's containers. Here no node has room for the pod with the sidecar, and one has room for it without: the sidecar tips it over, and it stays Pending (Insufficient cpu/memory). A rollout's extra pod (maxSurge) meets it first, beside the pod it replaces.",
		Detects: "A pod with the sidecar, unscheduled, whose PodScheduled condition gives only Insufficient cpu or memory as the nodes' reasons: its requests as the scheduler sums them (init containers, native sidecars before them, containers, overhead) exceed every node's room in what is insufficient, and without Istio's containers they fit at least one node's.",
		Fixes:   "A choice, given with the numbers: a command that sets sidecar.istio.io/proxyCPU or proxyMemory on the pod template to the most the sidecar may request and still fit the roomiest node now (a workload's template patched; a Job or bare pod re-created); or lower the app's requests, or free room on a node.",
		Source:  "Kubernetes docs, resource management for pods (requests and scheduling) and sidecar containers (a restartable init container's requests count for the init containers after it); Istio docs, resource annotations (sidecar.istio.io/proxyCPU, proxyMemory)",
		Planted: "a Deployment with the sidecar whose init container requests all the cpu the node has left but 20m, under a native sidecar that requests 100m",
		run:     sidecarTipsNode})
}

// insufficient reads the scheduler's reasons: "0/3 nodes are available: 2
// Insufficient cpu, 1 Insufficient memory. preemption: …".
var schedulerReasons = regexp.MustCompile(`nodes are available: ([^.]*)\.`)

// NodeRoom is each node's allocatable and what the pods bound to it
// request (SchedRequests summed); Unknown says why they could not be read.
type NodeRoom struct {
	Allocatable map[string]corev1.ResourceList
	Requested   map[string]corev1.ResourceList
	Unknown     string
}

// NeedsNodeRoom says the pod's facts call for the nodes' room (FactNodeRoom):
// it has the sidecar and the scheduler finds no node with room for it.
func NeedsNodeRoom(p *corev1.Pod) bool {
	_, ok := unschedulableFor(p)
	return ok
}

// unschedulableFor is what the scheduler finds insufficient for the pod
// (cpu, memory), when that is its only reason, on a pod with istio-proxy.
func unschedulableFor(p *corev1.Pod) ([]corev1.ResourceName, bool) {
	if p == nil || p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil || !hasProxy(p) {
		return nil, false
	}
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
			continue
		}
		m := schedulerReasons.FindStringSubmatch(c.Message)
		if m == nil {
			return nil, false
		}
		var short []corev1.ResourceName
		for _, part := range strings.Split(m[1], ", ") {
			_, reason, _ := strings.Cut(strings.TrimSpace(part), " ")
			switch reason {
			case "Insufficient cpu":
				short = append(short, corev1.ResourceCPU)
			case "Insufficient memory":
				short = append(short, corev1.ResourceMemory)
			default:
				return nil, false // another reason keeps some node out: not only room
			}
		}
		return short, len(short) > 0
	}
	return nil, false
}

// hasProxy: the pod has Istio's sidecar, as a container or a native one.
func hasProxy(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == istio.ProxyContainer {
				return true
			}
		}
	}
	return false
}

// SchedRequests is what a pod asks of a node's room, as the scheduler sums
// it: the largest of each init container's request (with the native
// sidecars before it) and the containers' with every native sidecar, plus
// the pod's overhead; a pod-level request, when set, instead.
func SchedRequests(spec *corev1.PodSpec) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range roomResources {
		if spec.Resources != nil {
			if q, ok := spec.Resources.Requests[r]; ok {
				out[r] = q
				continue
			}
		}
		sum := containerRequest(spec, r)
		if q, ok := spec.Overhead[r]; ok {
			sum.Add(q)
		}
		out[r] = sum
	}
	return out
}

// containerRequest is what spec's containers ask of r together: the largest
// of each init container's request (with the native sidecars started before
// it) and the containers' with every native sidecar.
func containerRequest(spec *corev1.PodSpec, r corev1.ResourceName) resource.Quantity {
	var sidecars, initMax, sum resource.Quantity
	for _, c := range spec.InitContainers {
		q := c.Resources.Requests[r]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(q)
			q = sidecars.DeepCopy()
		} else {
			q.Add(sidecars)
		}
		if q.Cmp(initMax) > 0 {
			initMax = q
		}
	}
	for _, c := range spec.Containers {
		sum.Add(c.Resources.Requests[r])
	}
	sum.Add(sidecars)
	if initMax.Cmp(sum) > 0 {
		return initMax
	}
	return sum
}

// withProxyRequest is spec with istio-proxy's request of r set to q (its
// other Istio containers taken out when drop).
func withProxyRequest(spec *corev1.PodSpec, r corev1.ResourceName, q *resource.Quantity, drop bool) *corev1.PodSpec {
	s := spec.DeepCopy()
	edit := func(cs []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			if drop && istio.IsIstioContainer(c.Name) {
				continue
			}
			if c.Name == istio.ProxyContainer && q != nil {
				c.Resources.Requests = c.Resources.Requests.DeepCopy()
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				c.Resources.Requests[r] = *q
			}
			out = append(out, c)
		}
		return out
	}
	s.InitContainers, s.Containers = edit(s.InitContainers), edit(s.Containers)
	return s
}

func sidecarTipsNode(in *Input) []Finding {
	p := in.Pod
	short, ok := unschedulableFor(p)
	room := in.NodeRoom
	if ok && room.Unknown != "" {
		return []Finding{{Status: Unknown, Evidence: "whether the sidecar's requests keep the pod off every node could not be read: " + room.Unknown,
			Needs: []string{"list nodes", "list pods (all namespaces)"}}}
	}
	if !ok || len(room.Allocatable) == 0 || room.Requested == nil {
		return nil
	}
	want := SchedRequests(&p.Spec)
	without := SchedRequests(withProxyRequest(&p.Spec, "", nil, true))
	names := make([]string, 0, len(room.Allocatable))
	for n := range room.Allocatable {
		names = append(names, n)
	}
	sort.Strings(names)
	type nodeFree struct {
		node string
		free corev1.ResourceList
	}
	var best *nodeFree
	var said []string
	for _, n := range names {
		free := corev1.ResourceList{}
		for _, r := range short {
			a, ok := room.Allocatable[n][r]
			if !ok {
				return nil
			}
			a = a.DeepCopy()
			used := room.Requested[n][r]
			a.Sub(used)
			free[r] = a
		}
		if fitsIn(want, free, short) {
			return nil // it fits now: the scheduler's message is older than the room
		}
		said = append(said, n+" has "+roomSay(free)+" left")
		if fitsIn(without, free, short) && (best == nil || roomier(free, best.free, short)) {
			best = &nodeFree{n, free}
		}
	}
	if best == nil {
		return nil // too big without the sidecar too: not the mesh's
	}
	proxy := proxyContainer(p)
	sidecar := corev1.ResourceList{}
	annotations := map[string]any{}
	var most []string
	for _, r := range short {
		sidecar[r] = proxy.Resources.Requests[r]
		if q, ok := largestProxyRequest(&p.Spec, r, best.free[r]); ok {
			annotations[roomKeys[r]] = q
			most = append(most, string(r)+" "+q)
		}
	}
	native := ""
	if proxyIsNative(p) {
		native = " (a native sidecar: its requests count beside every init container after it, and beside the app's containers)"
	}
	ev := fmt.Sprintf("the scheduler finds no node with room for the pod (%s): it asks for %s with the sidecar, whose istio-proxy requests %s%s, and %s without Istio's containers; %s: without the sidecar it would fit %s",
		quoteInsufficient(short), roomSay(pick(want, short)), roomSay(sidecar), native, roomSay(pick(without, short)), strings.Join(said, "; "), best.node)
	fix := "a choice: lower the sidecar's requests (sidecar.istio.io/proxyCPU, proxyMemory), or the app's, or free room on node " + best.node
	if len(most) == len(short) {
		if cmd := in.templateSpecFix(plainJSON(map[string]any{"metadata": map[string]any{"annotations": annotations}})); cmd != "" {
			fix = firstLineNote(cmd, "a choice: the sidecar then requests "+strings.Join(most, ", ")+", the most that fits node "+best.node+" now; or lower the app's requests, or free room on the node")
		}
	}
	return []Finding{{Evidence: ev, Fix: fix,
		Mesh:     "the sidecar istio-proxy's requests (" + roomSay(sidecar) + ")",
		explains: []string{CodeNotRunning}}}
}

// largestProxyRequest is the most istio-proxy may request of r with the pod
// still within free ("30m", "96Mi"), false when even none would not do.
func largestProxyRequest(spec *corev1.PodSpec, r corev1.ResourceName, free resource.Quantity) (string, bool) {
	unit, suffix := int64(1), "m" // millicores
	if r == corev1.ResourceMemory {
		unit, suffix = 1<<20, "Mi"
	}
	at := func(n int64) bool {
		var q resource.Quantity
		if r == corev1.ResourceCPU {
			q = *resource.NewMilliQuantity(n, resource.DecimalSI)
		} else {
			q = *resource.NewQuantity(n*unit, resource.BinarySI)
		}
		want := SchedRequests(withProxyRequest(spec, r, &q, false))[r]
		return want.Cmp(free) <= 0
	}
	hi := free.MilliValue()
	if r == corev1.ResourceMemory {
		hi = free.Value() / unit
	}
	if hi < 1 || !at(1) {
		return "", false
	}
	lo := int64(1)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if at(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return fmt.Sprintf("%d%s", lo, suffix), true
}

// fitsIn says want is within free in each of rs.
func fitsIn(want, free corev1.ResourceList, rs []corev1.ResourceName) bool {
	for _, r := range rs {
		w, f := want[r], free[r]
		if w.Cmp(f) > 0 {
			return false
		}
	}
	return true
}

// roomier: a has more of the first of rs than b.
func roomier(a, b corev1.ResourceList, rs []corev1.ResourceName) bool {
	x, y := a[rs[0]], b[rs[0]]
	return x.Cmp(y) > 0
}

// pick is l's rs only.
func pick(l corev1.ResourceList, rs []corev1.ResourceName) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range rs {
		out[r] = l[r]
	}
	return out
}

func quoteInsufficient(rs []corev1.ResourceName) string {
	var s []string
	for _, r := range rs {
		s = append(s, "Insufficient "+string(r))
	}
	return strings.Join(s, ", ")
}

// proxyContainer is the pod's istio-proxy (a container or a native one).
func proxyContainer(p *corev1.Pod) corev1.Container {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == istio.ProxyContainer {
				return c
			}
		}
	}
	return corev1.Container{}
}

// proxyIsNative: istio-proxy runs as a native sidecar.
func proxyIsNative(p *corev1.Pod) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == istio.ProxyContainer {
			return true
		}
	}
	return false
}
