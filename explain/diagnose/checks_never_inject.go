package diagnose

import (
	"regexp"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeNeverInjected: the injector's neverInjectSelector keeps a pod out of
// the mesh that its namespace asks to inject.
const CodeNeverInjected = "KM-INJ-019"

func init() {
	register(&Spec{Code: CodeNeverInjected, Title: "left out by the injector's neverInjectSelector", Stage: CheckInjection, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod, FactMesh},
		Means:   "The pod's namespace asks for injection and a webhook selects it, but the injector's mesh-wide neverInjectSelector (its ConfigMap, set by the mesh's operators) matches the pod's labels: istiod leaves it out. Its traffic is not the mesh's (no mTLS, no policy, no telemetry), often unknown to the team that owns it. A warning: it may be meant.",
		Detects: "The injection model's neverInjectSelector factor that made the injector skip a pod with no sidecar, or a manifest's pod template (-f) (no explicit sidecar.istio.io/inject on the pod, which the selector would not override).",
		Fixes:   "If the pod belongs in the mesh: label its template sidecar.istio.io/inject=true (an explicit label wins over the selectors); else nothing.",
		Source:  "Istio docs, installing the sidecar (neverInjectSelector, alwaysInjectSelector); istioctl x check-inject",
		Planted: "a Deployment whose pod template carries a label the mesh's neverInjectSelector matches, in a namespace labelled istio-injection=enabled",
		run:     neverInjected})
}

// neverInVerdict: the verdict's words for the selector that matched.
var neverInVerdict = regexp.MustCompile(`the injector's neverInjectSelector (.+?) matches the pod`)

func neverInjected(in *Input) []Finding {
	p, r := in.Pod, in.Injection
	manifest := p == nil && len(in.Files) > 0
	if (p == nil && !manifest) || r == nil || in.injected() || r.Ambient {
		return nil
	}
	// The factor, where the report keeps its factors; its verdict, where a
	// sweep's does not.
	what := ""
	for _, f := range r.Factors {
		if f.Factor == "neverInjectSelector" && f.Effect == injection.EffectSkip {
			what = strings.TrimSpace(f.Value) + ", " + f.Source
		}
	}
	if m := neverInVerdict.FindStringSubmatch(r.Verdict); what == "" && m != nil {
		what = m[1]
	}
	if what == "" {
		return nil
	}
	why := "   # an explicit label wins over the injector's selectors; if the pod is meant to stay out of the mesh, leave it"
	fix := ""
	if manifest {
		fix = manifestEditFix(in.Files, "label the pod template "+istio.KeyInject+`: "true"; an explicit label wins over the injector's selectors; if the pod is meant to stay out of the mesh, leave it`, r)
	} else {
		fix = specFixLabel(p, templateOwner(p), istio.KeyInject, "true") + why
	}
	return []Finding{{Status: Warning,
		Evidence: "the namespace asks for injection, but the injector's neverInjectSelector matches the pod (" + what + "): istiod leaves it out of the mesh, so its traffic has no mTLS, policy or telemetry",
		Mesh:     "the injector's neverInjectSelector",
		Fix:      fix}}
}
