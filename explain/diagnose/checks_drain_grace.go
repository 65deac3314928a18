package diagnose

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeDrainOutlastsGrace: the proxy is told to drain for longer than the
// pod is given to stop.
const CodeDrainOutlastsGrace = "KM-START-020"

func init() {
	register(&Spec{Code: CodeDrainOutlastsGrace, Title: "the proxy's drain outlasts the pod's grace period", Stage: CheckStart, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod},
		Means:   "On SIGTERM the proxy's agent drains for terminationDrainDuration (ProxyConfig; 5s by default) before Envoy exits. The kubelet kills whatever still runs when the pod's terminationGracePeriodSeconds (30 by default) is up: a drain as long or longer is cut short on every delete and rollout, and the connections it was to let finish are reset.",
		Detects: "istio-proxy's PROXY_CONFIG (the injector's merge of the mesh's, a ProxyConfig's and the pod's proxy.istio.io/config) terminationDrainDuration, against the pod's terminationGracePeriodSeconds.",
		Fixes:   "A choice, both named: the template's terminationGracePeriodSeconds raised above the drain (a strategic merge of the template; its rollout re-creates the pods), or a terminationDrainDuration shorter than the grace period in proxy.istio.io/config.",
		Source:  "Istio ProxyConfig reference (terminationDrainDuration); Kubernetes pod termination (terminationGracePeriodSeconds); istio/istio issues on connections reset at rollouts",
		Planted: "a sidecar pod whose proxy.istio.io/config sets terminationDrainDuration 60s, with terminationGracePeriodSeconds 5",
		run:     drainOutlastsGrace})
}

// proxyDrain is the drain istio-proxy is given, and whether it is set
// (else Istio's default, 5s).
func proxyDrain(proxy *corev1.Container) (time.Duration, bool) {
	if proxy != nil {
		for _, e := range proxy.Env {
			if e.Name != "PROXY_CONFIG" {
				continue
			}
			var pc struct {
				TerminationDrainDuration string `json:"terminationDrainDuration"`
			}
			if json.Unmarshal([]byte(e.Value), &pc) != nil || pc.TerminationDrainDuration == "" {
				continue
			}
			if d, err := time.ParseDuration(pc.TerminationDrainDuration); err == nil {
				return d, true
			}
		}
	}
	return 5 * time.Second, false
}

func drainOutlastsGrace(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.DeletionTimestamp != nil {
		return nil
	}
	proxy, _ := in.container(istio.ProxyContainer)
	drain, set := proxyDrain(proxy)
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	if !set || drain < time.Duration(grace)*time.Second {
		return nil
	}
	raise := int64(drain/time.Second) + 10
	fix := in.templateSpecFix(fmt.Sprintf(`{"spec":{"terminationGracePeriodSeconds":%d}}`, raise))
	note := fmt.Sprintf("a choice: a grace period of %ds, longer than the proxy's drain; or a terminationDrainDuration shorter than %ds in proxy.istio.io/config", raise, grace)
	if fix == "" {
		fix = fmt.Sprintf("in the pod's manifest, set terminationGracePeriodSeconds: %d, then re-create the pod", raise)
	}
	return []Finding{{Mesh: "the proxy's terminationDrainDuration " + drain.String(),
		Evidence: fmt.Sprintf("istio-proxy is told to drain for %s on SIGTERM (PROXY_CONFIG terminationDrainDuration), but the pod's terminationGracePeriodSeconds is %d: at every delete or rollout the kubelet kills the proxy %ds into its drain, and the connections it was to let finish are reset", drain, grace, grace),
		Fix:      firstLineNote(fix, note)}}
}
