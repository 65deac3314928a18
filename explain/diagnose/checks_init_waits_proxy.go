package diagnose

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeInitWaitsClassicProxy: an app init container waits on a port of a
// classic istio-proxy, which starts only after every init container.
const CodeInitWaitsClassicProxy = "KM-INIT-011"

func init() {
	register(&Spec{Code: CodeInitWaitsClassicProxy, Title: "init container waits for a classic sidecar", Stage: CheckInit, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "An app init container's command waits on a port of the proxy (its admin 15000, its agent's 15020, its health 15021, its listeners 15001 and 15006, its metrics 15090), and the pod's istio-proxy is a classic sidecar: one of the pod's containers, which the kubelet starts only once every init container has completed. Nothing listens there while the init container runs, so the pod never leaves init: a deadlock, met at once on a pod created with a classic sidecar (a revision without native sidecars, nativeSidecar \"false\", an upgrade to one).",
		Detects: "On a pod with a classic istio-proxy, each app init container that has not completed: whether its command and arguments name one of the proxy's ports as a word of their own. Read from the spec alone, it also runs on a manifest (-f) and on the pod an upgrade's target revision would make (upgrade-plan).",
		Fixes:   "The workload's template annotated sidecar.istio.io/nativeSidecar: \"true\" (a native sidecar starts before the app's init containers); where the cluster cannot run native sidecars, the init container's wait has to go (advice).",
		Source:  "Istio docs, sidecar injection: native sidecars and init containers that need the network (istio/istio#11130); Kubernetes: init containers run to completion before the app's containers start",
		Planted: "a pod with a classic sidecar (nativeSidecar \"false\") and an init container looping until 127.0.0.1:15021 answers",
		run:     initWaitsClassicProxy})
}

// proxyPort is a port of the proxy named as a word of its own.
var proxyPort = regexp.MustCompile(`(^|[^0-9])(1500[016]|1502[01]|15090)([^0-9]|$)`)

func initWaitsClassicProxy(in *Input) []Finding {
	p := in.Pod
	if p == nil || !classicSidecar(p) {
		return nil
	}
	done := map[string]bool{}
	for _, st := range p.Status.InitContainerStatuses {
		done[st.Name] = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0 || st.State.Running != nil && st.Ready
	}
	for _, c := range p.Spec.InitContainers {
		if istio.IsIstioContainer(c.Name) || done[c.Name] {
			continue
		}
		m := proxyPort.FindStringSubmatch(strings.Join(append(append([]string{}, c.Command...), c.Args...), " "))
		if m == nil {
			continue
		}
		ev := "init container " + c.Name + "'s command waits on port " + m[2] + ", the proxy's; istio-proxy is a classic sidecar, which the kubelet starts only once every init container has completed, so " + c.Name + " waits for ever and the pod never leaves init"
		return []Finding{{Evidence: ev, Fix: initWaitsFix(p, c.Name), Mesh: "the classic sidecar's start order (istio-proxy after every init container)", container: c.Name}}
	}
	return nil
}

// initWaitsFix gives the template a native sidecar, which starts before the
// app's init containers; advice where the template cannot be patched or
// the cluster cannot run one.
func initWaitsFix(p *corev1.Pod, container string) string {
	advice := startup.NativeSidecarAdvice(p)
	if !advice.Annotation {
		return "# init container " + container + " cannot wait for a classic sidecar: drop the wait (or run what it waits for after the app starts); native sidecars: " + advice.Note
	}
	fix := setTemplateAnnotations(p, map[string]string{istio.AnnotationNativeSidecar: "true"})
	if strings.HasPrefix(fix, "in the pod's manifest") {
		return "# " + fix + "   # a native sidecar starts before the app's init containers"
	}
	fix += "   # a native sidecar starts before the app's init containers, so " + container + " finds the proxy"
	if p.Name != "" && strings.HasPrefix(templateOwner(p), "statefulset/") && p.Status.Phase == corev1.PodPending {
		fix += "\nkubectl delete pod " + p.Name + " -n " + p.Namespace + "   # a StatefulSet does not replace a pod stuck in init: it makes it again from the changed template"
	}
	return fix
}
