package rules

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// A dump whose tables hold no rule is an answer (nothing is captured: for an
// injected pod every rule is missing); a dump whose tools did not run is
// not: nothing is known of the rules, and no fix may rest on it.
func TestLiveInputNoRulesOrUnread(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "istio-init", Image: "docker.io/istio/proxyv2:1.30.3", Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020"}}}}}
	dump := func(nft, legacy string) *nsexec.Result {
		return &nsexec.Result{Sections: []nsexec.Section{
			{Round: 1, Name: "iptables-nft-save", Text: nft}, {Round: 1, Name: "ip6tables-nft-save", Text: nft},
			{Round: 1, Name: "iptables-legacy-save", Text: legacy}, {Round: 1, Name: "ip6tables-legacy-save", Text: legacy},
			{Round: 1, Name: "conntrack", Text: ""}}}
	}
	missing := "/bin/sh: iptables-legacy-save: not found\n"
	checked := 0
	for _, tc := range []struct {
		name        string
		res         *nsexec.Result
		noRules     bool
		errContains string
	}{
		{"nft empty, legacy tool missing: read, no rules", dump("", missing), true, ""},
		{"legacy tables without rules: read, no rules", dump("", "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"), true, ""},
		{"no tool ran: unread", dump("/bin/sh: iptables-nft-save: not found\n", missing), false, "no iptables-save output"},
	} {
		in, _, _, err := LiveInput(pod, tc.res)
		switch {
		case tc.noRules && !errors.Is(err, ErrNoRules):
			t.Errorf("%s: %v, want ErrNoRules", tc.name, err)
		case !tc.noRules && (err == nil || errors.Is(err, ErrNoRules) || !strings.Contains(err.Error(), tc.errContains)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.errContains)
		case tc.noRules && (in.ExpectArgs == nil || !in.ConntrackRead):
			t.Errorf("%s: the pod's arguments %q and its flows (read %v) are lost", tc.name, in.ExpectArgs, in.ConntrackRead)
		}
		checked++
		if !tc.noRules {
			continue
		}
		// What diagnose makes of it: every rule the arguments call for missing.
		rep := NoRules(pod, in)
		if rep == nil || rep.Drift == nil || len(rep.Drift.Missing) == 0 || rep.ConnectionsSummary == "" {
			t.Errorf("%s: no rules read should be all rules missing, flows classified: %+v", tc.name, rep)
		}
		checked++
	}
	t.Logf("%d dumps read", checked)
}
