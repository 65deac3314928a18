package diagnose

import (
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeProxyConfigKey: a key of proxy.istio.io/config that is a misspelt
// ProxyConfig field, which istiod ignores.
const CodeProxyConfigKey = "KM-INJ-020"

func init() {
	register(&Spec{Code: CodeProxyConfigKey, Title: "proxy.istio.io/config key misspelt", Stage: CheckInjection, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod},
		Means:   "A top-level key of the pod's proxy.istio.io/config annotation is not a field of ProxyConfig but one or two edits away from one (holdApplicationUntilProxyStart): istiod ignores it without a word, so the setting meant (holding the app until the proxy is ready, the drain time, the proxy's metadata) is not in force.",
		Detects: "The annotation's top-level keys (JSON or YAML) against ProxyConfig's fields (istio.io/api mesh/v1alpha1/proxy.proto), by their JSON and proto names; a key near none is left alone (a field of a later release).",
		Fixes:   "The annotation with the key spelt as ProxyConfig's field, on the pod's template (its workload re-creates the pods).",
		Source:  "istio/istio issues on proxy.istio.io/config keys silently ignored; istio.io/api ProxyConfig",
		Planted: `a pod annotated proxy.istio.io/config: '{"holdApplicationUntilProxyStart": true}'`,
		run:     proxyConfigKeys})
}

func proxyConfigKeys(in *Input) []Finding {
	p := in.Pod
	if p == nil {
		return nil
	}
	cfg := p.Annotations[istio.AnnotationProxyConfig]
	if strings.TrimSpace(cfg) == "" {
		return nil
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(cfg), &m); err != nil {
		return nil // unreadable: istiod's own refusal says it
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fixed := cfg
	var said []string
	for _, k := range keys {
		field := istio.ProxyConfigNearMiss(k)
		if field == "" {
			continue
		}
		said = append(said, k+" (did you mean "+field+"?)")
		// The key renamed where it stands, JSON ("key") or YAML (key:).
		fixed = regexp.MustCompile(`(^|[\s{,"])`+regexp.QuoteMeta(k)+`("?\s*:)`).ReplaceAllString(fixed, "${1}"+field+"${2}")
	}
	if len(said) == 0 {
		return nil
	}
	f := Finding{Status: Warning, Mesh: "annotation " + istio.AnnotationProxyConfig,
		Evidence: istio.AnnotationProxyConfig + " sets " + quoteList(said) + ": not a field of ProxyConfig, so istiod ignores it and its setting is not in force"}
	f.Fix = "in the pod's template, spell it as ProxyConfig's field in " + istio.AnnotationProxyConfig
	if !strings.Contains(fixed, "'") {
		if cmd := setTemplateAnnotations(p, map[string]string{istio.AnnotationProxyConfig: fixed}); !strings.HasPrefix(cmd, "in the pod's manifest") {
			f.Fix = cmd + "   # the key spelt as ProxyConfig's field"
		}
	}
	return []Finding{f}
}
