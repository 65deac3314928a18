package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// freePort is the port an app's port that collides with the proxy's moves
// to: 6000 lower (15090 → 9090, 15020 → 9020), the next one up while the
// pod or the proxy uses it.
func freePort(p *corev1.Pod, from int32) int32 {
	used := map[int32]bool{}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				used[port.ContainerPort] = true
			}
		}
	}
	to := from - 6000
	for used[to] || slices.Contains(istio.ReservedPorts, to) {
		to++
	}
	return to
}

// wordPort matches a port number standing alone (not inside a longer
// number).
func wordPort(port int32) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^0-9])` + strconv.Itoa(int(port)) + `([^0-9]|$)`)
}

// moveContainerPorts is the strategic merge patch of one container that
// moves its ports (from → to): the declared ports, its probes that ask
// them, and the same number in its command, args and env values, where
// the app reads it. found says
// whether the number was in any of them (else the app's own setting,
// somewhere else, must move with it).
func moveContainerPorts(c corev1.Container, rewritten map[string]*corev1.Probe, moves map[int32]int32) (patch map[string]any, found bool) {
	patch = map[string]any{"name": c.Name}
	var ports []any
	for _, port := range c.Ports {
		to, ok := moves[port.ContainerPort]
		if !ok {
			continue
		}
		moved := map[string]any{"containerPort": to}
		if port.Name != "" {
			moved["name"] = port.Name
		}
		if port.Protocol != "" {
			moved["protocol"] = port.Protocol
		}
		ports = append(ports, map[string]any{"$patch": "delete", "containerPort": port.ContainerPort}, moved)
	}
	patch["ports"] = ports
	words := make(map[*regexp.Regexp]string, len(moves))
	for from, to := range moves {
		words[wordPort(from)] = "${1}" + strconv.Itoa(int(to)) + "${2}"
	}
	replace := func(s string) string {
		for re, to := range words {
			s = re.ReplaceAllString(s, to)
		}
		return s
	}
	for field, list := range map[string][]string{"command": c.Command, "args": c.Args} {
		changed := make([]string, len(list))
		differs := false
		for i, s := range list {
			changed[i] = replace(s)
			differs = differs || changed[i] != s
		}
		if differs {
			patch[field], found = changed, true
		}
	}
	for field, probe := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe} {
		if orig, ok := rewritten[field]; ok {
			probe = orig // the template's probe, as the injector kept it
		}
		if moved := moveProbePort(probe, moves); moved != nil {
			patch[field] = moved
		}
	}
	var env []any
	for _, e := range c.Env {
		if e.ValueFrom == nil && replace(e.Value) != e.Value {
			env = append(env, map[string]any{"name": e.Name, "value": replace(e.Value)})
		}
	}
	if len(env) > 0 {
		patch["env"], found = env, true
	}
	return patch, found
}

// rewrittenProbes are the probes of container name as its template has
// them, when the injector rewrote them to the agent's port (istio-proxy's
// ISTIO_KUBE_APP_PROBERS keeps them), by field: "readinessProbe", …
func rewrittenProbes(p *corev1.Pod, name string) map[string]*corev1.Probe {
	var value string
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != istio.ProxyContainer {
				continue
			}
			for _, e := range c.Env {
				if e.Name == "ISTIO_KUBE_APP_PROBERS" {
					value = e.Value
				}
			}
		}
	}
	var kept map[string]*corev1.Probe
	if value == "" || json.Unmarshal([]byte(value), &kept) != nil {
		return nil
	}
	out := map[string]*corev1.Probe{}
	for field, suffix := range map[string]string{"readinessProbe": "readyz", "livenessProbe": "livez", "startupProbe": "startupz"} {
		if probe, ok := kept["/app-health/"+name+"/"+suffix]; ok && probe != nil {
			out[field] = probe
		}
	}
	return out
}

// moveProbePort is the strategic merge patch of a probe that asks one of
// the ports that move (by number: a named port moves with its
// declaration), nil when it asks none.
func moveProbePort(probe *corev1.Probe, moves map[int32]int32) map[string]any {
	if probe == nil {
		return nil
	}
	moved := func(port intstr.IntOrString) (int32, bool) {
		if port.Type != intstr.Int {
			return 0, false
		}
		to, ok := moves[port.IntVal]
		return to, ok
	}
	h := probe.ProbeHandler
	switch {
	case h.HTTPGet != nil:
		if to, ok := moved(h.HTTPGet.Port); ok {
			return map[string]any{"httpGet": map[string]any{"port": to}}
		}
	case h.TCPSocket != nil:
		if to, ok := moved(h.TCPSocket.Port); ok {
			return map[string]any{"tcpSocket": map[string]any{"port": to}}
		}
	case h.GRPC != nil:
		if to, ok := moves[h.GRPC.Port]; ok {
			return map[string]any{"grpc": map[string]any{"port": to}}
		}
	}
	return nil
}

// movePortsFix is the command that moves the app's ports that collide with
// the proxy's to free ones, where the pod's template is, with the Services
// whose numeric targetPort names them; "" when the pod's template cannot
// be changed by a command (a bare pod not applied from a manifest).
func (in *Input) movePortsFix(cs []corev1.Container) string {
	p := in.Pod
	lists := map[string][]any{}
	var said, elsewhere []string
	moves := map[int32]int32{}
	for _, c := range cs {
		mine := map[int32]int32{}
		for _, port := range c.Ports {
			if slices.Contains(istio.ReservedPorts, port.ContainerPort) {
				if _, done := moves[port.ContainerPort]; !done {
					moves[port.ContainerPort] = freePort(p, port.ContainerPort)
				}
				mine[port.ContainerPort] = moves[port.ContainerPort]
				said = append(said, fmt.Sprintf("%s's %d → %d", c.Name, port.ContainerPort, mine[port.ContainerPort]))
			}
		}
		if len(mine) == 0 {
			continue
		}
		patch, found := moveContainerPorts(c, rewrittenProbes(p, c.Name), mine)
		if !found {
			elsewhere = append(elsewhere, c.Name)
		}
		list := "containers"
		if slices.ContainsFunc(p.Spec.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name }) {
			list = "initContainers" // the app's own native sidecar
		}
		lists[list] = append(lists[list], patch)
	}
	if len(lists) == 0 {
		return ""
	}
	sort.Strings(said)
	podSpec := map[string]any{}
	for k, v := range lists {
		podSpec[k] = v
	}
	spec := plainJSON(map[string]any{"spec": podSpec})
	why := "   # moves " + quoteList(said) + " (in its ports, probes, command, args and env)"
	if len(elsewhere) > 0 {
		why += "; " + quoteList(elsewhere) + " takes its port from elsewhere (a config file): change it there too"
	}
	fix := in.templateSpecFix(spec)
	if fix == "" {
		return ""
	}
	first, rest, _ := strings.Cut(fix, "\n")
	lines := []string{first + why}
	for _, s := range in.Services {
		for i, sp := range s.Spec.Ports {
			if to, ok := moves[int32(sp.TargetPort.IntValue())]; ok && sp.TargetPort.Type == intstr.Int {
				lines = append(lines, fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"replace","path":"/spec/ports/%d/targetPort","value":%d}]'   # its targetPort moves with the app`, s.Name, s.Namespace, i, to))
			}
		}
	}
	if rest != "" {
		lines = append(lines, rest) // a stuck run or pod, after the change
	}
	return strings.Join(lines, "\n")
}

// plainJSON is v as JSON, & < > as they are (a command's text).
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // maps of strings and numbers always encode
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// sq escapes s for a shell word in single quotes.
func sq(s string) string {
	return strings.ReplaceAll(s, "'", `'\''`)
}

// isReady says whether the pod is ready now.
func isReady(p *corev1.Pod) bool {
	ready, _, _ := readiness(p)
	return ready
}

// templateSpecFix is the command that applies a strategic merge patch of a
// pod (spec, to the pod's own level) where its template is: the workload's
// template; a CronJob's job template, its stuck run deleted; a Job or a
// bare pod re-created. "" for a bare pod without its applied manifest.
func (in *Input) templateSpecFix(podPatch string) string {
	p := in.Pod
	owner := templateOwner(p)
	var tmpl map[string]any
	if err := json.Unmarshal([]byte(podPatch), &tmpl); err != nil {
		panic(err) // the callers' patches are JSON
	}
	wrap := func(path ...string) string {
		v := any(tmpl)
		for i := len(path) - 1; i >= 0; i-- {
			v = map[string]any{path[i]: v}
		}
		return sq(plainJSON(v))
	}
	cron := ""
	if in.Owner != nil && in.Owner.Kind == "Job" {
		cron, _ = strings.CutPrefix(in.Owner.Controller, "CronJob/")
	}
	switch {
	case cron != "":
		return fmt.Sprintf("kubectl patch cronjob/%s -n %s --type=strategic -p '%s'", cron, p.Namespace, wrap("spec", "jobTemplate", "spec", "template")) +
			"\n" + stuckRun(strings.TrimPrefix(owner, "job/"), cron, p.Namespace)
	case strings.HasPrefix(owner, "job/"):
		job := strings.TrimPrefix(owner, "job/")
		strip, _, _ := strings.Cut(injection.RecreateJob(job, p.Namespace, nil, nil), " -o json | kubectl replace")
		return strip + " -o json | kubectl patch --local -f - --type=strategic -p '" + wrap("spec", "template") + "' -o json | kubectl replace --force -f -   # a Job's pod template cannot be patched: this deletes job/" + job + " and creates it again with the change"
	case owner == "":
		return recreateBarePod(p, "", "strategic", sq(podPatch))
	case strings.HasPrefix(owner, "statefulset/") && !isReady(p):
		return fmt.Sprintf("kubectl patch %s -n %s --type=strategic -p '%s'", owner, p.Namespace, wrap("spec", "template")) +
			"\nkubectl delete pod " + p.Name + " -n " + p.Namespace + "   # a StatefulSet does not replace a pod that never became ready; it creates it again from the new template"
	}
	return fmt.Sprintf("kubectl patch %s -n %s --type=strategic -p '%s'", owner, p.Namespace, wrap("spec", "template")) + replacePod(p, owner)
}
