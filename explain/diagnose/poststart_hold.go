package diagnose

import (
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// postStartHold names the app container before a classic istio-proxy
// whose postStart hook holds the kubelet (the proxy after it has not
// started), with the fix: a native sidecar, which starts before the app's
// containers (or the hold, which puts the proxy first), then the end of
// this pod's hook; "" when it is not so.
func (in *Input) postStartHold() (container, fix string) {
	p := in.Pod
	c := startup.PostStartHolder(p)
	if c == nil {
		return "", ""
	}
	fix = in.holdFix("")
	if a := startup.NativeSidecarAdvice(p); a.Annotation {
		if cmd := setTemplateAnnotations(p, map[string]string{istio.AnnotationNativeSidecar: "true"}); !strings.HasPrefix(cmd, "in the pod's manifest") {
			fix = cmd + "   # a native sidecar starts before the app's containers and their hooks; or hold the app until the proxy is ready (proxy.istio.io/config holdApplicationUntilProxyStarts: true puts the proxy first)"
		}
	}
	if fix == "" {
		return "container " + c.Name, "kubectl describe pod " + in.Target + "   # give the pod a native sidecar (" + istio.AnnotationNativeSidecar + `: "true"), or hold the app until the proxy is ready`
	}
	if end := endHook(p, *c); end != "" {
		fix += "\n" + end
	}
	return "container " + c.Name, fix
}

// shells are the programs whose own kill reaches every process (a shell
// builtin: the image needs no kill program).
var shells = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true, "zsh": true, "ksh": true}

// endHook is the command that ends a held pod's postStart hook: the
// kubelet neither starts the containers after a hook that never returns
// nor stops the pod while it runs, so the old pod of a patched template
// would stay Terminating for ever. Killing every process of the container
// but its first (kill -1 spares the container's PID 1 and the caller) ends
// the hook; the kubelet then lets the pod go. "" for a hook that is not a
// command (the kubelet's own request ends it).
func endHook(p *corev1.Pod, c corev1.Container) string {
	h := c.Lifecycle.PostStart
	if h.Exec == nil || len(h.Exec.Command) == 0 {
		return ""
	}
	kill := "kill -9 -1"
	if sh := h.Exec.Command[0]; shells[path.Base(sh)] && !strings.ContainsAny(sh, " '\"$`\\") {
		kill = sh + " -c 'kill -9 -1'"
	}
	return "kubectl exec -n " + p.Namespace + " " + p.Name + " -c " + c.Name + " -- " + kill +
		"   # this pod's hook never returns, and the kubelet neither starts nor stops a pod held in a postStart hook: ending the hook's processes (every one but the container's first) lets the kubelet replace it"
}
