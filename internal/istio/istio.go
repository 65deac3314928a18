// Package istio is the one place for the names Istio gives things that
// kubectl-mesh reads: its containers, labels and annotations, the proxy's
// identity and ports — and the defaults of each Istio release the answers
// depend on (releases.go), with the parsing of the versions a cluster shows
// (version.go). Every package names them from here.
package istio

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
