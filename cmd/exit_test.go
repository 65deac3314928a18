package cmd

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
)

// Each kind of error exits with its code: an engine's input error (a bad
// manifest, an input too large) is a usage error, as a bad flag is.
func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{&InterruptedError{Err: errors.New("interrupted")}, ExitInterrupted},
		{&UsageError{Err: errors.New("bad flag")}, ExitUsage},
		{fmt.Errorf("reading: %w", &engine.InputError{Err: errors.New("not YAML")}), ExitUsage},
		{&IncompleteError{Err: errors.New("some facts")}, ExitIncomplete},
		{&ProblemError{Err: errors.New("a problem")}, ExitProblem},
		{errors.New("cluster unreachable"), ExitError},
	} {
		var out bytes.Buffer
		if code := exitCode(tc.err, &out); code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.err, code, tc.code)
		}
	}
}
