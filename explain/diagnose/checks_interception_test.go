package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// excludeInterfaces naming eth0 turns capture off as interceptionMode NONE
// does (KM-CAP-004); another interface is not the pod's own.
func TestExcludeInterfacesEth0(t *testing.T) {
	for _, tc := range []struct {
		value string
		fires bool
	}{{"eth0", true}, {"net1, eth0", true}, {"net1", false}} {
		f := checkCase{pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeInterfaces": tc.value}
		}}.facts()
		fs := only(Diagnose(f).Findings, CodeInterceptionNone)
		if (len(fs) == 1) != tc.fires || tc.fires && (!strings.Contains(fs[0].Evidence, "names eth0") || !strings.Contains(fs[0].Fix, "excludeInterfaces")) {
			t.Errorf("excludeInterfaces %q: %+v", tc.value, fs)
		}
	}
}
