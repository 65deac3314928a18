package injection

import (
	"regexp"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// The settings for which Istio's injection template gives istio-proxy
// itself more than its default (uid 1337, no capability): interception
// mode TPROXY (NET_ADMIN, uid 0), capNetBindService (NET_BIND_SERVICE, uid
// 0), and iptables trace logging, "true" in its proxyMetadata (privileged,
// NET_ADMIN, uid 0). A policy on privileges refuses istio-proxy for them.
const (
	annCapNetBind = "sidecar.istio.io/capNetBindService"
	traceLogging  = "IPTABLES_TRACE_LOGGING"
)

// privilegeCandidates are the changes that take those settings away: the
// pod's own annotation removed, and the trace logging turned off in the
// pod's proxy.istio.io/config (which overrides a ProxyConfig of the
// namespace or the mesh, so the change works wherever it was set). first
// are those the template itself asks for (tried before anything else);
// last the trace logging's override where the template does not mention
// it (a ProxyConfig may).
func privilegeCandidates(a map[string]string) (first, last []MeshSide) {
	if strings.EqualFold(strings.TrimSpace(a[istio.AnnotationInterceptionMode]), "TPROXY") {
		first = append(first, MeshSide{Set: map[string]string{istio.AnnotationInterceptionMode: ""},
			What: "istio-proxy's NET_ADMIN and uid 0, which the injector gives it for " + istio.AnnotationInterceptionMode + "=TPROXY (without it: REDIRECT, which needs neither)"})
	}
	if v := strings.TrimSpace(a[annCapNetBind]); v != "" && v != "false" {
		first = append(first, MeshSide{Set: map[string]string{annCapNetBind: ""},
			What: "istio-proxy's NET_BIND_SERVICE and uid 0, which the injector gives it for " + annCapNetBind + "=" + v})
	}
	off, ok := traceLoggingOff(a[istio.AnnotationProxyConfig])
	if !ok {
		return first, nil
	}
	ms := MeshSide{Set: map[string]string{istio.AnnotationProxyConfig: off},
		What: "istio-proxy's privileges (privileged, NET_ADMIN, uid 0), which the injector gives it while " + traceLogging + " is \"true\" in its proxyMetadata (the pod's " + istio.AnnotationProxyConfig + ", or a ProxyConfig of its namespace or of the mesh)"}
	if strings.Contains(a[istio.AnnotationProxyConfig], traceLogging) {
		return append(first, ms), nil
	}
	return first, []MeshSide{ms}
}

// traceLoggingOff is a proxy.istio.io/config value with the trace logging
// turned off in its proxyMetadata, the rest kept (as JSON, which the
// annotation takes as it takes YAML); false when the value does not parse
// or already turns it off.
func traceLoggingOff(cfg string) (string, bool) {
	return EditProxyMetadata(cfg, func(md map[string]any) bool {
		if v, ok := md[traceLogging]; ok && v == "false" {
			return false
		}
		md[traceLogging] = "false"
		return true
	})
}

// privilegeWords are what a refusal of a container's privileges says,
// as whole words ("root" is not "readOnlyRootFilesystem" or "rootfs").
var privilegeWords = regexp.MustCompile(`(?i)(^|[^a-z_])(net_admin|net_bind_service|capabilit(y|ies)|privileged|privilege escalation|allowprivilegeescalation|root|runasuser|runasnonroot)([^a-z_]|$)`)

// proxyPrivilegePart is istio-proxy's privileges and the template's
// setting that gives them, when the refusal is about privileges and the
// template asks for one of those settings (a message naming istio-init,
// as a policy's exemption of it does, is then not about istio-init); "" when
// it does not.
func proxyPrivilegePart(msg string, w *Workload) string {
	if w == nil {
		return ""
	}
	if !privilegeWords.MatchString(msg) {
		return ""
	}
	first, _ := privilegeCandidates(w.Annotations)
	if len(first) == 0 {
		return ""
	}
	return first[0].What
}
