package render

import (
	"bytes"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		took        time.Duration
		want        string
	}{
		{0, 400, time.Second, "dry runs: 0/400"},
		{100, 400, 2 * time.Second, "dry runs: 100/400, 50/s, about 6s left"},
		{400, 400, 8 * time.Second, "dry runs: 400/400, 50/s"},
	} {
		if got := ProgressLine("dry runs", tc.done, tc.total, tc.took); got != tc.want {
			t.Errorf("%d/%d in %s: %q, want %q", tc.done, tc.total, tc.took, got, tc.want)
		}
	}
	// Not a terminal: nothing is written.
	var b bytes.Buffer
	pr := NewProgress(&b, "x", 3)
	pr.Add(3)
	pr.Finish()
	if b.Len() != 0 {
		t.Errorf("progress written to a pipe: %q", b.String())
	}
}
