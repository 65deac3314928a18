package injection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// istiod's template failing on a setting its message does not name: the
// templates the pod asks for, or a proxyMetadata value with a double
// quote; the fix takes that setting away (the rest of the config kept).
func TestTemplateFailure(t *testing.T) {
	denied := `admission webhook "namespace.sidecar-injector.istio.io" denied the request: failed to run injection template: `
	ds := func(a map[string]string) *Workload {
		return &Workload{Kind: "DaemonSet", Namespace: "ops", Name: "log-shipper", Annotations: a}
	}
	cases := []struct {
		name, msg string
		w         *Workload
		reason    string
		fix       string
	}{
		{"waypoint template", denied + "template: inject:4:10: executing \"inject\" at <.ServiceAccount>: can't evaluate field ServiceAccount",
			ds(map[string]string{istio.AnnotationTemplates: "waypoint"}), "inject.istio.io/templates=waypoint",
			`kubectl patch daemonset/log-shipper -n ops --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/inject.istio.io~1templates"}]'`},
		{"quoted metadata", denied + "failed applying injection overlay: strategic merge: invalid JSON document",
			ds(map[string]string{istio.AnnotationProxyConfig: "proxyMetadata:\n  LABELS: '{\"a\":\"b\"}'\n  OTHER: x\n"}), "LABELS",
			`kubectl patch daemonset/log-shipper -n ops --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":"{\"proxyMetadata\":{\"OTHER\":\"x\"}}"}}}}}'`},
		{"only quoted metadata", denied + "failed applying injection overlay: strategic merge: invalid JSON document",
			ds(map[string]string{istio.AnnotationProxyConfig: `{"proxyMetadata":{"LABELS":"{\"a\":1}"}}`}), "LABELS",
			`kubectl patch daemonset/log-shipper -n ops --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/proxy.istio.io~1config"}]'`},
		{"neither", denied + "something", ds(map[string]string{istio.AnnotationProxyConfig: "concurrency: 2"}), "", ""},
	}
	for _, tc := range cases {
		reason, fix, ok := templateFailure(tc.msg, tc.w)
		if tc.reason == "" {
			if ok {
				t.Errorf("%s: %q %q", tc.name, reason, fix)
			}
			continue
		}
		if !ok || !strings.Contains(reason, tc.reason) || !strings.HasPrefix(fix, tc.fix) {
			t.Errorf("%s:\n reason %q\n fix %q\nwant %q, %q…", tc.name, reason, fix, tc.reason, tc.fix)
		}
	}
	t.Logf("%d checks", len(cases))
}

// A CronJob's fixed template leaves the Jobs made from the old one: they
// are deleted, each named once.
func TestStaleJobs(t *testing.T) {
	ev := func(kind, name string) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}}
	}
	w := &Workload{Kind: "CronJob", Namespace: "ops", Name: "report", Events: []corev1.Event{ev("Job", "report-2"), ev("Job", "report-1"), ev("Job", "report-2"), ev("CronJob", "report")}}
	if got := staleJobs(w); !strings.HasPrefix(got, "\nkubectl delete job report-1 report-2 -n ops --ignore-not-found   # ") {
		t.Errorf("%q", got)
	}
	if got := staleJobs(&Workload{Kind: "CronJob"}); got != "" {
		t.Errorf("no events: %q", got)
	}
}
