package capture

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CaptureArgsFromPod returns the istio-iptables arguments and environment a
// pod's rules were written from, and where they were found: the istio-init
// container's arguments; or, in CNI mode (istio-validation) or without an
// init container, the arguments Istio's CNI plugin derives from the pod's
// annotations and istio-proxy's settings (see cniArgs). ok is false for a
// pod without an Istio sidecar, or one the plugin leaves alone.
func CaptureArgsFromPod(p *corev1.Pod) (args []string, env map[string]string, source string, ok bool) {
	env = map[string]string{}
	var proxy *corev1.Container
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == istio.ProxyContainer {
			proxy = &p.Spec.InitContainers[i]
		}
	}
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == istio.ProxyContainer {
			proxy = &p.Spec.Containers[i]
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name != istio.InitContainer {
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
	return cniArgs(p.Annotations, proxy)
}

// cniArgs returns the istio-iptables arguments equivalent to what Istio's CNI
// plugin (istio-cni, sidecar mode) programs for a pod, derived as it derives
// them: from the pod's traffic annotations with the plugin's own defaults,
// not the injection template's — inbound excludes are the annotation's (or
// 15020) followed by 15020,15021,15090, duplicates dropped, whatever the
// status port; outbound excludes default to 15020; the proxy's uid and gid
// are istio-proxy's runAsUser and runAsGroup (1337 when unset or 0); DNS
// capture (then of every server: capture-all-dns), dual stack and
// drop-invalid follow istio-proxy's ISTIO_META_DNS_CAPTURE, ISTIO_DUAL_STACK
// and INVALID_DROP. Every setting is an explicit flag: the plugin runs with
// the node agent's environment, not the pod's, so env is empty.
func cniArgs(a map[string]string, proxy *corev1.Container) (args []string, env map[string]string, source string, ok bool) {
	get := func(k, def string) string {
		if v, ok := a[k]; ok {
			return v
		}
		return def
	}
	proxyEnv := map[string]string{}
	for _, e := range proxy.Env {
		proxyEnv[e.Name] = e.Value
	}
	// The plugin leaves alone a proxy with Envoy disabled, or of another type
	// than a sidecar (proxy router, a gateway).
	if b, err := strconv.ParseBool(proxyEnv["DISABLE_ENVOY"]); err == nil && b {
		return nil, map[string]string{}, "", false
	}
	if len(proxy.Args) >= 2 && proxy.Args[0] == "proxy" && proxy.Args[1] != "sidecar" {
		return nil, map[string]string{}, "", false
	}
	flag := func(name, envName string) string {
		b, _ := strconv.ParseBool(proxyEnv[envName])
		return "--" + name + "=" + strconv.FormatBool(b)
	}
	uid, gid := istio.ProxyUID, istio.ProxyGID
	if sc := proxy.SecurityContext; sc != nil {
		if sc.RunAsUser != nil && *sc.RunAsUser != 0 {
			uid = strconv.FormatInt(*sc.RunAsUser, 10)
		}
		if sc.RunAsGroup != nil && *sc.RunAsGroup != 0 {
			gid = strconv.FormatInt(*sc.RunAsGroup, 10)
		}
	}
	mode := get(istio.AnnotationInterceptionMode, "REDIRECT")
	if mode == "NONE" {
		return nil, map[string]string{}, "", false
	}
	inExcl := strings.TrimSpace(get("traffic.sidecar.istio.io/excludeInboundPorts", "15020"))
	if inExcl != "" && !strings.HasSuffix(inExcl, ",") {
		inExcl += ","
	}
	var ports []string
	seen := map[string]bool{}
	for _, port := range strings.Split(inExcl+"15020,15021,15090", ",") {
		if !seen[port] {
			seen[port] = true
			ports = append(ports, port)
		}
	}
	args = []string{"-p", "15001", "-z", "15006", "-u", uid, "-g", gid, "-m", mode,
		"-i", get(istio.AnnotationIncludeOutboundIPRanges, "*"),
		"-x", get(istio.AnnotationExcludeOutboundIPRanges, ""),
		"-b", get("traffic.sidecar.istio.io/includeInboundPorts", "*"),
		"-d", strings.Join(ports, ","),
		"-o", get("traffic.sidecar.istio.io/excludeOutboundPorts", "15020")}
	if v := get(istio.AnnotationIncludeOutboundPorts, ""); v != "" {
		args = append(args, "-q", v)
	}
	if v := get("traffic.sidecar.istio.io/excludeInterfaces", ""); v != "" {
		args = append(args, "-c", v)
	}
	if v := get("istio.io/reroute-virtual-interfaces", a["traffic.sidecar.istio.io/kubevirtInterfaces"]); v != "" {
		args = append(args, "-k", v)
	}
	dns := flag("redirect-dns", "ISTIO_META_DNS_CAPTURE")
	args = append(args, dns, strings.Replace(dns, "redirect-dns", "capture-all-dns", 1),
		flag("dual-stack", "ISTIO_DUAL_STACK"), flag("drop-invalid", "INVALID_DROP"))
	return args, map[string]string{}, fmt.Sprintf("pod annotations and istio-proxy's settings, derived as Istio's CNI plugin does (no istio-init: the plugin wrote the rules), proxy uid %s gid %s", uid, gid), true
}

// IstioVersionFromPod reads the Istio release whose istio-iptables wrote a
// pod's rules from the tag of the image that ran it: istio-init's (its
// istio-iptables wrote them), else istio-validation's or istio-proxy's (the
// proxy's release, with the CNI plugin or a native sidecar). from says
// which; version is "" when no such container's tag is a version (a digest,
// "latest"), and from then says what was found.
func IstioVersionFromPod(p *corev1.Pod) (version, from string) {
	var seen []string
	try := func(cs []corev1.Container, name string) (string, string, bool) {
		for _, c := range cs {
			if c.Name != name {
				continue
			}
			tag := istio.ImageTag(c.Image)
			if _, _, err := ParseIstioVersion(tag); err == nil {
				return tag, name + "'s image " + c.Image, true
			}
			seen = append(seen, name+" "+c.Image)
		}
		return "", "", false
	}
	for _, n := range []string{istio.InitContainer, istio.ValidationContainer, istio.ProxyContainer} {
		if v, f, ok := try(p.Spec.InitContainers, n); ok {
			return v, f
		}
		if v, f, ok := try(p.Spec.Containers, n); ok {
			return v, f
		}
	}
	// The revision that injected the pod, when it is named after its
	// release (1-24-6), as Istio's canary upgrades name them.
	var status struct {
		Revision string `json:"revision"`
	}
	if raw := p.Annotations[istio.AnnotationStatus]; raw != "" && json.Unmarshal([]byte(raw), &status) == nil && status.Revision != "" {
		if v, ok := istio.RevisionVersion(status.Revision); ok {
			version := fmt.Sprintf("1.%d", v.Minor)
			if v.Patch >= 0 {
				version += fmt.Sprintf(".%d", v.Patch)
			}
			return version, "revision " + status.Revision + " in " + istio.AnnotationStatus
		}
		seen = append(seen, "revision "+status.Revision)
	}
	if len(seen) == 0 {
		return "", "no Istio container to read a version from"
	}
	return "", "no image tag or revision names an Istio version: " + strings.Join(seen, ", ") + "; --istio-version says which"
}
