package diagnose

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// readinessKeys are the annotations the injector sizes istio-proxy's
// readiness probe by.
var readinessKeys = []string{"readiness.status.sidecar.istio.io/initialDelaySeconds", "readiness.status.sidecar.istio.io/periodSeconds", "readiness.status.sidecar.istio.io/failureThreshold"}

// refineProxyNotReady puts a running istio-proxy that is not ready down to
// its own readiness probe when the kubelet has not asked it yet: its
// initialDelaySeconds, set by the pod's readiness.status.sidecar.istio.io
// annotation, has not passed since the proxy started. The probe's timing
// is the cause, not istiod, and the fix takes the annotation out.
func (in *Input) refineProxyNotReady(f *Finding) {
	p := in.Pod
	if p == nil || in.Startup == nil {
		return
	}
	var probe *corev1.Probe
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == istio.ProxyContainer {
			probe = c.ReadinessProbe
		}
	}
	if probe == nil || probe.InitialDelaySeconds <= 0 {
		return
	}
	var started *time.Time
	for _, c := range append(append(in.Startup.InitContainers[:0:0], in.Startup.InitContainers...), in.Startup.Containers...) {
		if c.Name == istio.ProxyContainer {
			started = c.StartedAt
		}
	}
	delay := time.Duration(probe.InitialDelaySeconds) * time.Second
	if started == nil || in.Startup.Now.Sub(*started) >= delay+time.Duration(max(probe.PeriodSeconds, 1))*time.Second*2 {
		return // asked already: its answer is the proxy's own
	}
	key := readinessKeys[0]
	v, set := p.Annotations[key]
	ev := fmt.Sprintf("istio-proxy's readiness probe is first asked %s after the proxy starts (initialDelaySeconds %d", delay, probe.InitialDelaySeconds)
	if set {
		ev += fmt.Sprintf(", set by the pod's %s=%q", key, v)
	}
	ev += fmt.Sprintf("), and it started %s ago: the kubelet has not asked it yet, so the pod is not Ready and gets no traffic until then, whatever istiod does",
		in.Startup.Now.Sub(*started).Round(time.Second))
	f.Evidence = ev
	if !set {
		f.Fix = "kubectl get pod " + p.Name + " -n " + p.Namespace + " -o jsonpath='{.metadata.annotations}'   # what sets istio-proxy's readiness delay (proxy.istio.io/config's readinessProbe, the revision's defaults)"
		return
	}
	f.Mesh = fmt.Sprintf("the pod's %s=%q", key, v)
	f.Fix = removeAnnotations(p, []string{key}) + "   # the injector's default delay (1s) then; or a few seconds"
	if owner := templateOwner(p); strings.HasPrefix(owner, "statefulset/") {
		// A StatefulSet does not replace a pod that is not ready
		// (OrderedReady waits for it): deleted, it is made anew.
		f.Fix += "\nkubectl delete pod " + p.Name + " -n " + p.Namespace + "   # its StatefulSet makes it again from the changed template (it does not replace a pod that is not ready on its own)"
	}
}
