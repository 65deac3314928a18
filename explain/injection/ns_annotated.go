package injection

import (
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// namespaceAnnotated: a pod neither injected nor expected to be, whose
// namespace carries an injection key (istio-injection=enabled,
// istio.io/rev=REVISION) as an annotation and not as a label. Every
// injector webhook selects namespaces by their labels only: the
// annotation asks for nothing, a mistake to fix; the fix is the label,
// then the pod re-created.
func (x *explainer) namespaceAnnotated(r *InjectionReport) {
	w := x.w
	if w.NamespaceSource != NamespaceFromCluster || !x.nsKnown || r.IsExpected() || r.Ambient || r.CreationBlocked || (r.Injected != nil && *r.Injected) {
		return
	}
	ns := x.f.Namespaces[w.Namespace]
	if ns == nil || w.Labels[istio.KeyInject] == "false" {
		return
	}
	if _, ok := x.nsLabels[istio.LabelInjection]; ok {
		return
	}
	if _, ok := x.nsLabels[istio.LabelRev]; ok {
		return
	}
	key, value := "", ""
	switch {
	case ns.Annotations[istio.LabelInjection] == "enabled":
		key, value = istio.LabelInjection, "enabled"
	case ns.Annotations[istio.LabelRev] != "":
		key, value = istio.LabelRev, ns.Annotations[istio.LabelRev]
	default:
		return
	}
	r.Warn(WarnAskedNotDone, fmt.Sprintf("injection is asked for, but it does not happen: namespace %s has %s=%q as an annotation, not a label; the injector's webhooks select namespaces by their labels only, so none selects it",
		w.Namespace, key, value))
	r.Fix = fmt.Sprintf("kubectl label namespace %s %s=%s   # the annotation's key and value, as a label (kubectl annotate namespace %s %s- removes the annotation)", w.Namespace, key, value, w.Namespace, key)
	if w.Pod != nil {
		r.Fix += "\n" + restartCommand(w)
	}
}
