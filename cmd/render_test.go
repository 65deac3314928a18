package cmd

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// The plain (piped) renderings of the factor table and of the pod rows.
func TestRenderGolden(t *testing.T) {
	var buf bytes.Buffer
	p := newPrinter(&buf)
	if p.color {
		t.Fatal("colour on for a buffer")
	}
	rs := sampleReports()
	printFactorTable(p, rs[0])
	golden(t, "factor-table.golden", buf.Bytes())

	buf.Reset()
	facts := &injection.ClusterFacts{Namespaces: map[string]*corev1.Namespace{
		"legacy": {ObjectMeta: metav1.ObjectMeta{Name: "legacy", Labels: map[string]string{"istio-injection": "enabled"}}}}}
	printPodRows(p, rs, facts)
	golden(t, "pod-rows.golden", buf.Bytes())
	if bytes.Contains(buf.Bytes(), []byte("\x1b")) {
		t.Error("escape sequences in plain output")
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
