package diagnose

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// initUser is the uid istio-init runs as, as its spec says (its own
// securityContext, else the pod's), and how that was read; ok is false
// when neither sets it (the image's user; Istio's injector sets 0).
func initUser(p *corev1.Pod, c *corev1.Container) (uid int64, from string, ok bool) {
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser, "its securityContext.runAsUser", true
	}
	if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		return *sc.RunAsUser, "the pod's securityContext.runAsUser (its own sets none)", true
	}
	return 0, "", false
}

// refineNonRootInit puts istio-init's failure to write rules (KM-INIT-001)
// down to its user when its spec has the capabilities: Istio's injector
// runs it as root (runAsUser 0), and a process that is not root has no
// effective capabilities whatever its securityContext adds. Something set
// another user: the template's own istio-init, or an admission mutator
// called after the injector, named with its fix.
func (in *Input) refineNonRootInit(f *Finding, init *corev1.Container) {
	p := in.Pod
	uid, from, set := initUser(p, init)
	if !set || uid == 0 {
		return // root, or a user the spec does not say
	}
	f.Evidence = strings.Replace(f.Evidence, "istio-init lacks the NET_ADMIN/NET_RAW capabilities it needs (its iptables calls are denied)", "istio-init's iptables calls are denied", 1)
	f.Evidence += "; its spec adds NET_ADMIN and NET_RAW, but it runs as uid " + strconv.FormatInt(uid, 10) + " (" + from + "), not root: the capabilities a securityContext adds are not effective for a process that is not root, so iptables is refused"
	if o := in.Owner; o != nil && o.Template != nil {
		for i := range o.Template.Spec.InitContainers {
			if c := &o.Template.Spec.InitContainers[i]; c.Name == istio.InitContainer && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil && *c.SecurityContext.RunAsUser != 0 {
				f.Evidence += ": the pod template's own istio-init, which the injector merges over its own, sets that user"
				f.Mesh = "the template's istio-init override (runAsUser)"
				return
			}
		}
	}
	ms := in.otherMutators()
	if len(ms) == 0 {
		f.Evidence += "; Istio's injector runs istio-init as root (runAsUser 0): something after it changed that"
		if in.Injection != nil && in.Injection.OtherMutatorsUnknown != "" {
			f.Evidence += " (which mutators act on the pod is unknown: " + in.Injection.OtherMutatorsUnknown + ")"
		}
		f.Fix = "# find what sets istio-init's user at admission (a mutating webhook or MutatingAdmissionPolicy called after Istio's injector) and exempt istio-init from it\n" + meshSideCNI
		return
	}
	f.Evidence += "; Istio's injector runs istio-init as root (runAsUser 0): changed at admission by " + mutatorsNamed(ms)
	f.Mesh = "istio-init's user (root, as the injector sets it), changed at admission by " + mutatorsNamed(ms)
	f.Fix = mutatorFix(p, ms, "sets istio-init's user") + "\n" + meshSideCNI
}
