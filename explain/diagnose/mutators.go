package diagnose

// What another admission mutator did to what Istio's injector added: a
// mutating webhook or a MutatingAdmissionPolicy called after the injector
// can remove istio-init's capabilities or rewrite the proxy's image
// (istio/istio#49054). The injection report names the mutators whose rules
// and selectors match the pod; the pod's spec shows what was changed.

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// meshSideCNI is the way out on the mesh's side when istio-init cannot
// have its capabilities.
const meshSideCNI = "# or, on the mesh's side: a revision with Istio's CNI plugin (no istio-init)"

// otherMutators are the mutators other than Istio's injector that act on
// the pod, as the injection report names them.
func (in *Input) otherMutators() []injection.Mutator {
	if in.Injection == nil {
		return nil
	}
	return in.Injection.OtherMutators
}

// mutatorsNamed: "X" for one, "one of X or Y" for several.
func mutatorsNamed(ms []injection.Mutator) string {
	if len(ms) == 1 {
		return ms[0].By
	}
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.By
	}
	return "one of " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// recreateCommand re-creates the pod, so that admission runs again.
func recreateCommand(p *corev1.Pod) string {
	switch owner := templateOwner(p); {
	case strings.HasPrefix(owner, "deployment/"), strings.HasPrefix(owner, "statefulset/"), strings.HasPrefix(owner, "daemonset/"):
		return "kubectl rollout restart " + owner + " -n " + p.Namespace
	case owner != "":
		return "kubectl delete pod " + p.Name + " -n " + p.Namespace + "   # its " + strings.SplitN(owner, "/", 2)[0] + " creates it again"
	}
	return "kubectl delete pod " + p.Name + " -n " + p.Namespace + "   # then create it again from its manifest"
}

// mutatorFix exempts the pod's namespace from the one mutator that acts
// on it (or says to exempt it from the one of several that does), then
// re-creates the pod.
func mutatorFix(p *corev1.Pod, ms []injection.Mutator, what string) string {
	return mutatorFixThen(p, ms, what, recreateCommand(p))
}

// mutatorFixThen is mutatorFix with the command that makes the pod again
// once the mutator no longer acts on it.
func mutatorFixThen(p *corev1.Pod, ms []injection.Mutator, what, recreate string) string {
	if len(ms) == 1 && ms[0].Exempt != "" {
		wait := ""
		if strings.HasPrefix(ms[0].By, "MutatingAdmissionPolicyBinding") {
			// The apiserver reloads its admission policies every second
			// or so: a pod created at once is still changed.
			wait = "sleep 3; "
		}
		return ms[0].Exempt + "   # exempts namespace " + p.Namespace + " from " + ms[0].By + "\n" + wait + recreate
	}
	return "# exempt namespace " + p.Namespace + " from the " + mutatorsNamed(ms) + " that " + what + " (its namespaceSelector)\n" + recreate
}

// missingCaps are the capabilities istio-init needs that its spec does not
// add.
func missingCaps(c *corev1.Container) []string {
	var missing []string
	for _, want := range []corev1.Capability{"NET_ADMIN", "NET_RAW"} {
		has := false
		if sc := c.SecurityContext; sc != nil && sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				has = has || a == want
			}
		}
		if !has {
			missing = append(missing, string(want))
		}
	}
	return missing
}

// refineNoNetAdmin puts istio-init's missing capabilities (KM-INIT-001)
// down to what removed them from its spec: the injector always adds both
// to istio-init, so a mutator after it did. Nothing changes when the spec
// has them.
func (in *Input) refineNoNetAdmin(f *Finding) {
	p := in.Pod
	if p == nil {
		return
	}
	var init *corev1.Container
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == istio.InitContainer {
			init = &p.Spec.InitContainers[i]
		}
	}
	if _, byInjector := p.Annotations[istio.AnnotationStatus]; init == nil || !byInjector {
		return // not the injector's istio-init: nothing is known of what it had
	}
	missing := missingCaps(init)
	if len(missing) == 0 {
		in.refineNonRootInit(f, init)
		return
	}
	them := map[bool]string{true: "it", false: "them"}[len(missing) == 1]
	f.Evidence += "; its spec has no " + strings.Join(missing, " and ")
	// The template's own istio-init, which the injector merges over its
	// own, is the pod's doing, not admission's.
	if o := in.Owner; o != nil && o.Template != nil {
		for i := range o.Template.Spec.InitContainers {
			if c := &o.Template.Spec.InitContainers[i]; c.Name == istio.InitContainer && len(missingCaps(c)) > 0 {
				f.Evidence += ": the pod template's own istio-init, which the injector merges over its own, does not add " + them
				return
			}
		}
	}
	ms := in.otherMutators()
	if len(ms) == 0 {
		f.Evidence += ", which Istio's injector adds to istio-init: the pod's own istio-init (which the injector merges over its own) or an admission mutator called after the injector removed " + them
		switch {
		case in.Injection != nil && in.Injection.OtherMutatorsUnknown != "":
			f.Evidence += " (which mutators act on the pod is unknown: " + in.Injection.OtherMutatorsUnknown + ")"
		case in.Injection != nil:
			f.Evidence += " (no other mutating webhook or MutatingAdmissionPolicyBinding matches the pod now)"
		}
		return
	}
	f.Evidence += ": Istio's injector added " + them + ", and an admission mutator called after it removed " + them
	if len(ms) == 1 {
		f.Evidence += ": removed by " + ms[0].By
	} else {
		f.Evidence += ": " + mutatorsNamed(ms)
	}
	f.Mesh = "istio-init's " + strings.Join(missing, "/") + ", which the injector adds, removed at admission by " + mutatorsNamed(ms)
	f.Fix = mutatorFix(p, ms, "removes "+them) + "\n" + meshSideCNI
}

// imageRewrite says the image of an injected container is not the one
// the injector set, and names the mutators that may have rewritten it,
// with the fix; ok is false when the image is the injector's (or which
// one that is is not known), or no mutator matches the pod.
func (in *Input) imageRewrite(name string) (by, fix string, ok bool) {
	p, ms := in.Pod, in.otherMutators()
	if p == nil || len(ms) == 0 || !istio.IsIstioContainer(name) {
		return "", "", false
	}
	if _, byInjector := p.Annotations[istio.AnnotationStatus]; !byInjector {
		return "", "", false
	}
	// An image the template's own container sets wins over the injector's.
	if o := in.Owner; o != nil && o.Template != nil {
		for _, cs := range [][]corev1.Container{o.Template.Spec.InitContainers, o.Template.Spec.Containers} {
			for _, c := range cs {
				if c.Name == name && c.Image != "" && c.Image != "auto" {
					return "", "", false
				}
			}
		}
	}
	want := in.Injection.InjectorImage
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != name || !injection.ImageDiffers(want, c.Image) {
				continue
			}
			by = name + " was added by Istio's injector with image " + want + "; its image is " + c.Image + ": rewritten at admission by " + mutatorsNamed(ms)
			return by, mutatorFix(p, ms, "rewrites it"), true
		}
	}
	return "", "", false
}
