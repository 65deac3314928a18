package capture

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// istioProxyName is the container Istio's injector adds: its environment and
// security context tell how the CNI plugin writes the rules.
const istioProxyName = "istio-proxy"

// CaptureArgsFromPod returns the istio-iptables arguments and environment a
// pod's rules were written from, and where they were found: the istio-init
// container's arguments; or, in CNI mode (istio-validation) or without an
// init container, the arguments the CNI plugin derives from the pod's
// annotations, as Istio's injection template spells them. ok is false for a
// pod without an Istio sidecar.
func CaptureArgsFromPod(p *corev1.Pod) (args []string, env map[string]string, source string, ok bool) {
	env = map[string]string{}
	var proxy *corev1.Container
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == istioProxyName {
			proxy = &p.Spec.InitContainers[i]
		}
	}
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == istioProxyName {
			proxy = &p.Spec.Containers[i]
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name != "istio-init" {
			continue
		}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		all := append(append([]string{}, c.Command...), c.Args...)
		for i, a := range all {
			if a == "istio-iptables" || strings.HasSuffix(a, "/istio-iptables") {
				return all[i+1:], env, "container istio-init's arguments", true
			}
		}
	}
	if proxy == nil {
		return nil, env, "", false
	}
	for _, e := range proxy.Env {
		env[e.Name] = e.Value
	}
	a := p.Annotations
	get := func(k, def string) string {
		if v, ok := a[k]; ok {
			return v
		}
		return def
	}
	uid := "1337"
	if sc := proxy.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = strconv.FormatInt(*sc.RunAsUser, 10)
	}
	mode := get("sidecar.istio.io/interceptionMode", "REDIRECT")
	if mode == "NONE" {
		return nil, env, "", false
	}
	exclude := []string{"15090", "15021", get("status.sidecar.istio.io/port", "15020")}
	if v := get("traffic.sidecar.istio.io/excludeInboundPorts", ""); v != "" {
		exclude = append(exclude, v)
	}
	args = []string{"-p", "15001", "-z", "15006", "-u", uid, "-m", mode,
		"-i", get("traffic.sidecar.istio.io/includeOutboundIPRanges", "*"),
		"-x", get("traffic.sidecar.istio.io/excludeOutboundIPRanges", ""),
		"-b", get("traffic.sidecar.istio.io/includeInboundPorts", "*"),
		"-d", strings.Join(exclude, ",")}
	for flag, key := range map[string]string{"-q": "traffic.sidecar.istio.io/includeOutboundPorts", "-o": "traffic.sidecar.istio.io/excludeOutboundPorts", "-c": "traffic.sidecar.istio.io/excludeInterfaces"} {
		if v := a[key]; v != "" {
			args = append(args, flag, v)
		}
	}
	if v := get("istio.io/reroute-virtual-interfaces", a["traffic.sidecar.istio.io/kubevirtInterfaces"]); v != "" {
		args = append(args, "-k", v)
	}
	return args, env, fmt.Sprintf("pod annotations (no istio-init: rules written by the CNI plugin), proxy uid %s", uid), true
}
