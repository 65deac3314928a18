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

// cronJobPod is the pod of a CronJob's Job, job, unscheduled for want of
// cpu.
func cronJobPod(job string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: job, Controller: &yes}}
		p.Annotations = map[string]string{"sidecar.istio.io/proxyCPU": "64"}
		p.Spec.NodeName, p.Spec.RestartPolicy = "", corev1.RestartPolicyNever
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}}
	}
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
		owner    *WorkloadState
		files    []string
		start    string // "-": the start row is another check's
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
		{name: "a CronJob's scheduled Job's pod", pod: cronJobPod("nightly-29170"), owner: &WorkloadState{Kind: "Job", Namespace: "shop", Name: "nightly-29170", Controller: "CronJob/nightly"}, inj: oneNode,
			evidence: "requests cpu 64", fix: `kubectl patch cronjob/nightly -n shop --type=json -p '[{"op":"remove","path":"/spec/jobTemplate/spec/template/metadata/annotations/sidecar.istio.io~1proxyCPU"}]'   # the CronJob's next Jobs are made without them` +
				"\nkubectl delete job nightly-29170 -n shop", start: "-"},
		{name: "a Job made by hand from a CronJob", pod: cronJobPod("rerun"), owner: &WorkloadState{Kind: "Job", Namespace: "shop", Name: "rerun", Controller: "CronJob/nightly"}, inj: oneNode,
			evidence: "requests cpu 64", fix: "# the CronJob's next Jobs are made without them\nkubectl get job rerun -n shop -o json | kubectl patch --local", start: "-"},
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
			d := Diagnose(checkCase{pod: tc.pod, inj: tc.inj, files: tc.files, owner: tc.owner}.facts())
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
			if tc.pod != nil && tc.start == "" {
				// The start row puts the pod's state down to the mesh too.
				nr := only(d.Findings, CodeNotRunning)
				if len(nr) != 1 || nr[0].Mesh == "" {
					t.Errorf("%s: %+v, want it put down to the mesh; findings %+v", CodeNotRunning, nr, d.Findings)
				}
			}
		})
	}
}
