package istio

import "slices"

// ProxyConfigFields are the top-level fields of ProxyConfig (istio.io/api
// mesh/v1alpha1/proxy.proto) that proxy.istio.io/config sets, by their
// JSON names; istiod also reads each by its proto name (snake_case).
// istiod ignores a key that is neither: a misspelt one has no effect.
var ProxyConfigFields = []string{
	"availabilityZone", "binaryPath", "caCertificatesPem", "concurrency", "configPath", "controlPlaneAuthPolicy",
	"customConfigFile", "discoveryAddress", "discoveryRefreshDelay", "drainDuration", "envoyAccessLogService",
	"envoyMetricsService", "envoyMetricsServiceAddress", "extraStatTags", "fileFlushInterval", "fileFlushMinSizeKb",
	"gatewayTopology", "holdApplicationUntilProxyStarts", "image", "interceptionMode", "meshId",
	"parentShutdownDuration", "privateKeyProvider", "proxyAdminPort", "proxyBootstrapTemplatePath", "proxyMetadata",
	"proxyStatsMatcher", "readinessProbe", "runtimeValues", "sds", "serviceCluster", "statNameLength",
	"statsdUdpAddress", "statusPort", "terminationDrainDuration", "tracing", "tracingServiceName", "zipkinAddress",
}

// ProxyConfigNearMiss is, for a top-level key of proxy.istio.io/config
// that is not a field of ProxyConfig by either name, the field it is one
// or two edits away from; "" for a field, and for a key near none (a
// field of a later release than this list is left alone).
func ProxyConfigNearMiss(key string) string {
	if slices.Contains(ProxyConfigFields, key) || slices.Contains(ProxyConfigFields, camel(key)) {
		return ""
	}
	src := []rune(key)
	best, bestDist := "", maxSuggestDistance+1
	for _, f := range ProxyConfigFields {
		if d := editDistance(src, []rune(f), bestDist-1); d < bestDist {
			best, bestDist = f, d
		}
	}
	return best
}

// camel is a proto field name in its JSON form (hold_application → holdApplication).
func camel(s string) string {
	out := make([]rune, 0, len(s))
	up := false
	for _, r := range s {
		switch {
		case r == '_':
			up = true
		case up && r >= 'a' && r <= 'z':
			out = append(out, r-'a'+'A')
			up = false
		default:
			out = append(out, r)
			up = false
		}
	}
	return string(out)
}
