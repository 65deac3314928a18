package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// templateProxy is the pod template's own istio-proxy container, which the
// injector merges over the one it adds (its image, probes, command win):
// nil when the template has none, or its owner was not read.
func (in *Input) templateProxy() *corev1.Container {
	if in.Pod == nil || in.Pod.Annotations[istio.AnnotationStatus] == "" {
		return nil
	}
	t, _ := in.podTemplate() // a bare pod's: the manifest it was applied with
	if t == nil {
		return nil
	}
	for _, cs := range [][]corev1.Container{t.Spec.InitContainers, t.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == istio.ProxyContainer {
				return &cs[i]
			}
		}
	}
	return nil
}

// overrides says what of the injected proxy the template's own container
// replaces: an image other than "auto", probes, a command or arguments.
func overrides(c *corev1.Container) []string {
	var out []string
	if c.Image != "" && c.Image != "auto" {
		out = append(out, "its image "+c.Image)
	}
	if p := c.ReadinessProbe; p != nil {
		out = append(out, "its readiness probe"+probePort(p))
	}
	if p := c.StartupProbe; p != nil {
		out = append(out, "its startup probe"+probePort(p))
	}
	if p := c.LivenessProbe; p != nil {
		out = append(out, "its liveness probe"+probePort(p))
	}
	if len(c.Command) > 0 || len(c.Args) > 0 {
		out = append(out, "its command or arguments")
	}
	return out
}

func probePort(p *corev1.Probe) string {
	switch {
	case p.HTTPGet != nil:
		return " (port " + p.HTTPGet.Port.String() + ")"
	case p.TCPSocket != nil:
		return " (port " + p.TCPSocket.Port.String() + ")"
	}
	return ""
}

// proxyFailureCodes are the findings of an injected proxy that does not
// start or become ready.
var proxyFailureCodes = map[string]bool{CodeProxyNotReady: true, CodeProxyFailing: true, CodeStuckInInit: true, CodeCannotStart: true, CodeInitContainerFailed: true}

// templateOverride puts an injected proxy that does not start or become
// ready down to the pod template's own istio-proxy container, when it
// replaces what the injector sets: the fix removes that container from the
// template (the injector then adds its own), as a strategic merge patch
// of the workload that makes the pods.
func templateOverride(d *Diagnosis, in *Input) {
	c := in.templateProxy()
	if c == nil {
		return
	}
	what := overrides(c)
	if len(what) == 0 {
		return
	}
	o := in.Owner
	var ev, fix string
	if o == nil || o.Template == nil {
		// A bare pod: the manifest it was applied with has the container.
		ev = fmt.Sprintf("the manifest pod %s was applied with has a container istio-proxy of its own, which the injector merges over the proxy it adds: %s replace the injector's", in.Pod.Name, strings.Join(what, ", "))
		fix = recreateBarePod(in.Pod, "", "strategic", `{"spec":{"containers":[{"name":"istio-proxy","$patch":"delete"}]}}`) + "; its own istio-proxy removed: the injector's proxy, its image and probes, are used"
	} else {
		ev = fmt.Sprintf("the pod template of %s/%s has a container istio-proxy of its own, which the injector merges over the proxy it adds: %s replace the injector's", strings.ToLower(o.Kind), o.Name, strings.Join(what, ", "))
		path := `{"spec":{"template":{"spec":{"containers":[{"name":"istio-proxy","$patch":"delete"}]}}}}`
		kind, name := strings.ToLower(o.Kind), o.Name
		if cron, ok := strings.CutPrefix(o.Controller, "CronJob/"); ok {
			kind, name = "cronjob", cron
			path = `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"istio-proxy","$patch":"delete"}]}}}}}}`
		}
		fix = fmt.Sprintf("kubectl patch %s %s -n %s --type=strategic -p '%s'   # the template's own istio-proxy removed: the injector's proxy, its image and probes, are used; or correct what it overrides",
			kind, name, in.Pod.Namespace, path)
		if kind == "job" {
			fix = "remove the container istio-proxy from job/" + name + "'s manifest and create the Job again (a Job's template cannot be patched)"
		}
	}
	changed := map[string]bool{}
	for i := range d.Findings {
		f := &d.Findings[i]
		if !proxyFailureCodes[f.Code] || f.Status != Fail || (f.Code != CodeProxyNotReady && f.Code != CodeProxyFailing && !strings.Contains(f.Evidence, istio.ProxyContainer)) {
			continue
		}
		f.Evidence += "; " + ev
		f.Fix, f.Mesh = fix, "the template's own istio-proxy container ("+strings.Join(what, ", ")+")"
		changed[f.Code] = true
	}
	for i := range d.Checks {
		if k := &d.Checks[i]; changed[k.Code] && !strings.Contains(k.Evidence, ev) {
			k.Evidence += "; " + ev
			k.Fix = fix
		}
	}
}
