package cmd

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./cmd -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func sampleReports() []*injection.InjectionReport {
	yes, no := true, false
	return []*injection.InjectionReport{
		{Kind: "Pod", Namespace: "shop", Name: "backend-6bc5-x", Mesh: "istio", Injected: &yes, Expected: &yes, Revision: "default",
			Webhook: "istio-sidecar-injector/namespace.sidecar-injector.istio.io", Reason: "injected",
			Factors: []injection.Factor{
				{Factor: "namespace label istio-injection", Value: `"enabled"`, Effect: injection.EffectInject, Source: "Namespace shop"},
				{Factor: "pod label sidecar.istio.io/inject", Value: "(not set)", Effect: injection.EffectNone, Source: "pod label"},
				{Factor: "webhook backend", Value: "service istio-system/istiod", Effect: injection.EffectNone, Source: "1 ready endpoint"},
				{Factor: "policy", Value: `"enabled"`, Effect: injection.EffectInject, Source: "ConfigMap istio-system/istio-sidecar-injector config.policy"},
				{Factor: "node versions", Value: "node-old v1.32.13 (below 1.33)", Effect: injection.EffectInfoOnly, Source: "Node status.nodeInfo.kubeletVersion"},
				{Factor: "sidecar kind", Value: "classic", Effect: injection.EffectInfoOnly, Source: "ENABLE_NATIVE_SIDECARS=auto and every node must run kubelet 1.33 or newer: node-old v1.32.13 (below 1.33)"},
			},
			Verdict: "Injected by revision default."},
		{Kind: "Pod", Namespace: "legacy", Name: "billing-7c77-y", Mesh: "istio", Injected: &no, Expected: &yes, Revision: "default", Mismatch: &yes,
			Reason: "created before injection was enabled: restart", Fix: "kubectl rollout restart deployment/billing -n legacy"},
		{Kind: "Pod", Namespace: "plain", Name: "evil\x1b[31m-pod", Mesh: "istio", Injected: &no, Expected: &no, Mismatch: &no, Reason: "no Istio webhook matches"},
		{Kind: "Pod", Namespace: "locked", Name: "api-5d-z", Mesh: "istio", Injected: &yes, Revision: "default",
			Reason: "injected; unknown whether it would be now: needs list mutatingwebhookconfigurations.admissionregistration.k8s.io",
			Needs:  []string{"list mutatingwebhookconfigurations.admissionregistration.k8s.io"}},
	}
}

// realisticReport is why-injected's answer for a pod with Istio's usual
// three configurations (default, canary, tag prod): long selectors, sources
// and a long verdict and fix, as the demo prints them.
func realisticReport() *injection.InjectionReport {
	no := false
	r := &injection.InjectionReport{Kind: "Pod", Namespace: "plain", Name: "reports-678f45b8b7-pzxcg", Mesh: "istio", Injected: &no, Expected: &no, Mismatch: &no,
		Verdict: `Not injected, and it would not be if re-created: no Istio webhook matches: the annotation sidecar.istio.io/inject="true" is invisible to webhook selectors (only the label is seen).`,
		Fix:     `kubectl patch deployment reports -n plain --type merge -p '{"spec": {"template": {"metadata": {"labels": {"sidecar.istio.io/inject": "true"}}}}}'`,
		Factors: []injection.Factor{
			{Factor: "namespace label istio-injection", Value: "(not set)", Effect: injection.EffectNone, Source: "Namespace plain"},
			{Factor: "namespace label istio.io/rev", Value: "(not set)", Effect: injection.EffectNone, Source: "Namespace plain"},
			{Factor: "pod label sidecar.istio.io/inject", Value: "(not set)", Effect: injection.EffectNone, Source: "pod label"},
			{Factor: "pod annotation sidecar.istio.io/inject", Value: `"true"`, Effect: injection.EffectWarning, Source: "pod annotation; webhook selectors only see labels, so it cannot select a webhook (use the label)"},
		}}
	for _, w := range []struct{ config, name, value string }{
		{"istio-revision-tag-prod", "rev.namespace", `namespace does not match "!istio-injection,istio.io/rev in (prod)"`},
		{"istio-revision-tag-prod", "rev.object", `pod does not match "istio.io/rev in (prod),sidecar.istio.io/inject notin (false)"`},
		{"istio-sidecar-injector", "rev.namespace", `namespace does not match "!istio-injection,istio.io/rev in (default)"`},
		{"istio-sidecar-injector", "rev.object", `pod does not match "istio.io/rev in (default),sidecar.istio.io/inject notin (false)"`},
		{"istio-sidecar-injector", "namespace", `namespace does not match "istio-injection in (enabled)"`},
		{"istio-sidecar-injector", "object", `pod does not match "!istio.io/rev,sidecar.istio.io/inject in (true)"`},
		{"istio-sidecar-injector-canary", "rev.namespace", `namespace does not match "!istio-injection,istio.io/rev in (canary)"`},
		{"istio-sidecar-injector-canary", "rev.object", `pod does not match "istio.io/rev in (canary),sidecar.istio.io/inject notin (false)"`},
	} {
		r.Factors = append(r.Factors, injection.Factor{Factor: "webhook " + w.config + "/" + w.name + ".sidecar-injector.istio.io", Value: w.value,
			Effect: injection.EffectNone, Source: "MutatingWebhookConfiguration " + w.config})
	}
	r.Factors = append(r.Factors, injection.Factor{Factor: "sidecar.istio.io/status", Value: "(not set)", Effect: injection.EffectInfoOnly, Source: "pod: not injected"})
	return r
}

// widths are the terminal widths every human view is checked at; 0 is piped
// output (never wrapped).
var widths = []int{0, 80, 120}

// renderAt renders with the printer of a terminal that wide (0: piped).
func renderAt(width int, fn func(p *render.Printer)) []byte {
	var buf bytes.Buffer
	fn(&render.Printer{Out: &buf, Width: width})
	return buf.Bytes()
}

// goldenAt compares a view at every width with its golden files and checks
// that no line is wider than the terminal.
func goldenAt(t *testing.T, name string, fn func(p *render.Printer)) {
	t.Helper()
	for _, w := range widths {
		out := renderAt(w, fn)
		suffix := "piped"
		if w > 0 {
			suffix = fmt.Sprint(w)
			for i, line := range strings.Split(string(out), "\n") {
				if lw := lipgloss.Width(line); lw > w {
					t.Errorf("%s at %d columns: line %d is %d wide: %q", name, w, i+1, lw, line)
				}
			}
		} else if bytes.Contains(out, []byte("\x1b")) {
			t.Errorf("%s: escape sequences in piped output", name)
		}
		golden(t, name+"."+suffix+".golden", out)
	}
}

// Each why-injected view, piped and at 80 and 120 columns.
func TestRenderGolden(t *testing.T) {
	if p := render.NewPrinter(&bytes.Buffer{}); p.Color || p.Width != 0 {
		t.Fatalf("a buffer gets colour %v, width %d", p.Color, p.Width)
	}
	rs := sampleReports()
	goldenAt(t, "factor-table", func(p *render.Printer) { render.FactorTable(p, realisticReport(), false) })
	goldenAt(t, "factor-table-all", func(p *render.Printer) { render.FactorTable(p, realisticReport(), true) })
	goldenAt(t, "factor-table-native", func(p *render.Printer) { render.FactorTable(p, rs[0], false) })
	facts := &injection.ClusterFacts{Namespaces: map[string]*corev1.Namespace{
		"legacy": {ObjectMeta: metav1.ObjectMeta{Name: "legacy", Labels: map[string]string{"istio-injection": "enabled"}}}}}
	goldenAt(t, "pod-rows", func(p *render.Printer) {
		if err := printPodRows(p, sampleReports(), facts); err != nil {
			t.Fatal(err)
		}
	})
	out := renderAt(120, func(p *render.Printer) { render.FactorTable(p, realisticReport(), false) })
	if lines := strings.SplitN(string(out), "\n", 3); !strings.HasPrefix(lines[1], "Verdict: Not injected") {
		t.Errorf("the verdict is not on the second line:\n%s", out)
	}
}
