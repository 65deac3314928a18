package injection

import (
	"strings"
	"testing"
)

// A Job's pod template is immutable: every fix that changes it re-creates
// the Job (and never patches it); other kinds are patched, a CronJob at its
// jobTemplate.
func TestTemplateFixesOfAJob(t *testing.T) {
	const recreate = "kubectl get job app -n app -o json | kubectl patch --local -f - --type=merge -p '"
	cases := []struct {
		name, kind string
		labels     map[string]string
		ann        map[string]string
		want       []string
		mustNot    string
	}{
		{name: "Job: istiod refuses an annotation value", kind: "Job", labels: map[string]string{"sidecar.istio.io/inject": "true"},
			ann:     map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY_V2"},
			want:    []string{recreate, `"sidecar.istio.io/interceptionMode":null`, `"selector":null`, `"controller-uid":null`, `"batch.kubernetes.io/controller-uid":null`, "| kubectl replace --force -f -", "sidecar.istio.io/interceptionMode: not REDIRECT"},
			mustNot: "kubectl patch job"},
		{name: "Deployment: patched", kind: "Deployment", labels: map[string]string{"sidecar.istio.io/inject": "true"},
			ann:  map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY_V2"},
			want: []string{`kubectl patch deployment/app -n app --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/sidecar.istio.io~1interceptionMode"}]'`}},
		{name: "CronJob: its jobTemplate", kind: "CronJob", labels: map[string]string{"sidecar.istio.io/inject": "true"},
			ann:  map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY_V2"},
			want: []string{`kubectl patch cronjob/app -n app --type=json -p '[{"op":"remove","path":"/spec/jobTemplate/spec/template/metadata/annotations/sidecar.istio.io~1interceptionMode"}]'`}},
		{name: "Job: the inject label set by re-creating it", kind: "Job", ann: map[string]string{"sidecar.istio.io/inject": "true"},
			want: []string{recreate, `"sidecar.istio.io/inject":"true"`, "kubectl replace --force -f -"}, mustNot: "kubectl patch job"},
		{name: "Job: inject=false removed by re-creating it", kind: "Job", labels: map[string]string{"sidecar.istio.io/inject": "false"},
			want: []string{recreate, `"sidecar.istio.io/inject":null`, "kubectl replace --force -f -"}, mustNot: "kubectl patch job"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := withNamespace(meshFacts(), "app", nil)
			w := template("app", tc.labels, tc.ann)
			w.Kind = tc.kind
			r := Istio{}.Explain(f, w)
			for _, s := range tc.want {
				if !strings.Contains(r.Fix, s) {
					t.Errorf("fix %q lacks %q", r.Fix, s)
				}
			}
			if tc.mustNot != "" && strings.Contains(r.Fix, tc.mustNot) {
				t.Errorf("fix %q says %q", r.Fix, tc.mustNot)
			}
		})
	}
}

// The re-creating pipeline clears what the apiserver generated for the old
// Job; a CronJob's template is patched at its jobTemplate.
func TestRecreateJobPatch(t *testing.T) {
	v := "10m"
	got := RecreateJob("migrate", "shop", map[string]*string{"sidecar.istio.io/proxyCPU": &v}, nil)
	want := `kubectl get job migrate -n shop -o json | kubectl patch --local -f - --type=merge -p '{"metadata":{"creationTimestamp":null,"labels":{"batch.kubernetes.io/controller-uid":null,"controller-uid":null},"managedFields":null,"resourceVersion":null,"uid":null},"spec":{"manualSelector":null,"selector":null,"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"10m"},"labels":{"batch.kubernetes.io/controller-uid":null,"controller-uid":null}}}},"status":null}' -o json | kubectl replace --force -f -`
	if !strings.HasPrefix(got, want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if s := SetTemplateAnnotations("CronJob", "nightly", "shop", map[string]*string{"sidecar.istio.io/proxyCPU": &v}); !strings.HasPrefix(s, `kubectl patch cronjob/nightly -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"10m"}}}}}}}'`) {
		t.Errorf("cronjob: %s", s)
	}
}
