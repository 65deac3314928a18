package render

import (
	"bytes"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// -o name prints each subject as kind/name, one a line, as kubectl get -o
// name: a list's items, a single report's subject, a pod when the report
// is of a pod.
func TestOutputName(t *testing.T) {
	ds := []*diagnose.Diagnosis{{WorkloadKind: "Pod", Namespace: "shop", Name: "web-1"}, {WorkloadKind: "CronJob", Namespace: "shop", Name: "nightly"}}
	cases := []struct {
		name string
		run  func(*bytes.Buffer) error
		want string
	}{
		{"a list", func(b *bytes.Buffer) error {
			return List(b, Name, "DiagnosisList", len(ds), func(i int) any { return ds[i] })
		}, "pod/web-1\ncronjob/nightly\n"},
		{"one report", func(b *bytes.Buffer) error {
			return Structured(b, Name, DiagnosisDoc{APIVersion: APIVersion, Kind: "Diagnosis", Diagnosis: ds[1]})
		}, "cronjob/nightly\n"},
		{"a pod's report", func(b *bytes.Buffer) error {
			return Structured(b, Name, &startup.StartupReport{Name: "web-1", Namespace: "shop"})
		}, "pod/web-1\n"},
	}
	for _, tc := range cases {
		var b bytes.Buffer
		if err := tc.run(&b); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if b.String() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, b.String(), tc.want)
		}
	}
	t.Logf("%d checks", len(cases))
}
