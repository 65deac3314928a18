package diagnose

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeInitDryRun: istio-init runs istio-iptables in dry-run mode and
// writes no capture rules.
const CodeInitDryRun = "KM-CAP-015"

// dryRunVar is the variable istio-iptables reads as its --dry-run flag.
const dryRunVar = "DRY_RUN"

func init() {
	register(&Spec{Code: CodeInitDryRun, Title: "istio-init writes no rules (dry run)", Stage: CheckCapture, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "istio-iptables reads DRY_RUN from its environment as its --dry-run flag: it then prints the rules and writes none. The injector copies proxyMetadata (the pod's proxy.istio.io/config, the mesh's defaultConfig) into istio-init's environment, so DRY_RUN=true there leaves the pod with no capture at all: it runs and is ready, with a sidecar nothing is sent through (no mTLS, no policy, no telemetry).",
		Detects: "On a pod with a sidecar and istio-init: DRY_RUN in istio-init's env with a value Go reads as true (true, 1, t, …).",
		Fixes:   "The pod's proxy.istio.io/config without DRY_RUN (a patch of the template, the rest of it kept; the rollout re-creates the pods); when the mesh's defaultConfig sets it, remove it there, then re-create the pods.",
		Source:  "istio-iptables (tools/istio-iptables: the dry-run flag bound to DRY_RUN, 1.20 through 1.31); Istio's injection template (proxyMetadata into istio-init's env)",
		Planted: "a Deployment whose proxy.istio.io/config sets proxyMetadata DRY_RUN=\"true\"",
		run:     initDryRun})
}

// initEnv is istio-init's value of name (the last entry wins, as in the
// kubelet), and whether it sets it.
func initEnv(p *corev1.Pod, name string) (value string, set bool) {
	for _, c := range p.Spec.InitContainers {
		if c.Name != istio.InitContainer {
			continue
		}
		for _, e := range c.Env {
			if e.Name == name {
				value, set = strings.TrimSpace(e.Value), true
			}
		}
	}
	return value, set
}

func initDryRun(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	v, set := initEnv(p, dryRunVar)
	if on, err := strconv.ParseBool(v); !set || err != nil || !on {
		return nil
	}
	said := "istio-init's environment sets " + dryRunVar + "=" + strconv.Quote(v)
	fd := Finding{Status: Fail, Mesh: said, explains: []string{CodeRulesDrift, CodeBypassing},
		Evidence: said + " (from proxyMetadata): istio-iptables runs as with --dry-run, prints the rules and writes none, so nothing of the pod's traffic goes through the proxy (no mTLS, no policy, no telemetry), though the pod is ready"}
	fd.Fix = proxyMetadataFix(p, []string{dryRunVar}, "istio-init writes the rules again")
	return []Finding{fd}
}
