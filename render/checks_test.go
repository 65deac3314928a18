package render

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/checks.md from the registry")

// docs/checks.md is the registry's: stale, it fails.
func TestChecksDocIsCurrent(t *testing.T) {
	path := filepath.Join("..", "docs", "checks.md")
	got := ChecksMarkdown()
	if *updateDocs {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./render -update-docs writes it)", err)
	}
	if string(want) != got {
		t.Fatalf("docs/checks.md is stale: go test ./render -update-docs rewrites it from the registry")
	}
	t.Logf("docs/checks.md: %d checks", len(diagnose.Checks()))
}

// Every check says what it is, and its title fits a sweep's row.
func TestEveryCheckIsDocumented(t *testing.T) {
	specs := diagnose.Checks()
	if len(specs) < 30 {
		t.Errorf("%d checks; the catalogue has at least 30", len(specs))
	}
	for _, s := range specs {
		if s.Title == "" || len(s.Title) > 50 || s.Means == "" || s.Detects == "" || s.Fixes == "" || s.Source == "" || s.Planted == "" || len(s.Reads) == 0 {
			t.Errorf("%s: title (≤50), means, detects, fixes, source, planted and reads are all required: %+v", s.Code, s)
		}
		switch s.Status {
		case diagnose.Fail, diagnose.Warning, diagnose.Unknown, diagnose.Info:
		default:
			t.Errorf("%s: status %q", s.Code, s.Status)
		}
	}
}
