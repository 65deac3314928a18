package upgrade

import (
	"strings"
	"testing"
)

// Istio's skew policy: a control plane at most one minor ahead of its
// proxies, never behind; what cannot be read is not judged.
func TestSkew(t *testing.T) {
	for _, c := range []struct {
		proxy, cp, want string
	}{
		{"1.31", "1.31", ""}, {"1.30", "1.31", ""},
		{"1.29", "1.31", "2 minors behind"}, {"1.31", "1.30", "ahead of its revision's control plane"},
		{"", "1.31", ""}, {"1.31", "unknown", ""}, {"2.0", "1.31", ""},
	} {
		got := Skew(c.proxy, c.cp)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("Skew(%q, %q) = %q, want %q", c.proxy, c.cp, got, c.want)
		}
	}
}
