package diagnose

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeSidecarAbsent: the app calls Istio's proxy on its own pod (waits for
// its readiness, asks it to quit, probes it), and the pod has none.
const CodeSidecarAbsent = "KM-START-018"

// sidecarPorts are the proxy's ports an app calls on localhost: Envoy's
// admin (/quitquitquit), the agent's (/quitquitquit, /healthz/ready), and
// the health port (/healthz/ready).
var sidecarPorts = []int32{istio.PortAdmin, istio.PortAgent, istio.PortHealth}

// localSidecarCall is a call in a command or an env value to one of
// sidecarPorts on the pod's own loopback.
var localSidecarCall = regexp.MustCompile(`(?:127\.0\.0\.1|localhost|\[::1\]):(15000|15020|15021)\b[^\s'";|&]*`)

// sidecarWaitGrace is how long a run-once pod may run while it calls the
// missing proxy before it is called stuck (a wrapper's wait loop).
const sidecarWaitGrace = time.Minute

func init() {
	register(&Spec{Code: CodeSidecarAbsent, Title: "the app calls a sidecar the pod does not have", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactMesh, FactLogs},
		Means:   "A container of the app calls Istio's proxy on its own pod: a wrapper that waits for 127.0.0.1:15021/healthz/ready before it starts, a Job's last step that posts to 127.0.0.1:15020/quitquitquit, a probe on 15021. The pod has no sidecar (opted out, or its namespace never selected by an injector), so nothing listens there: the wait never ends, the quit call is refused and fails the run, the probe never passes.",
		Detects: "On a pod without istio-proxy: the app containers' command, args, env values and postStart hooks that name 127.0.0.1 or localhost on 15000, 15020 or 15021, and their probes on those ports (unless an app container declares the port itself); reported when the pod shows it: such a container failed, a probe on those ports keeps the pod unready, or a run-once pod's caller still runs after a minute. The log line of the refused call is quoted when it was read.",
		Fixes:   "A choice, both named: the pod injected, when it belongs in the mesh: its template labelled sidecar.istio.io/inject=true, over an opt-out (a Job re-created, a CronJob's job template patched and its stuck run deleted; where the namespace's istio-injection label keeps every webhook away, the injection's own fix); else the calls taken out of the container's command or probe.",
		Source:  "istio/istio#6324, #11045 (Jobs end by calling the proxy's /quitquitquit); Istio docs, health checking (15021 /healthz/ready); wrappers copied from meshed charts into opted-out workloads",
		Planted: "a run-once pod opted out with sidecar.istio.io/inject=false whose command (sh -e) ends by posting to 127.0.0.1:15020/quitquitquit",
		run:     sidecarAbsent})
}

// sidecarCall is one place a container calls the missing proxy.
type sidecarCall struct {
	container string
	where     string // "command", "readinessProbe", …
	target    string // "127.0.0.1:15021/healthz/ready", "port 15021"
	probe     bool
}

func sidecarAbsent(in *Input) []Finding {
	p := in.Pod
	if p == nil || in.injected() || p.Spec.HostNetwork || p.DeletionTimestamp != nil {
		return nil
	}
	calls := sidecarCalls(p)
	if len(calls) == 0 {
		return nil
	}
	symptom := sidecarAbsentSymptom(in, calls)
	if symptom == "" {
		return nil
	}
	var what []string
	for _, c := range calls {
		what = append(what, fmt.Sprintf("%s's %s calls %s", c.container, c.where, c.target))
	}
	// Said from the pod alone: every command gives the same answer.
	why := "it has no sidecar (no injector took it: kubectl mesh why-injected says why)"
	if p.Labels[istio.KeyInject] == "false" {
		why = `it has no sidecar (its label sidecar.istio.io/inject="false" opts it out)`
	} else if p.Annotations[istio.KeyInject] == "false" {
		why = `it has no sidecar (its annotation sidecar.istio.io/inject="false" opts it out)`
	}
	f := Finding{Status: Fail,
		Evidence: fmt.Sprintf("%s: ports of Istio's proxy in its own pod, but %s, so nothing listens there: %s", strings.Join(what, "; "), why, symptom),
		Fix:      sidecarAbsentFix(in, calls),
		Mesh:     "the pod has no sidecar, and its app calls the proxy's ports",
		explains: []string{CodePodNotReady, CodeAppFailing, CodeJobFailed, CodeNotRunning}}
	return []Finding{f}
}

// sidecarCalls are the places p's app containers call the proxy's ports on
// loopback (in order: init containers, then containers).
func sidecarCalls(p *corev1.Pod) []sidecarCall {
	own := map[int32]bool{}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			own[port.ContainerPort] = true
		}
	}
	var out []sidecarCall
	for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
		if istio.IsIstioContainer(c.Name) {
			continue
		}
		texts := map[string]string{"command": strings.Join(slices.Concat(c.Command, c.Args), " ")}
		for _, e := range c.Env {
			texts["env "+e.Name] = e.Value
		}
		if h := c.Lifecycle; h != nil && h.PostStart != nil && h.PostStart.Exec != nil {
			texts["postStart hook"] = strings.Join(h.PostStart.Exec.Command, " ")
		}
		for _, where := range slices.Sorted(maps.Keys(texts)) {
			for _, m := range localSidecarCall.FindAllStringSubmatch(texts[where], -1) {
				if port := atoi32(m[1]); !own[port] {
					out = append(out, sidecarCall{container: c.Name, where: where, target: m[0]})
				}
			}
		}
		for _, pr := range []struct {
			field string
			probe *corev1.Probe
		}{{"readinessProbe", c.ReadinessProbe}, {"livenessProbe", c.LivenessProbe}, {"startupProbe", c.StartupProbe}} {
			if port, ok := localProbePort(pr.probe); ok && slices.Contains(sidecarPorts, port) && !own[port] {
				out = append(out, sidecarCall{container: c.Name, where: pr.field, target: fmt.Sprintf("port %d (the proxy's %s)", port, istio.PortRole(port)), probe: true})
			}
		}
	}
	return out
}

// localProbePort is the number of the port a probe asks on the pod's own
// address (not for a named port, nor an httpGet to another host).
func localProbePort(pr *corev1.Probe) (int32, bool) {
	if pr == nil {
		return 0, false
	}
	var port intstr.IntOrString
	switch {
	case pr.HTTPGet != nil:
		if h := pr.HTTPGet.Host; h != "" && h != "localhost" && h != "127.0.0.1" {
			return 0, false
		}
		port = pr.HTTPGet.Port
	case pr.TCPSocket != nil:
		port = pr.TCPSocket.Port
	case pr.GRPC != nil:
		return pr.GRPC.Port, true
	default:
		return 0, false
	}
	if port.Type != intstr.Int {
		return 0, false
	}
	return port.IntVal, true
}

// sidecarAbsentSymptom is what the pod shows of the calls failing, "" when
// it shows nothing (a wrapper that tolerates the refusal: healthy).
func sidecarAbsentSymptom(in *Input, calls []sidecarCall) string {
	p, s := in.Pod, in.Startup
	callers := map[string]bool{}
	probed := false
	for _, c := range calls {
		callers[c.container] = true
		probed = probed || c.probe
	}
	if s != nil {
		for _, cs := range slices.Concat(s.InitContainers, s.Containers) {
			if !callers[cs.Name] {
				continue
			}
			failed := cs.Failing || cs.State == "terminated" && cs.ExitCode != nil && *cs.ExitCode != 0
			if failed {
				out := fmt.Sprintf("%s failed", cs.Name)
				if cs.LastFailure != "" {
					out += " (" + cs.LastFailure + ")"
				}
				if line := refusedLine(cs.Log); line != "" {
					out += "; its log: " + line
				}
				return out
			}
		}
	}
	if probed && p.Status.Phase == corev1.PodRunning {
		if ready, since, _ := readiness(p); !ready && (s == nil || since.IsZero() || s.Now.Sub(since) >= sidecarWaitGrace) {
			return "its probe on the proxy's port fails, so the pod never becomes ready"
		}
	}
	runOnce := p.Spec.RestartPolicy == corev1.RestartPolicyNever || p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
	if runOnce && p.Status.Phase == corev1.PodRunning && s != nil {
		for _, cs := range s.Containers {
			if callers[cs.Name] && cs.State == "running" && cs.StartedAt != nil && s.Now.Sub(*cs.StartedAt) >= sidecarWaitGrace {
				return fmt.Sprintf("%s still runs after %s, waiting on a proxy that never comes, so its Job never ends", cs.Name, s.Now.Sub(*cs.StartedAt).Round(time.Second))
			}
		}
	}
	return ""
}

// refusedLine is the log's last line about a refused connection to
// loopback, "" when there is none.
func refusedLine(l *startup.LogTail) string {
	if l == nil {
		return ""
	}
	lines := slices.Concat(l.Previous, l.Current)
	for i := len(lines) - 1; i >= 0; i-- {
		low := strings.ToLower(lines[i])
		if strings.Contains(low, "refused") && (strings.Contains(low, "127.0.0.1") || strings.Contains(low, "localhost") || localSidecarCall.MatchString(low)) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

// sidecarAbsentFix names both choices: the pod injected, when it belongs
// in the mesh, by the label sidecar.istio.io/inject=true on its template
// (the default revision's webhook takes a pod so labelled in a namespace
// with no injection label, a namespace's own revision in one with it; the
// label wins over an opt-out annotation) — read from the pod alone, so
// that every command gives the same fix — or, where the namespace's label
// keeps every webhook away, the injection's own fix; else the calls taken
// out.
func sidecarAbsentFix(in *Input, calls []sidecarCall) string {
	var places []string
	for _, c := range calls {
		place := c.container + "'s " + c.where
		if !slices.Contains(places, place) {
			places = append(places, place)
		}
	}
	without := "# or, if it is meant to run outside the mesh: remove the calls to the proxy from " + strings.Join(places, ", ")
	note := "a choice: this injects the pod, if it belongs in the mesh (its calls to the proxy then reach one)"
	if r := in.Injection; r != nil && r.Fix != "" && namespaceBlocks(in) {
		return firstLineNote(r.Fix, note) + "\n" + without
	}
	inject := in.templateSpecFix(`{"metadata":{"labels":{"` + istio.KeyInject + `":"true"}}}`)
	if inject == "" {
		return "# a choice: label the pod " + istio.KeyInject + "=true in its manifest and re-create it, if it belongs in the mesh\n" + without
	}
	return firstLineNote(inject, note) + "\n" + without
}

// atoi32 is a port the pattern matched (digits only).
func atoi32(s string) int32 {
	n, _ := strconv.ParseInt(s, 10, 32)
	return int32(n)
}
