package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A manifest not created yet, proved with --verify: the pod admission
// returned is checked by the catalogue's static checks, and a hazard shows
// on its stage row as predicted, with a fix that edits the file; a healthy
// admitted pod, or a manifest not verified, gets none.
func TestPredictedOnAdmittedPod(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name     string
		pod      func(p *corev1.Pod)
		verified bool
		want     string // the start row's code, "" for not checked
		edit     string // what the fix says to change, when the check says it
	}{
		{"status port on 15006", func(p *corev1.Pod) { p.Annotations = map[string]string{annotationStatusPort: "15006"} }, true, CodeStatusOnProxyPort, ""},
		// Red team round 23's 02: an app on the tunnel's port (its
		// Services are in the manifest, not read).
		{"app on 15008", func(p *corev1.Pod) {
			p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http-api", ContainerPort: 15008}}
		}, true, CodeReservedPort, "move container app's port 15008 → 9008: "},
		// Red team round 26's 03: the probe's host localhost, kept by
		// the injector's rewrite.
		{"probe host localhost", probeHostLocal, true, CodeProbeHost, "remove httpGet.host from app's readiness probe"},
		{"healthy", func(*corev1.Pod) {}, true, "", ""},
		{"not verified", func(p *corev1.Pod) { p.Annotations = map[string]string{annotationStatusPort: "15006"} }, false, "", ""},
	} {
		admitted := pod(tc.pod)
		admitted.Status = corev1.PodStatus{}
		r := injected(nil)
		r.Kind, r.Name = "DaemonSet", "node-cache"
		if tc.verified {
			r.Verified = injection.AdmittedPod(admitted)
		}
		d := Diagnose(Facts{Injection: r, Files: []string{"ds.yaml"}, NoPod: "a manifest, not created yet"})
		var start Check
		for _, c := range d.Checks {
			if c.Name == CheckStart {
				start = c
			}
		}
		checks++
		if tc.want == "" {
			if start.Status != NotChecked {
				t.Errorf("%s: start row %s %s (%s), want not checked", tc.name, start.Status, start.Code, start.Evidence)
			}
			continue
		}
		checks += 3
		if start.Code != tc.want || start.Status != Fail {
			t.Errorf("%s: start row %s %s, want fail %s", tc.name, start.Status, start.Code, tc.want)
		}
		if !strings.HasPrefix(start.Evidence, "predicted on the pod --verify's dry run admitted for daemonset/node-cache as the manifest gives it: ") || strings.Contains(start.Evidence, "not checked") {
			t.Errorf("%s: evidence %q does not say (only) that it is predicted", tc.name, start.Evidence)
		}
		if !strings.Contains(start.Fix, "# edit ds.yaml first: ") || !strings.HasSuffix(start.Fix, "\nkubectl apply -f ds.yaml") {
			t.Errorf("%s: fix %q does not edit the manifest, then apply it", tc.name, start.Fix)
		}
		if tc.edit != "" {
			checks++
			if !strings.Contains(start.Fix, "# edit ds.yaml first: "+tc.edit) {
				t.Errorf("%s: fix %q does not say %q", tc.name, start.Fix, tc.edit)
			}
		}
	}
	t.Logf("%d checks", checks)
}

// A manifest whose pod template the injector's neverInjectSelector leaves
// out (red team round 20's 01, with -f): KM-INJ-019 warns, with a fix that
// edits the file, then applies it.
func TestManifestNeverInjected(t *testing.T) {
	r := injected(nil)
	r.Kind, r.Name = "StatefulSet", "ledger-db"
	no := false
	r.Expected = &no
	r.Factors = []injection.Factor{{Factor: "neverInjectSelector", Value: "kmesh.demo/never-inject", Effect: injection.EffectSkip, Source: "ConfigMap istio-system/istio-sidecar-injector"}}
	d := Diagnose(Facts{Injection: r, Files: []string{"db.yaml"}, NoPod: "a manifest, not created yet"})
	checks := 2
	if d.Code != CodeNeverInjected || d.Status != Warning {
		t.Fatalf("first %s %s: %s", d.Code, d.Status, d.Verdict)
	}
	if want := "# edit db.yaml first: label the pod template sidecar.istio.io/inject: \"true\""; !strings.HasPrefix(d.Fix, want) || !strings.HasSuffix(d.Fix, "\nkubectl apply -f db.yaml") {
		t.Errorf("fix %q", d.Fix)
	}
	t.Logf("%d checks", checks)
}

// A manifest of a bare run-once pod with a classic sidecar (red team round
// 23's 01, a Helm test pod, with -f --verify): the edit names the pod's own
// annotations, not a Job's template, and the pod, if it exists, is deleted
// before the apply (a pod cannot take the change in place).
func TestPredictedBarePodRecreated(t *testing.T) {
	admitted := pod(func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever })
	admitted.Status = corev1.PodStatus{}
	r := injected(nil)
	r.Kind, r.Name, r.Namespace = "Pod", "web-1", "shop"
	r.Verified = injection.AdmittedPod(admitted)
	d := Diagnose(Facts{Injection: r, Files: []string{"pod.yaml"}, NoPod: "a manifest, not created yet"})
	checks := 1
	if d.Code != CodeJobClassicSidecar || d.Status != Fail {
		t.Fatalf("first %s %s: %s", d.Code, d.Status, d.Verdict)
	}
	for _, want := range []string{
		`# edit pod.yaml first: sidecar.istio.io/nativeSidecar: "true" in the pod's metadata.annotations`,
		"\nkubectl delete pod web-1 -n shop --ignore-not-found   # if it exists",
		"\nkubectl apply -f pod.yaml",
	} {
		checks++
		if !strings.Contains(d.Fix, want) {
			t.Errorf("fix %q lacks %q", d.Fix, want)
		}
	}
	checks++
	if strings.Contains(d.Fix, "Job") {
		t.Errorf("fix %q names a Job for a bare pod", d.Fix)
	}
	t.Logf("%d checks", checks)
}
