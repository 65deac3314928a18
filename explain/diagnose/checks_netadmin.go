package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeOtherNetAdmin: a container of the pod's own can change its netfilter
// rules after istio-init wrote them.
const CodeOtherNetAdmin = "KM-CAP-012"

func init() {
	register(&Spec{Code: CodeOtherNetAdmin, Title: "another container can rewrite the capture rules", Stage: CheckCapture, Kind: Static, Status: Warning,
		Reads: []Fact{FactPod, FactOwner, FactRules},
		Means: "istio-init (or Istio's CNI plugin) writes the capture rules before the app's containers start; a container of the pod's own with NET_ADMIN (or privileged) shares the pod's network namespace and can flush, insert or delete rules afterwards " +
			"(an init container that sets up the network, a VPN or router sidecar): the connections its rules let through bypass the proxy, and re-creating the pod runs the same container again.",
		Detects: "The pod's containers and init containers other than Istio's whose securityContext adds NET_ADMIN (or ALL) or is privileged, on a pod captured by istio-init or CNI; their command when it runs iptables or nft. " +
			"A command whose own words undo the capture after istio-init ran (a jump to an ISTIO_* chain deleted, the nat table or an ISTIO_* chain flushed, an ACCEPT or RETURN put among the nat table's capture rules, nft's nat flushed) fails with no rules read; any other NET_ADMIN container warns. " +
			"With --rules, capture rules that differ from what istio-init's arguments call for (KM-CAP-001) or a connection let through (KM-CONN-001) are put down to it.",
		Fixes:   "A command that undoes the capture among other commands: a JSON patch of the template that takes those calls out of its script, and its NET_ADMIN when nothing left uses it (a choice, said: keep the container as it is and have it leave Istio's rules alone). A container whose only work is that, with the drift seen: a patch that removes it. Without either: --rules, which reads the rules and shows whether it changed them.",
		Source:  "istio/istio#1428 (iptables rules of the pod's own interfering with the sidecar's); Istio docs, application requirements (the pod's traffic is redirected by iptables rules in its network namespace)",
		Planted: "a Deployment with an init container with NET_ADMIN that flushes the nat table",
		run:     otherNetAdmin})
}

// netAdmin says a container can change the pod's netfilter rules.
func netAdmin(c corev1.Container) bool {
	sc := c.SecurityContext
	if sc == nil {
		return false
	}
	if sc.Privileged != nil && *sc.Privileged {
		return true
	}
	if sc.Capabilities != nil {
		for _, a := range sc.Capabilities.Add {
			if a == "NET_ADMIN" || a == "ALL" || a == "CAP_NET_ADMIN" {
				return true
			}
		}
	}
	return false
}

func otherNetAdmin(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	captured := false
	for _, c := range p.Spec.InitContainers {
		captured = captured || c.Name == istio.InitContainer || c.Name == istio.ValidationContainer
	}
	if !captured {
		return nil // KM-CAP-011's
	}
	t, owner, _ := in.template()
	// Init containers before istio-init run before the rules exist.
	initAt := 0
	for i, c := range p.Spec.InitContainers {
		if c.Name == istio.InitContainer {
			initAt = i
		}
	}
	var out []Finding
	for _, list := range []struct {
		field, what string
		cs          []corev1.Container
	}{{"initContainers", "init container", p.Spec.InitContainers}, {"containers", "container", p.Spec.Containers}} {
		for i, c := range list.cs {
			if istio.IsIstioContainer(c.Name) || !netAdmin(c) {
				continue
			}
			undoes, field, index, value, editable := captureTamper(c)
			if list.field == "initContainers" && i < initAt {
				undoes = "" // it runs before istio-init writes the rules
			}
			runs := ""
			cmd := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
			if strings.Contains(cmd, "iptables") || strings.Contains(cmd, "nft") {
				runs = fmt.Sprintf(", and its command runs %s", quoteCmd(c))
			}
			ev := fmt.Sprintf("%s %s has NET_ADMIN (or is privileged)%s: it shares the pod's network namespace and can rewrite the capture rules istio-init wrote before it started; connections its rules let through bypass the proxy, and re-creating the pod runs it again", list.what, c.Name, runs)
			remove := removeContainer(in, t, owner, list.field, c.Name)
			if undoes != "" && editable {
				if fix := templateTamperFix(in, t, owner, list.field, c, field, index, value); fix != "" {
					remove = fix
				}
			}
			f := Finding{Evidence: ev, Fix: remove, explains: []string{CodeRulesDrift, CodeBypassing}, container: c.Name}
			switch r := in.Capture; {
			case r == nil && undoes != "":
				// Its own words say it: no rules need reading.
				f.Status = Fail
				f.Evidence += "; its command " + undoes + ", after istio-init wrote them"
			case r == nil:
				f.Fix = "kubectl mesh diagnose " + in.Target + " --rules   # reads the rules (adds an ephemeral container to the pod) and shows whether " + c.Name + " changed them\n# if it did: " + remove
			case r.Drift != nil && len(r.Drift.Missing)+len(r.Drift.Extra) > 0:
				f.Status = Fail
				f.Evidence += fmt.Sprintf("; the rules read differ from what istio-init's arguments call for (%d missing, %d extra)", len(r.Drift.Missing), len(r.Drift.Extra))
				if undoes != "" {
					f.Evidence += "; its command " + undoes
				}
			case r.Drift != nil:
				f.Status = Info
				f.Evidence += "; the rules read now are those istio-init's arguments call for"
				f.Fix = ""
			}
			out = append(out, f)
		}
	}
	return out
}

// removeContainer is the fix that takes a container out of what makes the
// pod (a choice: the container may be needed, then it is to leave Istio's
// rules alone).
func removeContainer(in *Input, t *corev1.PodTemplateSpec, owner, field, name string) string {
	choice := "a choice: or keep " + name + " and have it leave the nat table's ISTIO_* chains and the jumps to them alone"
	if t == nil {
		return "remove " + name + " from the pod's manifest and re-create the pod   # " + choice
	}
	list := t.Spec.Containers
	if field == "initContainers" {
		list = t.Spec.InitContainers
	}
	for i, c := range list {
		if c.Name == name {
			return overridePatch(in, owner, fmt.Sprintf(`[{"op":"remove","path":"/spec/%s%s/%d"}]`, jobPath(owner), field, i), name+" removed; "+choice)
		}
	}
	return "remove " + name + " from what makes the pod (it is not in its template: an admission mutator adds it)   # " + choice
}

// templateTamperFix is tamperFix on the container's place in the template
// ("" when it is not there).
func templateTamperFix(in *Input, t *corev1.PodTemplateSpec, owner, field string, c corev1.Container, cmdField string, index int, value string) string {
	if t == nil {
		return ""
	}
	list := t.Spec.Containers
	if field == "initContainers" {
		list = t.Spec.InitContainers
	}
	for i, tc := range list {
		if tc.Name == c.Name {
			return tamperFix(in, owner, field, i, tc, cmdField, index, value)
		}
	}
	return ""
}
