package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// revOptedOut: a DaemonSet's pod without a sidecar, labelled for revision
// canary and inject=false (red team round 24's 06).
func revOptedOut(p *corev1.Pod) {
	yes := true
	p.Name = "node-exporter-x1"
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "node-exporter", Controller: &yes}}
	p.Labels = map[string]string{"app": "nep", "istio.io/rev": "canary", "sidecar.istio.io/inject": "false"}
	p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
	p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeRevisionOptedOut, pod: revOptedOut, inj: notExpected, status: Warning,
		evidence: `the pod is labelled istio.io/rev="canary" and sidecar.istio.io/inject="false"`,
		fix:      `kubectl patch daemonset/node-exporter -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/labels/sidecar.istio.io~1inject"}]'   # a choice: the pod joins revision canary`})
}

// Both labels warn, live or in a manifest (its template's factors); either
// alone, or an injected pod, does not.
func TestRevisionOptedOut(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name string
		pod  func(p *corev1.Pod)
		want bool
	}{
		{"both", revOptedOut, true},
		{"the revision alone", func(p *corev1.Pod) { revOptedOut(p); delete(p.Labels, "sidecar.istio.io/inject") }, false},
		{"the opt-out alone", func(p *corev1.Pod) { revOptedOut(p); delete(p.Labels, "istio.io/rev") }, false},
		{"an empty revision", func(p *corev1.Pod) { revOptedOut(p); p.Labels["istio.io/rev"] = "" }, false},
	} {
		p := pod(tc.pod)
		r := injected(notExpected)
		got := revisionOptedOut(&Input{Facts: Facts{Pod: p, Injection: r}})
		checks++
		if (len(got) > 0) != tc.want {
			t.Errorf("%s: %v, want a finding: %v", tc.name, got, tc.want)
		}
	}
	cron := pod(func(p *corev1.Pod) {
		revOptedOut(p)
		yes := true
		p.Name, p.OwnerReferences = "nightly-29300000-abcde", []metav1.OwnerReference{{Kind: "Job", Name: "nightly-29300000", Controller: &yes}}
	})
	in := &Input{Facts: Facts{Pod: cron, Injection: injected(notExpected), Owner: &WorkloadState{Kind: "Job", Name: "nightly-29300000", Controller: "CronJob/nightly", Template: &corev1.PodTemplateSpec{}}}}
	got := revisionOptedOut(in)
	checks++
	if len(got) != 1 || !strings.Contains(got[0].Fix, `kubectl patch cronjob/nightly -n shop --type=json -p '[{"op":"remove","path":"/spec/jobTemplate/spec/template/metadata/labels/sidecar.istio.io~1inject"}]'`) {
		t.Errorf("a CronJob's pod: the patch must reach the job template's labels: %+v", got)
	}
	r := injected(notExpected)
	r.Kind, r.Name, r.Namespace = "DaemonSet", "node-exporter", "shop"
	r.Factors = []injection.Factor{
		{Factor: "pod label sidecar.istio.io/inject", Value: `"false"`, Effect: injection.EffectSkip},
		{Factor: "pod label istio.io/rev", Value: `"canary"`, Effect: injection.EffectNone},
	}
	got = revisionOptedOut(&Input{Facts: Facts{Injection: r, Files: []string{"ds.yaml"}}})
	checks++
	if len(got) != 1 || !strings.HasPrefix(got[0].Fix, `# edit ds.yaml first: remove the label sidecar.istio.io/inject: "false" from the pod template`) || !strings.HasSuffix(got[0].Fix, "\nkubectl apply -f ds.yaml") {
		t.Errorf("manifest: %+v", got)
	}
	t.Logf("%d checks", checks)
}
