package diagnose

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// templatesClash: the apiserver refuses the pods for a second istio-proxy,
// and the template asks for more than one injection template: each of
// Istio's (sidecar, gateway, grpc-agent) adds its own istio-proxy. The
// mesh's cause; the fix keeps one: sidecar for an app, else the first.
func templatesClash(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	t := w.Template
	if t == nil || !strings.Contains(text, `Duplicate value: "istio-proxy"`) {
		return "", "", "", false
	}
	names := istio.InjectionTemplates(t.Annotations)
	if len(names) < 2 {
		return "", "", "", false
	}
	keep := names[0]
	if slices.Contains(names, "sidecar") {
		keep = "sidecar"
	}
	mesh = fmt.Sprintf("the template's %s=%q", istio.AnnotationTemplates, t.Annotations[istio.AnnotationTemplates])
	ev = mesh + " asks Istio's injector for " + quoteList(names) + ", and each adds its own istio-proxy (sidecar: the app's proxy; gateway: a gateway's router, for a gateway's own pod): the pod has two, which the apiserver refuses"
	fix = templateAnnotationsFix(w, map[string]string{istio.AnnotationTemplates: keep},
		fmt.Sprintf("one template: %s (the app's sidecar; %q is for a gateway's own Deployment)", keep, strings.Join(slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == keep }), ",")))
	return ev, mesh, fix, true
}

// noSidecarTemplate says the pod's injection templates (its
// inject.istio.io/templates) leave out the sidecar's: a gateway's or an
// agent's template adds istio-proxy with no hold and no capture, so a start
// order is not its problem (KM-CAP-011 names the template).
func noSidecarTemplate(p *corev1.Pod) bool {
	return p != nil && istio.OmitsSidecarTemplate(p.Annotations)
}
