package nsexec

import "testing"

// Only a whole line is the dump's end: a rule's comment holding the same
// text is part of the dump.
func TestBeforeEnd(t *testing.T) {
	rule := `-A ISTIO_OUTPUT -m comment --comment "### kubectl-mesh-end 0" -j RETURN` + "\n"
	for _, c := range []struct{ log, before, status string }{
		{"### kubectl-mesh 1 nft\nx\n### kubectl-mesh-end 0\n", "### kubectl-mesh 1 nft\nx\n", "0"},
		{"### kubectl-mesh 1 nft\n" + rule + "### kubectl-mesh-end 3\n", "### kubectl-mesh 1 nft\n" + rule, "3"},
		{"### kubectl-mesh 1 nft\n" + rule, "### kubectl-mesh 1 nft\n" + rule, ""},
		{"### kubectl-mesh-end 1\n", "", "1"},
		{"nsenter: cannot open /proc/9/ns/net\n### kubectl-mesh-end 1", "nsenter: cannot open /proc/9/ns/net\n", "1"},
	} {
		before, status := beforeEnd(c.log)
		if before != c.before || status != c.status {
			t.Errorf("beforeEnd(%q) = %q, %q; want %q, %q", c.log, before, status, c.before, c.status)
		}
	}
}
