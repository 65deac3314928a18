package upgrade

import (
	"fmt"
	"strconv"
	"strings"
)

// Skew says how a proxy's release stands against its control plane's,
// by Istio's stated policy (supported releases: the control plane may be
// one minor ahead of its proxies, never behind): "" within it, or why not.
// Either release unknown or not "1.N" is "" too: not judged.
func Skew(proxy, controlPlane string) string {
	p, okP := minorOf(proxy)
	c, okC := minorOf(controlPlane)
	switch {
	case !okP || !okC:
		return ""
	case p > c:
		return fmt.Sprintf("its proxy (Istio %s) is ahead of its revision's control plane (%s): Istio supports a control plane at most one minor ahead of its proxies, never behind them", proxy, controlPlane)
	case c-p > 1:
		return fmt.Sprintf("its proxy (Istio %s) is %d minors behind its revision's control plane (%s): Istio supports a control plane at most one minor ahead of its proxies; restart it (or move it) first", proxy, c-p, controlPlane)
	}
	return ""
}

func minorOf(release string) (int, bool) {
	major, minor, ok := strings.Cut(release, ".")
	if !ok || major != "1" {
		return 0, false
	}
	minor, _, _ = strings.Cut(minor, ".")
	n, err := strconv.Atoi(minor)
	return n, err == nil
}
