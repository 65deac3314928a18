package diagnose

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// notRunning is the start row of a pod that is not running: the
// scheduler's or the kubelet's own reason and message, a failure once the
// platform has said no (unschedulable, failed) or the pod is past its start.
func (in *Input) notRunning() (status, evidence, fix string) {
	s, p := in.Startup, in.Pod
	describe := "kubectl describe pod " + in.Target
	if p == nil {
		if unscheduled(s) {
			return Warning, "the pod is on no node yet: the scheduler has not placed it, so nothing has run", describe + "   # the scheduler's events say why"
		}
		return Warning, "the pod is " + s.Phase, describe
	}
	age := s.Now.Sub(p.CreationTimestamp.Time).Round(time.Second)
	if status, ev, fix, ok := in.heldByFinalizers(); ok {
		return status, ev, fix
	}
	switch p.Status.Phase {
	case "":
		return Unknown, "the pod has no status yet: no kubelet has reported it", describe
	case corev1.PodFailed:
		ev := "the pod Failed"
		if p.Status.Reason != "" {
			ev += ": " + p.Status.Reason
		}
		if m := p.Status.Message; m != "" {
			ev += ": " + oneLine(m, 240)
		}
		var ends []string
		for _, c := range append(append([]startup.ContainerStartup(nil), s.InitContainers...), s.Containers...) {
			if c.State == "terminated" && c.ExitCode != nil && *c.ExitCode != 0 {
				ends = append(ends, c.Name+" "+c.LastFailure)
			}
		}
		if len(ends) > 0 {
			ev += "; " + strings.Join(ends, "; ")
		}
		if strings.HasPrefix(p.Status.Reason, "OutOf") && in.injected() {
			// The kubelet of the node the pod is bound to (spec.nodeName)
			// has no room for it: the sidecar's requests count too.
			ev += "; " + proxyRequests(p)
			if keys := proxyResourceAnnotations(p.Annotations); len(keys) > 0 {
				in.notRunningMesh = "the pod's " + quoteAnnotations(p.Annotations, keys)
				return Fail, ev + ": the sidecar's requests, set by " + in.notRunningMesh + ", count against the node too", removeAnnotations(p, keys) + "   # the sidecar then asks for the mesh's own defaults; or set smaller values"
			}
		}
		if p.Status.Reason == "Evicted" {
			return Fail, ev, describe + "   # the node evicted it; its controller makes a new pod"
		}
		return Fail, ev, describe + "   # the containers' exit codes and events say why"
	case corev1.PodUnknown:
		return Fail, "the pod's phase is Unknown: node " + p.Spec.NodeName + " stopped reporting it", "kubectl get node " + p.Spec.NodeName + " -o wide   # is the node Ready?"
	}
	if p.Spec.NodeName == "" {
		if status, ev, fix, ok := in.gated(age); ok {
			return status, ev, fix
		}
		ev := "the pod is on no node yet: the scheduler has not placed it, so nothing has run"
		said := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason != "" {
				said = c.Reason
				if c.Message != "" {
					said += ": " + oneLine(c.Message, 300)
				}
			}
		}
		if said == "" {
			if evs := warningEvents(s, "", 1); len(evs) > 0 {
				said = evs[0]
			}
		}
		if said == "" {
			if age < StartGrace {
				return Warning, ev, describe + "   # the scheduler's events say why"
			}
			return Fail, ev + " for " + age.String(), describe + "   # the scheduler's events say why"
		}
		ev = "the scheduler cannot place the pod: " + said
		if in.injected() && strings.Contains(said, "Insufficient") {
			ev += "; " + proxyRequests(p)
			if keys := proxyResourceAnnotations(p.Annotations); len(keys) > 0 {
				in.notRunningMesh = "the pod's " + quoteAnnotations(p.Annotations, keys)
				ev += ": the sidecar's requests, set by " + in.notRunningMesh + ", count against the nodes too"
				return Fail, ev, removeAnnotations(p, keys) + "   # the sidecar then asks for the mesh's own defaults; or set smaller values"
			}
		}
		if sel := p.Spec.NodeSelector; len(sel) > 0 && strings.Contains(said, "node affinity/selector") {
			var kv []string
			for k, v := range sel {
				kv = append(kv, k+"="+v)
			}
			sort.Strings(kv)
			if owner := templateOwner(p); owner != "" {
				return Fail, ev, "kubectl patch " + owner + " -n " + p.Namespace + ` --type=json -p '[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]'` +
					"   # no node has " + strings.Join(kv, ", ") + ": drop the selector, or label a node: kubectl label node NODE " + strings.Join(kv, " ")
			}
			return Fail, ev, "kubectl label node NODE " + strings.Join(kv, " ") + "   # no node has these labels; or remove the nodeSelector from the pod's manifest"
		}
		if m := missingClaim.FindStringSubmatch(said); m != nil {
			return Fail, ev, missingFix(in, said, "")
		}
		if why, fix := surgeBlocked(in, said); fix != "" {
			return Fail, ev + "; " + why, fix
		}
		return Fail, ev, describe + "   # the scheduler's message above says which nodes refuse it and why"
	}
	ev := "the pod is " + string(p.Status.Phase) + " on node " + p.Spec.NodeName
	if age > 0 {
		ev += " for " + age.String()
	}
	if evs := warningEvents(s, "", 3); len(evs) > 0 {
		ev += "; events: " + strings.Join(evs, "; ")
	}
	// The proxy's own startup probe does not count here: it has not
	// started at all.
	if hook, fix := in.postStartHold(); hook != "" && age >= StartGrace {
		in.notRunningMesh = "the classic sidecar's place after " + hook
		return Fail, ev + "; " + hook + " has a postStart hook and istio-proxy comes after it: the kubelet starts a pod's containers in order and waits for each one's postStart hook, so istio-proxy has not started and the pod's traffic has no proxy; a hook that needs the network (or the proxy) waits for ever", fix
	}
	if age < grace(p) {
		return Warning, ev, describe
	}
	return Fail, ev, describe + "   # its events say what it waits for"
}

// proxyRequests says what the sidecar asks of the node, and what set it.
func proxyRequests(p *corev1.Pod) string {
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name != istio.ProxyContainer {
			continue
		}
		req := c.Resources.Requests
		s := fmt.Sprintf("the sidecar istio-proxy requests cpu %s and memory %s of it too", req.Cpu().String(), req.Memory().String())
		var set []string
		for _, k := range []string{istio.AnnotationProxyCPU, istio.AnnotationProxyMemory} {
			if v, ok := p.Annotations[k]; ok {
				set = append(set, fmt.Sprintf("%s=%q", k, v))
			}
		}
		if len(set) > 0 {
			s += " (" + strings.Join(set, ", ") + ")"
		}
		return s
	}
	return ""
}
