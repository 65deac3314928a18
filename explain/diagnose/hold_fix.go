package diagnose

import (
	"encoding/json"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// holdKey is the ProxyConfig field that holds a classic sidecar's app
// containers until the proxy is ready.
const holdKey = "holdApplicationUntilProxyStarts"

// holdFix is the command that holds the app until the proxy is ready: the
// pod's proxy.istio.io/config with holdApplicationUntilProxyStarts true,
// the rest of that config kept (a JSON object merged, YAML given the
// line); advice when the template cannot be changed by a command.
func (in *Input) holdFix(advice string) string {
	p := in.Pod
	if p == nil {
		return advice
	}
	cfg := strings.TrimSpace(p.Annotations[istio.AnnotationProxyConfig])
	var value string
	switch {
	case cfg == "":
		value = `{"` + holdKey + `": true}`
	case strings.HasPrefix(cfg, "{"):
		var m map[string]any
		if err := json.Unmarshal([]byte(cfg), &m); err != nil {
			return advice // not JSON: its own reader's error is another finding
		}
		m[holdKey] = true
		value = plainJSON(m)
	case strings.Contains(cfg, holdKey):
		return advice // set, to false: the choice was made
	default:
		value = cfg + "\n" + holdKey + ": true"
	}
	if strings.Contains(value, "'") {
		return advice // the patch is quoted in single quotes
	}
	fix := setTemplateAnnotations(p, map[string]string{istio.AnnotationProxyConfig: value})
	if strings.HasPrefix(fix, "in the pod's manifest") {
		return advice
	}
	return fix + "   # the app's containers start once the proxy is ready; or a native sidecar (" + istio.AnnotationNativeSidecar + `: "true"), which starts before them`
}
