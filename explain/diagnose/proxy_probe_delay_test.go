package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// delayedProxy is a pod whose istio-proxy has run for 3 minutes, not
// ready, with a readiness probe first asked after delay seconds (set by
// the annotation when annotated).
func delayedProxy(delay int32, annotated bool) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		deploymentPod(p)
		if annotated {
			p.Annotations = map[string]string{"readiness.status.sidecar.istio.io/initialDelaySeconds": "900"}
		}
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: delay, PeriodSeconds: 15}
		p.Status.ContainerStatuses[0].Ready = false
		p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(2 * time.Minute))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	}
}

// A proxy not ready because its readiness probe is not asked yet is put
// down to the annotation that delays it, with a fix that removes it (and
// deletes a StatefulSet's pod, which its controller does not replace);
// one whose probe was asked keeps the proxy's own answer.
func TestProxyReadinessDelay(t *testing.T) {
	cases := []struct {
		name      string
		pod       func(p *corev1.Pod)
		evidence  string
		fix, mesh string
	}{
		{name: "the annotation's 900s", pod: delayedProxy(900, true), evidence: "first asked 15m0s after the proxy starts (initialDelaySeconds 900, set by the pod's readiness.status.sidecar.istio.io/initialDelaySeconds=\"900\")",
			fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/readiness.status.sidecar.istio.io~1initialDelaySeconds"}]'`, mesh: "initialDelaySeconds"},
		{name: "a StatefulSet's pod", pod: func(p *corev1.Pod) {
			delayedProxy(900, true)(p)
			yes := true
			p.Labels = map[string]string{"app": "zk"}
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "zk", Controller: &yes}}
		}, evidence: "initialDelaySeconds 900", fix: "\nkubectl delete pod web-1 -n shop   # its StatefulSet makes it again", mesh: "initialDelaySeconds"},
		{name: "asked already: the proxy's own answer", pod: delayedProxy(10, true), evidence: "without becoming ready", fix: "kubectl logs web-1 -n shop -c istio-proxy   #"},
		{name: "no annotation: what sets it", pod: delayedProxy(900, false), evidence: "initialDelaySeconds 900), and it started", fix: "jsonpath='{.metadata.annotations}'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := only(Diagnose(checkCase{pod: tc.pod, now: 5 * time.Minute}.facts()).Findings, CodeProxyNotReady)
			if len(fs) != 1 || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) || (tc.mesh == "") != (fs[0].Mesh == "") || !strings.Contains(fs[0].Mesh, tc.mesh) {
				t.Fatalf("got %+v\nwant evidence with %q, fix with %q, mesh %q", fs, tc.evidence, tc.fix, tc.mesh)
			}
		})
	}
}
