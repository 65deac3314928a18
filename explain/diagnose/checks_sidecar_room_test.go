package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// oneNode is a cluster of one node with 2 cpus and 8Gi to give.
func oneNode(r *injection.InjectionReport) {
	r.Nodes = map[string]corev1.ResourceList{"node-1": {corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi")}}
}

// rejectedForCPU is a bare pod bound to node-1 whose sidecar asks for 64
// cpus: the kubelet rejected it.
func rejectedForCPU(p *corev1.Pod) {
	p.Annotations = map[string]string{"sidecar.istio.io/proxyCPU": "64", lastApplied: `{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"64"}}}`}
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "OutOfcpu", Message: "Pod was rejected: Node didn't have enough resource: cpu, requested: 64100, used: 900, capacity: 2000"}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeSidecarNoRoom, pod: rejectedForCPU, inj: oneNode, status: Fail,
		evidence: `the sidecar istio-proxy requests cpu 64, memory 128Mi, set by sidecar.istio.io/proxyCPU="64"`,
		fix:      "kubectl apply view-last-applied pod/web-1 -n shop -o json | kubectl patch --local -f - --type=merge -p '{\"metadata\":{\"annotations\":{\"sidecar.istio.io/proxyCPU\":null}}}'"})
}

// The sidecar's annotated requests fire where they make a pod that is not
// placed too big for its node or every node, and never for a running pod,
// one too big without them, an unannotated sidecar or unread nodes; the
// start row says the kubelet's rejection is the mesh's.
func TestSidecarNoRoom(t *testing.T) {
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		inj      func(r *injection.InjectionReport)
		files    []string
		evidence string // "" for no finding
		fix      string
	}{
		{name: "rejected by the kubelet", pod: rejectedForCPU, inj: oneNode, evidence: "more than node node-1 (spec.nodeName) can give (allocatable: node-1 has cpu 2, memory 8Gi)", fix: "view-last-applied pod/web-1"},
		{name: "running: it fits", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"sidecar.istio.io/proxyCPU": "64"}
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
		}, inj: oneNode},
		{name: "nodes not read", pod: rejectedForCPU},
		{name: "too big without the sidecar", pod: func(p *corev1.Pod) {
			rejectedForCPU(p)
			p.Spec.Containers[1].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
		}, inj: oneNode},
		{name: "no annotation", pod: func(p *corev1.Pod) {
			rejectedForCPU(p)
			p.Annotations = nil
		}, inj: oneNode},
		{name: "another reason", pod: func(p *corev1.Pod) {
			rejectedForCPU(p)
			p.Status.Reason = "Evicted"
		}, inj: oneNode},
		{name: "unscheduled, a Deployment's", pod: func(p *corev1.Pod) {
			deploymentPod(p)
			p.Annotations = map[string]string{"sidecar.istio.io/proxyMemory": "512Gi"}
			p.Spec.NodeName = ""
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Gi")}
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}}
		}, inj: oneNode, evidence: "more than any node can give", fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/sidecar.istio.io~1proxyMemory"}]'`},
		{name: "a manifest's Deployment", files: []string{"web.yaml"}, inj: func(r *injection.InjectionReport) {
			oneNode(r)
			r.Kind, r.Name, r.Injected = "Deployment", "web", nil
			r.Template = &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/proxyMemory": "512Gi"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		}, evidence: "requests memory 512Gi", fix: "kubectl apply -f web.yaml -n shop   # creates it"},
		{name: "a manifest's pod", files: []string{"web.yaml"}, inj: func(r *injection.InjectionReport) {
			oneNode(r)
			r.Injected = nil
			r.Template = &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/proxyCPU": "64"}},
				Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app"}}}}
		}, evidence: "node node-1 (spec.nodeName)", fix: "kubectl annotate --local -f web.yaml sidecar.istio.io/proxyCPU- -o json | kubectl apply -n shop -f -"},
		{name: "a manifest no webhook injects", files: []string{"web.yaml"}, inj: func(r *injection.InjectionReport) {
			oneNode(r)
			no := false
			r.Injected, r.Expected = nil, &no
			r.Template = &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/proxyCPU": "64"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Diagnose(checkCase{pod: tc.pod, inj: tc.inj, files: tc.files}.facts())
			fs := only(d.Findings, CodeSidecarNoRoom)
			if tc.evidence == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != Fail || fs[0].Mesh == "" || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v\nwant evidence with %q, fix with %q", fs, tc.evidence, tc.fix)
			}
			if d.First != CheckInjection || d.Checks[0].Code != CodeSidecarNoRoom || d.Checks[0].Status != Fail {
				t.Errorf("first %s, its row %+v; want the injection row, %s", d.First, d.Checks[0], CodeSidecarNoRoom)
			}
			if tc.pod != nil {
				// The start row puts the pod's state down to the mesh too.
				nr := only(d.Findings, CodeNotRunning)
				if len(nr) != 1 || nr[0].Mesh == "" {
					t.Errorf("%s: %+v, want it put down to the mesh", CodeNotRunning, nr)
				}
			}
		})
	}
}
