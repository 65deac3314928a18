package diagnose

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeProxyUIDDrift: istio-proxy runs as another uid than the one its
// capture rules exempt.
const CodeProxyUIDDrift = "KM-CAP-013"

func init() {
	register(&Spec{Code: CodeProxyUIDDrift, Title: "the proxy's uid is not the one capture exempts", Stage: CheckCapture, Kind: Static, Status: Fail,
		Reads: []Fact{FactPod, FactMesh},
		Means: "istio-init writes rules that let the proxy's own traffic out uncaptured, by its uid (istio-iptables -u, 1337 unless the injector was told otherwise). " +
			"When istio-proxy then runs as another uid — an admission mutator after the injector assigned one (OpenShift-style uid ranges, a policy engine's mutation) — the proxy's own connections to upstreams are captured again and sent back to itself: every outbound request loops, and the pod's probes and calls fail.",
		Detects: "On an injected pod: the uid istio-init's arguments exempt (-u or --proxy-uid) against istio-proxy's effective runAsUser (its own, else the pod's), unless its effective runAsGroup is the gid they exempt too (-g or --proxy-gid, else the uid's value): the injector's own root proxies (TPROXY, capNetBindService, iptables trace logging) run as uid 0 in group 1337 and are let out by the group; the admission mutators other than Istio's whose rules and selectors match the pod.",
		Fixes:   "Exempt the pod's namespace from the mutator that sets it (the patch of its namespaceSelector), then re-create the pod; or have the mutator leave istio-proxy alone.",
		Source:  "istio/istio#52614, #52613 (a uid assigned after injection: the proxy's traffic captured again); Istio docs, application requirements (uid 1337)",
		Planted: "a MutatingAdmissionPolicy, reinvoked after the injector, setting istio-proxy's runAsUser and runAsGroup to 1000680000 in an injection-enabled namespace",
		run:     proxyUIDDrift})
}

// initArg is the value of istio-init's flag (its short or long form), ""
// when it is not given.
func initArg(c *corev1.Container, short, long string) string {
	args := append(append([]string{}, c.Command...), c.Args...)
	for i := 0; i+1 < len(args); i++ {
		if args[i] == short || args[i] == long {
			return args[i+1]
		}
	}
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, long+"="); ok {
			return v
		}
	}
	return ""
}

func proxyUIDDrift(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil {
		return nil
	}
	var init, proxy *corev1.Container
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			switch cs[i].Name {
			case istio.InitContainer:
				init = &cs[i]
			case istio.ProxyContainer:
				proxy = &cs[i]
			}
		}
	}
	if init == nil || proxy == nil {
		return nil
	}
	exempt := initArg(init, "-u", "--proxy-uid")
	if exempt == "" {
		return nil
	}
	uid := ""
	if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = strconv.FormatInt(*sc.RunAsUser, 10)
	}
	if sc := proxy.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = strconv.FormatInt(*sc.RunAsUser, 10)
	}
	if uid == "" || uid == exempt {
		return nil
	}
	// The rules exempt the proxy's group too (-g, the uid's value when not
	// given): a proxy that runs as another uid in that group is let out by
	// it, as the injector's own root proxies (TPROXY, capNetBindService,
	// iptables trace logging: uid 0, group 1337) are.
	gidExempt := initArg(init, "-g", "--proxy-gid")
	if gidExempt == "" {
		gidExempt = exempt
	}
	gid := ""
	if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		gid = strconv.FormatInt(*sc.RunAsGroup, 10)
	}
	if sc := proxy.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		gid = strconv.FormatInt(*sc.RunAsGroup, 10)
	}
	if gid == gidExempt {
		return nil
	}
	if t, _ := in.podTemplate(); t != nil {
		for _, c := range t.Spec.Containers {
			if c.Name == istio.ProxyContainer && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
				return nil // the template's own istio-proxy sets it: KM-CAP-010's
			}
		}
	}
	group := "an unset group"
	if gid != "" {
		group = "group " + gid
	}
	ev := fmt.Sprintf("istio-proxy runs as uid %s, but istio-init's rules exempt uid %s (its -u) and group %s (in %s): the proxy's own connections to upstreams are captured again and sent back to itself, so its outbound requests loop", uid, exempt, gidExempt, group)
	f := Finding{Evidence: ev, Mesh: "istio-proxy's uid, changed after the injector wrote the capture rules"}
	ms := in.otherMutators()
	switch {
	case len(ms) > 0:
		f.Evidence += "; the injector sets uid " + exempt + " for both: what changed istio-proxy's after it is " + mutatorsNamed(ms) + " (the mutators other than Istio's injector whose rules and selectors match the pod)"
		f.Fix = mutatorFix(p, ms, "sets it")
	default:
		f.Fix = "kubectl mesh why-injected " + in.Target + "   # names the admission mutators that act on the pod after Istio's injector: the one that sets istio-proxy's runAsUser is to leave it alone"
	}
	return []Finding{f}
}
