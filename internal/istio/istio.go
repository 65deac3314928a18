// Package istio is the one place for the names Istio gives things that
// kubectl-mesh reads: its containers, labels and annotations, the proxy's
// identity and ports — and the defaults of each Istio release the answers
// depend on (releases.go), with the parsing of the versions a cluster shows
// (version.go). Every package names them from here.
package istio

import (
	"slices"
	"strings"
)

// The containers Istio's injector adds.
const (
	ProxyContainer      = "istio-proxy"
	InitContainer       = "istio-init"
	ValidationContainer = "istio-validation" // with the Istio CNI plugin, in place of istio-init
)

// ProxyUID and ProxyGID are the user and group the proxy runs as:
// istio-iptables lets their own traffic through uncaptured.
const (
	ProxyUID = "1337"
	ProxyGID = "1337"
)

// Labels and annotations.
const (
	LabelInjection      = "istio-injection"
	LabelRev            = "istio.io/rev"
	LabelTag            = "istio.io/tag"
	LabelDataplaneMode  = "istio.io/dataplane-mode"
	LabelDeactivated    = "istio.io/deactivated"
	LabelMetadataName   = "kubernetes.io/metadata.name"
	KeyInject           = "sidecar.istio.io/inject" // a label (the annotation is not seen by webhook selectors)
	AnnotationStatus    = "sidecar.istio.io/status"
	AnnotationTemplates = "inject.istio.io/templates"
	// AnnotationRedirection is what istio-cni's agent writes on a pod it
	// set up in ambient mode: "enabled", or "pending" until ztunnel took it.
	AnnotationRedirection             = "ambient.istio.io/redirection"
	AnnotationInterceptionMode        = "sidecar.istio.io/interceptionMode"
	AnnotationNativeSidecar           = "sidecar.istio.io/nativeSidecar"
	AnnotationIncludeOutboundPorts    = "traffic.sidecar.istio.io/includeOutboundPorts"
	AnnotationExcludeOutboundIPRanges = "traffic.sidecar.istio.io/excludeOutboundIPRanges"
	AnnotationIncludeOutboundIPRanges = "traffic.sidecar.istio.io/includeOutboundIPRanges"
	AnnotationExcludeInboundPorts     = "traffic.sidecar.istio.io/excludeInboundPorts"
	// The sidecar's resources (istio-proxy's and istio-init's).
	AnnotationProxyCPU         = "sidecar.istio.io/proxyCPU"
	AnnotationProxyCPULimit    = "sidecar.istio.io/proxyCPULimit"
	AnnotationProxyMemory      = "sidecar.istio.io/proxyMemory"
	AnnotationProxyMemoryLimit = "sidecar.istio.io/proxyMemoryLimit"
)

// InjectorConfigMap is the injector's ConfigMap (istio-sidecar-injector,
// or istio-sidecar-injector-REVISION).
const InjectorConfigMap = "istio-sidecar-injector"

// The proxy's ports.
const (
	PortAdmin      = 15000
	PortOutbound   = 15001 // captured outbound traffic
	PortInbound    = 15006 // captured inbound traffic
	PortHBONE      = 15008
	PortAgent      = 15020 // merged metrics, the agent's own endpoints
	PortHealth     = 15021 // readiness (/healthz/ready)
	PortDNS        = 15053 // DNS captured to the proxy
	PortPrometheus = 15090
)

// PortRoles says what the proxy or its agent serves on each of its ports.
var PortRoles = map[int32]string{
	PortAdmin:      "Envoy admin",
	PortOutbound:   "Envoy outbound",
	15002:          "iptables validation probe",
	15004:          "pilot-agent debug",
	PortInbound:    "Envoy inbound",
	PortHBONE:      "HBONE mTLS tunnel",
	15009:          "HBONE plaintext tunnel",
	PortAgent:      "merged Prometheus metrics and agent status",
	PortHealth:     "health checks",
	PortDNS:        "Istio DNS proxy",
	PortPrometheus: "Envoy Prometheus",
}

// PortRole names what the proxy serves on port, or "" when it is not one of
// the proxy's.
func PortRole(port int32) string { return PortRoles[port] }

// InjectionTemplates are the templates a pod's inject.istio.io/templates
// annotation asks the injector for, in order; none when it asks for none
// (the injector's default, sidecar).
func InjectionTemplates(annotations map[string]string) []string {
	var out []string
	for _, t := range strings.Split(annotations[AnnotationTemplates], ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// OmitsSidecarTemplate says the annotations ask for injection templates and
// sidecar is not among them (a gateway's, an agent's): istio-proxy comes
// without istio-init, hold or capture.
func OmitsSidecarTemplate(annotations map[string]string) bool {
	names := InjectionTemplates(annotations)
	return len(names) > 0 && !slices.Contains(names, "sidecar")
}

// IsIstioContainer says a container is one Istio's injector adds.
func IsIstioContainer(name string) bool {
	return name == ProxyContainer || name == InitContainer || name == ValidationContainer
}

// ReservedPorts are the ports the proxy and its agent listen on in a
// sidecar pod (the admin port on localhost): an app container listening on
// one of them collides with the proxy.
var ReservedPorts = []int32{PortAdmin, PortOutbound, 15004, PortInbound, PortHBONE, 15009, PortAgent, PortHealth, PortDNS, PortPrometheus}

// More annotations the checks read.
const (
	AnnotationRewriteProbes       = "sidecar.istio.io/rewriteAppHTTPProbers"
	AnnotationProxyConfig         = "proxy.istio.io/config"
	AnnotationIncludeInboundPorts = "traffic.sidecar.istio.io/includeInboundPorts"
)

// IgnoredNamespaces are the namespaces istiod never injects, whatever their
// labels say (its built-in list).
var IgnoredNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "local-path-storage"}

// IgnoredNamespace says istiod never injects pods of ns.
func IgnoredNamespace(ns string) bool {
	for _, n := range IgnoredNamespaces {
		if n == ns {
			return true
		}
	}
	return false
}
