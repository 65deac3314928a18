package injection

import (
	"strings"
	"testing"
)

// A namespace that carries its injection key as an annotation gets no
// sidecar: that is named as the cause, and the fix labels it, then
// restarts the pod's workload. A labelled namespace, an opted-out pod and
// a namespace with no such annotation are left as they are.
func TestNamespaceAnnotatedNotLabelled(t *testing.T) {
	m := Istio{}
	checks := 0
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		labels      map[string]string
		podLabels   map[string]string
		fix         string // "" for none of this check's
	}{
		{"istio-injection as an annotation", map[string]string{"istio-injection": "enabled"}, nil, nil,
			"kubectl label namespace app istio-injection=enabled   # the annotation's key and value, as a label (kubectl annotate namespace app istio-injection- removes the annotation)\nkubectl rollout restart deployment/web -n app"},
		{"istio.io/rev as an annotation", map[string]string{"istio.io/rev": "canary"}, nil, nil,
			"kubectl label namespace app istio.io/rev=canary   # the annotation's key and value, as a label (kubectl annotate namespace app istio.io/rev- removes the annotation)\nkubectl rollout restart deployment/web -n app"},
		{"labelled too", map[string]string{"istio-injection": "enabled"}, map[string]string{"istio-injection": "disabled"}, nil, ""},
		{"pod opted out", map[string]string{"istio-injection": "enabled"}, nil, map[string]string{"sidecar.istio.io/inject": "false"}, ""},
		{"no such annotation", map[string]string{"team": "a"}, nil, nil, ""},
	} {
		f, w := livePod("app", tc.labels, "", "", false)
		f.Namespaces["app"].Annotations = tc.annotations
		w.Labels = tc.podLabels
		r := m.Explain(f, w)
		checks++
		named := strings.Contains(strings.Join(r.WarningsOf(WarnAskedNotDone), " "), "as an annotation, not a label")
		if named != (tc.fix != "") {
			t.Errorf("%s: named the annotation = %v, want %v: %v", tc.name, named, tc.fix != "", r.Warnings)
		}
		if tc.fix != "" {
			checks++
			if r.Fix != tc.fix {
				t.Errorf("%s: fix\n%s\nwant\n%s", tc.name, r.Fix, tc.fix)
			}
		}
	}
	t.Logf("%d checks", checks)
}
