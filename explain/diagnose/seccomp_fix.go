package diagnose

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// seccompMissing is the runtime's refusal of a Localhost seccomp profile
// that is not on the node, and the path it looked for.
var seccompMissing = regexp.MustCompile(`cannot load seccomp profile "([^"]+)"`)

// seccompProfileMissing: a container cannot be created because the
// Localhost seccomp profile it runs under is not on the node. Said where
// the profile is set: the container's own securityContext, or the pod's,
// which every container without its own inherits (istio-init and
// istio-proxy included). The fix is a choice: the runtime's default
// profile in the template, or the file put on every node.
func (in *Input) seccompProfileMissing(container, text string) (ev, fix string, ok bool) {
	p := in.Pod
	m := seccompMissing.FindStringSubmatch(text)
	if p == nil || m == nil {
		return "", "", false
	}
	spec, _ := in.container(container)
	localhost := func(sp *corev1.SeccompProfile) string {
		if sp == nil || sp.Type != corev1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil {
			return ""
		}
		return *sp.LocalhostProfile
	}
	const runtimeDefault = `"seccompProfile":{"type":"RuntimeDefault","localhostProfile":null}`
	var patch string
	switch {
	case spec != nil && spec.SecurityContext != nil && spec.SecurityContext.SeccompProfile != nil:
		name := localhost(spec.SecurityContext.SeccompProfile)
		if name == "" {
			return "", "", false
		}
		ev = fmt.Sprintf("container %s's own securityContext.seccompProfile is Localhost %q, and the node has no %s", container, name, m[1])
		list := "containers"
		for _, c := range p.Spec.InitContainers {
			if c.Name == container {
				list = "initContainers"
			}
		}
		patch = fmt.Sprintf(`{"spec":{%q:[{"name":%q,"securityContext":{%s}}]}}`, list, container, runtimeDefault)
	case p.Spec.SecurityContext != nil && localhost(p.Spec.SecurityContext.SeccompProfile) != "":
		ev = fmt.Sprintf("the pod's securityContext.seccompProfile is Localhost %q, which %s inherits (it sets none of its own), and the node has no %s", localhost(p.Spec.SecurityContext.SeccompProfile), container, m[1])
		patch = `{"spec":{"securityContext":{` + runtimeDefault + `}}}`
	default:
		return "", "", false
	}
	fix = in.templateSpecFix(patch)
	if fix == "" {
		return "", "", false
	}
	return ev, firstLineNote(fix, "a choice: the container runtime's default profile; or keep the Localhost profile and put its file at "+m[1]+" on every node"), true
}
