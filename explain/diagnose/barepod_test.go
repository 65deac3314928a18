package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A bare pod applied with kubectl gets a command that re-creates it from
// its applied manifest (not from the live pod, which carries what the
// injector added); one without that manifest, or whose manifest does not
// have the annotation, gets the manifest change in words.
func TestBarePodFixRecreatesFromAppliedManifest(t *testing.T) {
	const key = "traffic.sidecar.istio.io/includeOutboundIPRanges"
	applied := `{"apiVersion":"v1","kind":"Pod","metadata":{"annotations":{"` + key + `":"10.96.0.0/12"},"name":"reporter","namespace":"shop"}}`
	pod := func(ann map[string]string, owned bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "reporter", Namespace: "shop", Annotations: ann}}
		if owned {
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: &yes}}
		}
		return p
	}
	cases := []struct {
		name      string
		fix       string
		want, not []string
	}{
		{name: "applied: remove", fix: annotationPatch(pod(map[string]string{key: "10.96.0.0/12", lastApplied: applied}, false), key, ""),
			want: []string{"kubectl apply view-last-applied pod/reporter -n shop -o json | kubectl patch --local -f - --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/annotations/traffic.sidecar.istio.io~1includeOutboundIPRanges\"}]' -o json | kubectl replace --force -n shop -f -"}},
		{name: "applied: several removed", fix: removeAnnotations(pod(map[string]string{key: "x", lastApplied: applied}, false), []string{key, "sidecar.istio.io/proxyCPU"}),
			want: []string{`--type=merge -p '{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":null,"` + key + `":null}}}'`, "kubectl replace --force -n shop -f -"}},
		{name: "applied: set", fix: specFixAnnotation(pod(map[string]string{lastApplied: applied}, false), "sidecar.istio.io/inject", "false"),
			want: []string{`--type=merge -p '{"metadata":{"annotations":{"sidecar.istio.io/inject":"false"}}}'`}},
		{name: "created, not applied: words", fix: annotationPatch(pod(map[string]string{key: "10.96.0.0/12"}, false), key, ""),
			want: []string{"remove the annotation " + key + " from the pod's manifest"}, not: []string{"kubectl"}},
		{name: "the manifest lacks the annotation: words", fix: annotationPatch(pod(map[string]string{"other/x": "1", lastApplied: applied}, false), "other/x", ""),
			want: []string{"from the pod's manifest"}, not: []string{"view-last-applied"}},
		{name: "a controller's pod: its template", fix: annotationPatch(pod(map[string]string{key: "x", lastApplied: applied}, true), key, ""),
			want: []string{"kubectl patch statefulset/db -n shop --type=json"}, not: []string{"view-last-applied"}},
	}
	checked := 0
	for _, tc := range cases {
		for _, w := range tc.want {
			checked++
			if !strings.Contains(tc.fix, w) {
				t.Errorf("%s: fix lacks %q:\n%s", tc.name, w, tc.fix)
			}
		}
		for _, n := range tc.not {
			checked++
			if strings.Contains(tc.fix, n) {
				t.Errorf("%s: fix has %q:\n%s", tc.name, n, tc.fix)
			}
		}
	}
	t.Logf("%d assertions", checked)
}
