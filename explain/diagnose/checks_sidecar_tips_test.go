package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func req(cpu, mem string) corev1.ResourceRequirements {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return corev1.ResourceRequirements{Requests: l}
}

// tippedByInit: a Deployment's pod under a native sidecar (100m) whose init
// container after it asks 650m, with 680m left on the node (red team round
// 26's 01): unschedulable, and without the sidecar it would fit.
func tippedByInit(p *corev1.Pod) {
	yes := true
	always := corev1.ContainerRestartPolicyAlways
	p.Name = "reports-9b7b7-f886j"
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "reports-9b7b7", Controller: &yes}}
	p.Labels = map[string]string{"app": "reports", "pod-template-hash": "9b7b7"}
	p.Spec.NodeName = ""
	p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Resources: req("10m", "40Mi")},
		{Name: "istio-proxy", RestartPolicy: &always, Resources: req("100m", "128Mi")},
		{Name: "warm-cache", Resources: req("650m", "16Mi")}}
	p.Spec.Containers = []corev1.Container{{Name: "app", Resources: req("5m", "16Mi")}}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."}}}
}

// nodeLeft is one node with 2 cpus and 8Gi, of which cpu used is taken.
func nodeLeft(used string) NodeRoom {
	return NodeRoom{Allocatable: map[string]corev1.ResourceList{"node-1": {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}},
		Requested: map[string]corev1.ResourceList{"node-1": {corev1.ResourceCPU: resource.MustParse(used), corev1.ResourceMemory: resource.MustParse("1Gi")}}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeSidecarTipsNode, pod: tippedByInit, room: nodeLeft("1320m"), status: Fail,
		evidence: "it asks for cpu 750m with the sidecar, whose istio-proxy requests cpu 100m (a native sidecar",
		fix:      `kubectl patch deployment/reports -n shop --type=strategic -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"30m"}}}}}'   # a choice: the sidecar then requests cpu 30m, the most that fits node node-1 now`})
}

// The sidecar tips the pod over when it fits without it only; the scheduler
// sums a native sidecar with the init containers after it; another
// scheduling reason, room now, or no sidecar say nothing; the largest
// request that fits is the fix's.
func TestSidecarTipsNode(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name string
		pod  func(p *corev1.Pod)
		room NodeRoom
		want string // in the fix; "" no finding
	}{
		{"native, an init container after it", tippedByInit, nodeLeft("1320m"), `"sidecar.istio.io/proxyCPU":"30m"`},
		{"room now", tippedByInit, nodeLeft("1200m"), ""},
		{"too big without it too", tippedByInit, nodeLeft("1400m"), ""},
		{"another reason too", func(p *corev1.Pod) {
			tippedByInit(p)
			p.Status.Conditions[0].Message = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector. preemption: …"
		}, nodeLeft("1320m"), ""},
		{"no sidecar", func(p *corev1.Pod) { tippedByInit(p); p.Spec.InitContainers = p.Spec.InitContainers[2:] }, nodeLeft("1320m"), ""},
		{"classic sidecar, memory", func(p *corev1.Pod) {
			tippedByInit(p)
			p.Spec.InitContainers = p.Spec.InitContainers[:1]
			p.Spec.Containers = []corev1.Container{{Name: "istio-proxy", Resources: req("100m", "128Mi")}, {Name: "app", Resources: req("5m", "6000Mi")}}
			p.Status.Conditions[0].Message = "0/1 nodes are available: 1 Insufficient memory."
		}, NodeRoom{Allocatable: map[string]corev1.ResourceList{"node-1": {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}},
			Requested: map[string]corev1.ResourceList{"node-1": {corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2100Mi")}}}, `"sidecar.istio.io/proxyMemory":"92Mi"`},
	} {
		got := sidecarTipsNode(&Input{Facts: Facts{Pod: pod(tc.pod), Injection: injected(nil), NodeRoom: tc.room}, Target: "x"})
		checks++
		switch {
		case tc.want == "" && len(got) > 0, tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Fix, tc.want)):
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
	checks++
	if got := sidecarTipsNode(&Input{Facts: Facts{Pod: pod(tippedByInit), NodeRoom: NodeRoom{Unknown: "forbidden: list pods (all namespaces)"}}}); len(got) != 1 || got[0].Status != Unknown {
		t.Errorf("the nodes' room unread: the check is unknown, not silent: %+v", got)
	}
	checks++
	if got := SchedRequests(&pod(tippedByInit).Spec)[corev1.ResourceCPU]; got.MilliValue() != 750 {
		t.Errorf("a native sidecar counts beside the init containers after it: %s, want 750m", got.String())
	}
	t.Logf("%d checks", checks)
}
