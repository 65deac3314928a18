// Package testreport carries a test's counts (configurations, connections,
// combinations checked) to the end of `make test`: go test prints nothing of
// a passing package without -v, so each count is also appended to the file
// named by $KMESH_TEST_REPORT, which hack/test.sh prints when it finishes.
package testreport

import (
	"fmt"
	"os"
	"testing"
)

// Count logs what a test checked and, when the test passes and
// $KMESH_TEST_REPORT is set, appends it there as one line.
func Count(t testing.TB, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv("KMESH_TEST_REPORT")
	if path == "" {
		return
	}
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "%s: %s\n", t.Name(), line)
			f.Close()
		}
	})
}
