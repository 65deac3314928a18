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
func renderAt(width int, fn func(p *printer)) []byte {
	var buf bytes.Buffer
	fn(&printer{out: &buf, width: width})
	return buf.Bytes()
}

// goldenAt compares a view at every width with its golden files and checks
// that no line is wider than the terminal.
func goldenAt(t *testing.T, name string, fn func(p *printer)) {
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
	if p := newPrinter(&bytes.Buffer{}); p.color || p.width != 0 {
		t.Fatalf("a buffer gets colour %v, width %d", p.color, p.width)
	}
	rs := sampleReports()
	goldenAt(t, "factor-table", func(p *printer) { printFactorTable(p, realisticReport(), false) })
	goldenAt(t, "factor-table-all", func(p *printer) { printFactorTable(p, realisticReport(), true) })
	goldenAt(t, "factor-table-native", func(p *printer) { printFactorTable(p, rs[0], false) })
	facts := &injection.ClusterFacts{Namespaces: map[string]*corev1.Namespace{
		"legacy": {ObjectMeta: metav1.ObjectMeta{Name: "legacy", Labels: map[string]string{"istio-injection": "enabled"}}}}}
	goldenAt(t, "pod-rows", func(p *printer) {
		if err := printPodRows(p, sampleReports(), facts); err != nil {
			t.Fatal(err)
		}
	})
	out := renderAt(120, func(p *printer) { printFactorTable(p, realisticReport(), false) })
	if lines := strings.SplitN(string(out), "\n", 3); !strings.HasPrefix(lines[1], "Verdict: Not injected") {
		t.Errorf("the verdict is not on the second line:\n%s", out)
	}
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"line\nbreak":      `line\nbreak`,
		"ünïcödé ok":       "ünïcödé ok",
		"bell\a":           `bell\a`,
		"tab	here":         "tab here",
		`quotes "stay"`:    `quotes "stay"`,
		"carriage\rreturn": `carriage\rreturn`,
	} {
		if got := escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// On a terminal the effects are coloured and headings bold (lipgloss v2
// renders escape codes unconditionally, so the printer must not style at all
// when colour is off).
func TestColourOnlyWhenOn(t *testing.T) {
	on := &printer{out: &bytes.Buffer{}, color: true}
	off := &printer{out: &bytes.Buffer{}}
	for e, code := range map[string]string{
		injection.EffectInject: "\x1b[32m", injection.EffectSkip: "\x1b[31m", injection.EffectBlocks: "\x1b[31m",
		injection.EffectWarning: "\x1b[33m", injection.EffectUnknown: "\x1b[35m",
	} {
		if got := on.effect(e); !strings.HasPrefix(got, code) || !strings.Contains(got, e) {
			t.Errorf("colour on: effect %q renders %q, want it in %q", e, got, code)
		}
		if got := off.effect(e); got != e {
			t.Errorf("colour off: effect %q renders %q", e, got)
		}
	}
	if got := on.bold("Verdict"); !strings.HasPrefix(got, "\x1b[1m") {
		t.Errorf("bold renders %q", got)
	}
	if got := off.bold("Verdict"); got != "Verdict" {
		t.Errorf("bold without colour renders %q", got)
	}
	if got := on.effect(injection.EffectNone); got != injection.EffectNone {
		t.Errorf("an effect without a colour renders %q", got)
	}
}

// A wrapped line is never wider than asked, whatever lipgloss.Wrap does
// with a line ending in "…." (it left one a column too wide).
func TestWrapTextFits(t *testing.T) {
	text := `Pods cannot be created: the apiserver rejected pod creation: Error creating: admission webhook "namespace.sidecar-injector.istio.io" denied the request: failed to run injection template: 1 error occurred:\n * invalid value '10.0.0.0/33' for annotation 'traffic.s….`
	checked := 0
	for w := 10; w <= 120; w++ {
		for _, l := range strings.Split(wrapText(text, w, cellBreaks), "\n") {
			if lipgloss.Width(l) > w {
				t.Errorf("width %d: a line of %d: %q", w, lipgloss.Width(l), l)
			}
			checked++
		}
	}
	t.Logf("%d wrapped lines fit", checked)
}
