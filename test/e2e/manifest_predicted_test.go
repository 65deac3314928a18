package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// A DaemonSet manifest whose sidecar status port is the inbound listener's
// (red team round 19's 24), not applied: diagnose -f cannot see the hazard
// (it needs the injected pod), diagnose -f --verify sees it on the pod the
// real injector returned from the dry run, fails the start row as
// predicted (exit 4) and says to edit the file; the same manifest without
// the annotation, verified, fails nothing.
func TestManifestPredictedHazard(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ns := c.Namespace(t, "kmfile-predict", map[string]string{"istio-injection": "enabled"})
	checks := 0
	defer func() { testreport.Count(t, "a manifest's hazard predicted on the dry run's pod: %d checks", checks) }()
	dir := t.TempDir()
	manifest := func(annotations string) string {
		return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-cache, namespace: ` + ns + `}
spec:
  selector: {matchLabels: {app: node-cache}}
  template:
    metadata:
      labels: {app: node-cache}
      annotations: {` + annotations + `}
    spec:
      containers:
      - name: app
        image: ` + testImage + `
        imagePullPolicy: Never
        command: ["httpd", "-f", "-p", "8080"]
        readinessProbe: {httpGet: {path: /, port: 8080}}
`
	}
	bad, good := filepath.Join(dir, "bad.yaml"), filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(bad, []byte(manifest(`status.sidecar.istio.io/port: "15006"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(good, []byte(manifest(``)), 0o600); err != nil {
		t.Fatal(err)
	}
	rowOf := func(d diagnose.Diagnosis, name string) diagnose.Check {
		for _, ch := range d.Checks {
			if ch.Name == name {
				return ch
			}
		}
		return diagnose.Check{}
	}
	for _, tc := range []struct {
		file   string
		verify bool
		code   int
		start  string // the start row's status
		first  string // its code
	}{
		{bad, false, 0, diagnose.NotChecked, ""},
		{bad, true, 4, diagnose.Fail, diagnose.CodeStatusOnProxyPort},
		{good, true, 0, diagnose.NotChecked, ""},
	} {
		args := []string{"-f", tc.file}
		if tc.verify {
			args = append(args, "--verify")
		}
		r, doc := diag(t, c, args...)
		items := doc.all()
		checks++
		if len(items) != 1 {
			t.Errorf("diagnose %v: %d items, want 1", args, len(items))
			continue
		}
		start := rowOf(items[0], diagnose.CheckStart)
		checks += 2
		if r.code != tc.code || start.Status != tc.start || start.Code != tc.first {
			t.Errorf("diagnose %v: exit %d, start %s %s; want exit %d, start %s %s\n%s", args, r.code, start.Status, start.Code, tc.code, tc.start, tc.first, r.stdout)
		}
		if tc.first != "" {
			checks++
			if !strings.HasPrefix(start.Fix, "# edit "+tc.file+" first: ") {
				t.Errorf("diagnose %v: fix %q does not edit the file first", args, start.Fix)
			}
		}
	}
}
