package diagnose

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeInjectedOverridden: the pod template has a container named as one the
// injector adds (istio-init, istio-proxy), which the injector merges over
// its own, and what it sets defeats the mesh.
const CodeInjectedOverridden = "KM-CAP-010"

func init() {
	register(&Spec{Code: CodeInjectedOverridden, Title: "the template overrides an injected container", Stage: CheckCapture, Kind: Static, Status: Fail,
		Reads: []Fact{FactPod, FactOwner},
		Means: "The pod template has a container named istio-init or istio-proxy of its own: Istio's injector merges it over the container it adds (Istio's documented way to customise injection), so what it sets wins. " +
			"An istio-init with a command of its own never runs istio-iptables (no capture rules: every connection bypasses the proxy); an istio-proxy running as a uid other than 1337 has its own connections captured again " +
			"(istio-iptables exempts uid 1337 only); an istio-proxy with image auto keeps the imagePullPolicy Always Kubernetes gives an image without a tag (every start pulls the proxy's image).",
		Detects: "The containers of the pod template (of the workload that makes the pod, or of the manifest a bare pod was applied with) named istio-init or istio-proxy, on a pod Istio injected: a command or arguments on istio-init, securityContext.runAsUser other than 1337 on istio-proxy, image auto with imagePullPolicy Always.",
		Fixes:   "A JSON patch of the workload's template: istio-init renamed (any other name), istio-proxy's runAsUser removed, imagePullPolicy IfNotPresent; a bare pod is re-created from its applied manifest with the change.",
		Source:  "Istio docs, customizing injection (a container named as an injected one is merged over it); istio/istio#42852 (image auto and imagePullPolicy)",
		Planted: "a DaemonSet with an init container of its own named istio-init",
		run:     injectedOverridden})
}

// podTemplate is the template the pod was made from: its workload's, or,
// for a bare pod applied with kubectl apply, that manifest's; owner names
// the workload ("" for a bare pod).
func (in *Input) podTemplate() (t *corev1.PodTemplateSpec, owner string) {
	if o := in.Owner; o != nil && o.Template != nil {
		kind, name := strings.ToLower(o.Kind), o.Name
		if cron, ok := strings.CutPrefix(o.Controller, "CronJob/"); ok && o.Kind == "Job" {
			kind, name = "cronjob", cron // its Jobs' template is the CronJob's
		}
		return o.Template, kind + "/" + name
	}
	p := in.Pod
	if p == nil || templateOwner(p) != "" || p.Annotations[lastApplied] == "" {
		return nil, ""
	}
	var applied corev1.Pod
	if err := json.Unmarshal([]byte(p.Annotations[lastApplied]), &applied); err != nil {
		return nil, ""
	}
	return &corev1.PodTemplateSpec{ObjectMeta: applied.ObjectMeta, Spec: applied.Spec}, ""
}

// template is the pod template of what the checks look at: the pod's (as
// podTemplate), or that of a workload with no pod; owner names the
// workload ("" for a bare pod), ns its namespace.
func (in *Input) template() (t *corev1.PodTemplateSpec, owner, ns string) {
	if t, owner := in.podTemplate(); t != nil {
		return t, owner, in.Pod.Namespace
	}
	w := in.Workload
	if w == nil || w.Template == nil {
		return nil, "", ""
	}
	owner = strings.ToLower(w.Kind) + "/" + w.Name
	if cron, ok := strings.CutPrefix(w.Controller, "CronJob/"); ok && w.Kind == "Job" {
		owner = "cronjob/" + cron
	}
	return w.Template, owner, w.Namespace
}

func injectedOverridden(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() && p.Annotations[istio.AnnotationStatus] == "" {
		return nil
	}
	t, owner := in.podTemplate()
	if t == nil {
		return nil
	}
	var out []Finding
	for i, c := range t.Spec.InitContainers {
		if c.Name == istio.InitContainer && (len(c.Command) > 0 || len(c.Args) > 0) {
			out = append(out, Finding{Status: Fail,
				Evidence: fmt.Sprintf("the pod template has an init container of its own named istio-init (command %s), which the injector merges over Istio's: it runs that command instead of istio-iptables, so the pod has no capture rules and every connection bypasses the proxy", quoteCmd(c)),
				Mesh:     "the template's own istio-init container",
				Fix: overridePatch(in, owner, fmt.Sprintf(`[{"op":"replace","path":"/spec/%sinitContainers/%d/name","value":"%s"}]`, jobPath(owner), i, c.Name+"-app"),
					"its own init container renamed (any name but istio-init): Istio's istio-init then writes the rules"),
				explains: []string{CodeRulesDrift}})
		}
	}
	for i, c := range t.Spec.Containers {
		if c.Name != istio.ProxyContainer {
			continue
		}
		if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != 1337 {
			out = append(out, Finding{Status: Fail,
				Evidence: fmt.Sprintf("the pod template has a container of its own named istio-proxy with securityContext.runAsUser %d, which the injector merges over the proxy it adds: the proxy runs as uid %d, not 1337, and istio-iptables exempts only uid 1337's traffic, so the proxy's own connections are redirected back into it", *sc.RunAsUser, *sc.RunAsUser),
				Mesh:     "the template's own istio-proxy container (runAsUser)",
				Fix: overridePatch(in, owner, fmt.Sprintf(`[{"op":"remove","path":"/spec/%scontainers/%d/securityContext/runAsUser"}]`, jobPath(owner), i),
					"the proxy then runs as the injector's uid 1337"),
				explains: []string{CodeProxyNotReady, CodeProxyFailing, CodePodNotReady, CodeProxyNotListening}})
		}
		if c.Image == "auto" && c.ImagePullPolicy == corev1.PullAlways {
			status := Warning
			if pulling(p) {
				status = Fail
			}
			out = append(out, Finding{Status: status,
				Evidence: "the pod template has a container of its own named istio-proxy with image auto and imagePullPolicy Always (Kubernetes' default for an image without a tag), which the merge keeps: every start of the pod pulls the proxy's image, even one the node has",
				Mesh:     "the template's own istio-proxy container (imagePullPolicy)",
				Fix: overridePatch(in, owner, fmt.Sprintf(`[{"op":"replace","path":"/spec/%scontainers/%d/imagePullPolicy","value":"IfNotPresent"}]`, jobPath(owner), i),
					"the node's copy of the proxy image is used"),
				explains: []string{CodeProxyFailing, CodeCannotStart}})
		}
	}
	return out
}

// jobPath is the JSON pointer from a workload to its pod template's spec's
// parent ("template/spec/", a CronJob's "jobTemplate/spec/template/spec/").
func jobPath(owner string) string {
	if strings.HasPrefix(owner, "cronjob/") {
		return "jobTemplate/spec/template/spec/"
	}
	return "template/spec/"
}

// overridePatch is the command that applies a JSON patch (paths from the
// workload's spec) to what makes the pod: the workload, a Job re-created,
// a bare pod re-created from its applied manifest.
func overridePatch(in *Input, owner, patch, comment string) string {
	switch {
	case owner == "":
		podPatch := strings.ReplaceAll(patch, `"path":"/spec/template/spec/`, `"path":"/spec/`)
		if cmd := recreateBarePod(in.Pod, "", "json", podPatch); cmd != "" {
			return cmd + "; " + comment
		}
		return "change the pod's manifest (" + comment + "), then re-create the pod"
	case strings.HasPrefix(owner, "job/"):
		return "change job/" + strings.TrimPrefix(owner, "job/") + "'s manifest (" + comment + ") and create the Job again (a Job's template cannot be patched)"
	}
	ns := in.Namespace()
	if strings.HasPrefix(owner, "cronjob/") {
		return fmt.Sprintf("kubectl patch %s -n %s --type=json -p '%s'   # %s; its next Jobs get it", owner, ns, patch, comment)
	}
	return fmt.Sprintf("kubectl patch %s -n %s --type=json -p '%s'   # %s", owner, ns, patch, comment)
}

// pulling: an injected container of the pod waits on an image pull.
func pulling(p *corev1.Pod) bool {
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if !istio.IsIstioContainer(st.Name) || st.State.Waiting == nil {
			continue
		}
		switch st.State.Waiting.Reason {
		case "ErrImagePull", "ImagePullBackOff":
			return true
		}
	}
	return false
}

// quoteCmd is a container's command and arguments, quoted.
func quoteCmd(c corev1.Container) string {
	s := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return fmt.Sprintf("%q", s)
}
