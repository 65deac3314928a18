package diagnose

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// The exclude annotations a bypassing flow can be let through by.
const (
	annExcludeOutPorts = "traffic.sidecar.istio.io/excludeOutboundPorts"
	annExcludeOutIPs   = "traffic.sidecar.istio.io/excludeOutboundIPRanges"
)

// bypassFix is the command that takes the bypassing flows' ports and
// addresses out of the pod's exclude annotations, where they are in them
// ("" when none of them is: another rule let them through).
func bypassFix(p *corev1.Pod, conns []capture.Connection) string {
	if p == nil {
		return ""
	}
	ports := map[string]bool{}
	var addrs []netip.Addr
	for _, c := range conns {
		if c.Class == capture.Bypassing {
			ports[strconv.Itoa(int(c.Dst.Port()))] = true
			addrs = append(addrs, c.Dst.Addr())
		}
	}
	set := map[string]string{}
	var took []string
	if v, ok := p.Annotations[annExcludeOutPorts]; ok {
		var keep []string
		for _, port := range strings.Split(v, ",") {
			if ports[strings.TrimSpace(port)] {
				took = append(took, "port "+strings.TrimSpace(port))
				continue
			}
			keep = append(keep, strings.TrimSpace(port))
		}
		if len(keep) < len(strings.Split(v, ",")) {
			set[annExcludeOutPorts] = strings.Join(keep, ",")
		}
	}
	if v, ok := p.Annotations[annExcludeOutIPs]; ok {
		var keep []string
		for _, r := range strings.Split(v, ",") {
			pr, err := netip.ParsePrefix(strings.TrimSpace(r))
			if err == nil && slices.ContainsFunc(addrs, pr.Contains) {
				took = append(took, "range "+pr.String())
				continue
			}
			keep = append(keep, strings.TrimSpace(r))
		}
		if len(keep) < len(strings.Split(v, ",")) {
			set[annExcludeOutIPs] = strings.Join(keep, ",")
		}
	}
	if len(set) == 0 {
		return ""
	}
	return setTemplateAnnotations(p, set) + "   # takes " + strings.Join(took, ", ") + " out of the pod's exclusions: its connections there go through the proxy (mTLS, policy, telemetry)"
}

// setTemplateAnnotations sets annotations (a value "" removes it) where
// the pod's template is: its workload's (a merge patch; a Job re-created),
// or a bare pod's applied manifest.
func setTemplateAnnotations(p *corev1.Pod, set map[string]string) string {
	change := map[string]any{}
	ptrs := map[string]*string{}
	for k, v := range set {
		if v == "" {
			change[k], ptrs[k] = nil, nil
			continue
		}
		change[k], ptrs[k] = v, &v
	}
	meta, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": change}})
	owner := templateOwner(p)
	switch {
	case owner == "":
		if cmd := recreateBarePod(p, "", "merge", string(meta)); cmd != "" {
			return cmd
		}
		return "in the pod's manifest, set the annotations " + string(meta) + ", then re-create the pod"
	case strings.HasPrefix(owner, "job/"):
		return injection.RecreateJob(strings.TrimPrefix(owner, "job/"), p.Namespace, ptrs, nil)
	}
	return fmt.Sprintf("kubectl patch %s -n %s --type=merge -p '{\"spec\":{\"template\":%s}}'", owner, p.Namespace, meta) + replacePod(p, owner)
}
