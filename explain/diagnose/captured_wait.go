package diagnose

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// refineCapturedWait puts a pod stuck in an app init container (KM-INIT-005)
// down to the classic sidecar's order, when that init container runs
// after the capture rules and before any proxy (KM-INIT-007 of the same
// container): its outbound connections go to 15001, where nothing listens,
// and istio-proxy starts only once every init container has completed, so
// one that waits for the network or for the proxy waits for ever. The fix
// gives the pod a native sidecar, which starts before the app's init
// containers, and re-creates the stuck pod.
func (in *Input) refineCapturedWait(f *Finding, all []Finding) {
	p := in.Pod
	if p == nil || f.container == "" || istio.IsIstioContainer(f.container) {
		return
	}
	captured := false
	for _, g := range all {
		captured = captured || g.Code == CodeInitCaptured && g.container == f.container
	}
	waits := in.waitsForProxy(f.container)
	if !captured && waits == "" || !classicSidecar(p) {
		return
	}
	if waits != "" {
		f.Evidence += "; " + waits + ": under a classic sidecar istio-proxy starts only once every init container has completed, so it waits for ever"
	} else {
		f.Evidence += "; it runs after istio-init redirected the pod's traffic and before any proxy: under a classic sidecar istio-proxy starts only once every init container has completed, so its outbound connections go to port 15001, where nothing listens: if it waits for the network, it waits for ever"
	}
	f.Mesh = "the classic sidecar's start order (istio-proxy after every init container)"
	if advice := startup.NativeSidecarAdvice(p); !advice.Annotation {
		f.Fix = "# run init container " + f.container + " as uid 1337 (its traffic is then not captured), or exclude what it calls (traffic.sidecar.istio.io/excludeOutboundIPRanges or excludeOutboundPorts); native sidecars: " + advice.Note
		return
	}
	fix := setTemplateAnnotations(p, map[string]string{istio.AnnotationNativeSidecar: "true"})
	if strings.HasPrefix(fix, "in the pod's manifest") {
		f.Fix = "# " + fix + "   # a native sidecar starts before the app's init containers"
		return
	}
	fix += "   # a native sidecar starts before the app's init containers, so " + f.container + " has the proxy; or run " + f.container + " as uid 1337 (its traffic is then not captured)"
	if strings.HasPrefix(templateOwner(p), "statefulset/") {
		fix += "\nkubectl delete pod " + p.Name + " -n " + p.Namespace + "   # a StatefulSet does not replace a pod stuck in init: it makes it again from the changed template"
	}
	f.Fix = fix
}

// proxyWord: a port of the proxy, or its name, standing alone.
var proxyWord = regexp.MustCompile(`(?i)(^|[^0-9a-z])(1500[016]|1502[01]|15090|envoy|istio-proxy|sidecar)([^0-9a-z]|$)`)

// waitsForProxy says how init container name shows that it waits for the
// proxy: its command, or its log, names a port of the proxy or the proxy;
// "" when neither does.
func (in *Input) waitsForProxy(name string) string {
	p := in.Pod
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			if m := proxyWord.FindStringSubmatch(strings.Join(append(append([]string{}, c.Command...), c.Args...), " ")); m != nil {
				return "its command waits on " + m[2] + ", the proxy's"
			}
		}
	}
	if s := in.Startup; s != nil {
		for _, c := range s.InitContainers {
			if c.Name == name && c.Log != nil {
				for _, l := range c.Log.Current {
					if m := proxyWord.FindStringSubmatch(l); m != nil {
						return fmt.Sprintf("its log waits on the proxy (%q)", oneLine(l, 120))
					}
				}
			}
		}
	}
	return ""
}

// classicSidecar: the pod's istio-proxy is one of its containers.
func classicSidecar(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == istio.ProxyContainer {
			return true
		}
	}
	return false
}
