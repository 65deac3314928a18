package diagnose

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeProxyPortsPrivileged: a pod sysctl makes the proxy's ports
// privileged, and the proxy, which runs without privilege, cannot bind
// them.
const CodeProxyPortsPrivileged = "KM-START-021"

// unprivPortSysctl is the kernel's first port a process without
// CAP_NET_BIND_SERVICE may bind (1024 by default), per network namespace.
const unprivPortSysctl = "net.ipv4.ip_unprivileged_port_start"

func init() {
	register(&Spec{Code: CodeProxyPortsPrivileged, Title: "a pod sysctl keeps the proxy off its ports", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "The pod's securityContext sets net.ipv4.ip_unprivileged_port_start above 15000: in the pod's network namespace every port below it needs CAP_NET_BIND_SERVICE. Istio's proxy runs as uid 1337 with every capability dropped, so it cannot bind its admin port 15000 nor its listeners (15001, 15006, 15021…): it exits with \"bind: permission denied\" and crash-loops, and the pod never becomes ready.",
		Detects: "The pod's securityContext.sysctls entry net.ipv4.ip_unprivileged_port_start above 15000, on a pod with a sidecar whose istio-proxy runs as a non-root user without NET_BIND_SERVICE.",
		Fixes:   "A choice, both named: the template without the sysctl (the kernel's 1024), or a value of 15000 or less if the app needs one; a strategic merge of the template (its other sysctls kept), whose rollout re-creates the pods.",
		Source:  "Linux ip-sysctl (ip_unprivileged_port_start); Kubernetes safe sysctls; Istio's injection template (istio-proxy as uid 1337, capabilities dropped)",
		Planted: "a sidecar pod whose securityContext sets net.ipv4.ip_unprivileged_port_start=16000",
		run:     proxyPortsPrivileged})
}

func proxyPortsPrivileged(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Spec.SecurityContext == nil || p.Spec.HostNetwork {
		return nil
	}
	start, at := -1, -1
	for i, s := range p.Spec.SecurityContext.Sysctls {
		if s.Name == unprivPortSysctl {
			if n, err := strconv.Atoi(s.Value); err == nil {
				start, at = n, i
			}
		}
	}
	if start <= istio.PortAdmin {
		return nil
	}
	if proxy, _ := in.container(istio.ProxyContainer); proxy != nil && proxy.SecurityContext != nil {
		sc := proxy.SecurityContext
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			return nil
		}
		if sc.Capabilities != nil {
			for _, a := range sc.Capabilities.Add {
				if a == "NET_BIND_SERVICE" || a == "ALL" {
					return nil
				}
			}
		}
	}
	rest := append(append([]corev1.Sysctl(nil), p.Spec.SecurityContext.Sysctls[:at]...), p.Spec.SecurityContext.Sysctls[at+1:]...)
	var kept any = rest
	if len(rest) == 0 {
		kept = nil
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"securityContext": map[string]any{"sysctls": kept}}})
	fix := in.templateSpecFix(string(patch))
	if fix == "" {
		fix = "in the pod's manifest, remove the sysctl " + unprivPortSysctl + " from its securityContext, then re-create the pod"
	}
	return []Finding{{Mesh: "istio-proxy's ports (15000-15090), which it binds without privilege",
		Evidence: fmt.Sprintf("the pod's securityContext sets %s=%d: below that port, binding needs CAP_NET_BIND_SERVICE, which istio-proxy (uid 1337, capabilities dropped) does not have, so it cannot bind 15000, 15001, 15006 or 15021 (\"bind: permission denied\")", unprivPortSysctl, start),
		Fix:      firstLineNote(fix, "a choice: without the sysctl (the kernel's 1024); or a value of 15000 or less, if the app needs one"),
		explains: []string{CodeProxyFailing, CodeProxyNotReady, CodePodNotReady, CodeStuckInInit}}}
}
