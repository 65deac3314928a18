package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// clashTemplate is a Deployment's template with a volume and mounts, and
// annotations.
func clashTemplate(v corev1.Volume, annotations map[string]string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: annotations}, Spec: corev1.PodSpec{
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, v},
		Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: v.Name, MountPath: "/etc/app"}}}}}}
}

func configMapVolume(name string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInjectClash,
		workload: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Desired: 1, Since: t0,
			Events:   []string{`FailedCreate (3×): Error creating: Pod "web-x" is invalid: spec.volumes[3].configMap: Forbidden: may not specify more than 1 volume type`},
			Template: clashTemplate(configMapVolume("istio-envoy"), nil)},
		status: Fail, evidence: "has the name of a volume Istio's injector adds",
		fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"replace","path":"/spec/template/spec/volumes/1/name","value":"app-istio-envoy"},{"op":"replace","path":"/spec/template/spec/containers/0/volumeMounts/1/name","value":"app-istio-envoy"}]'`})
}

// A template volume or a userVolumeMount that collides with what the
// injector adds is found, and the workload's missing pods are put down to
// it (their fix is its fix); a volume of the injector's own kind, or a
// template that will not be injected, is nothing.
func TestInjectClash(t *testing.T) {
	cases := []struct {
		name     string
		tmpl     *corev1.PodTemplateSpec
		noInject bool
		want     []string
	}{
		{name: "configMap named istio-envoy", tmpl: clashTemplate(configMapVolume("istio-envoy"), nil),
			want: []string{"volume istio-envoy (configMap)", `"path":"/spec/template/spec/volumes/1/name","value":"app-istio-envoy"`}},
		{name: "emptyDir named istio-data: merged, fine", tmpl: clashTemplate(corev1.Volume{Name: "istio-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, nil)},
		{name: "configMap named istiod-ca-cert: the injector's kind", tmpl: clashTemplate(configMapVolume("istiod-ca-cert"), nil)},
		{name: "not injected: nothing", tmpl: clashTemplate(configMapVolume("istio-envoy"), nil), noInject: true},
		{name: "userVolumeMount onto /etc/istio/proxy", tmpl: clashTemplate(configMapVolume("bootstrap"), map[string]string{
			"sidecar.istio.io/userVolume":      `{"bootstrap":{"configMap":{"name":"cfg"}}}`,
			"sidecar.istio.io/userVolumeMount": `{"bootstrap":{"mountPath":"/etc/istio/proxy","readonly":true}}`}),
			want: []string{"mounts bootstrap at /etc/istio/proxy, where istio-proxy mounts the injector's volume istio-envoy",
				`kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/userVolumeMount":"{\"bootstrap\":{\"mountPath\":\"/etc/istio/user/bootstrap\",\"readonly\":true}}"}}}}}'`}},
		{name: "userVolumeMount elsewhere: nothing", tmpl: clashTemplate(configMapVolume("bootstrap"), map[string]string{
			"sidecar.istio.io/userVolumeMount": `{"bootstrap":{"mountPath":"/etc/istio/custom"}}`})},
		{name: "userVolumeMount of a volume nobody declares", tmpl: clashTemplate(configMapVolume("x"), map[string]string{
			"sidecar.istio.io/userVolumeMount": `{"envoy-filters":{"mountPath":"/etc/envoy-filters"}}`}),
			want: []string{"mounts the volume envoy-filters into istio-proxy, but neither the template nor sidecar.istio.io/userVolume declares",
				`kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/sidecar.istio.io~1userVolumeMount"}]'`}},
		{name: "userVolumeMount as a list, of a volume nobody declares", tmpl: clashTemplate(configMapVolume("x"), map[string]string{
			"sidecar.istio.io/userVolumeMount": `[{"name":"envoy-filters","mountPath":"/etc/istio/custom","readonly":true}]`}),
			want: []string{"mounts the volume envoy-filters into istio-proxy"}},
		{name: "userVolumeMount of a template volume: nothing", tmpl: clashTemplate(configMapVolume("x"), map[string]string{
			"sidecar.istio.io/userVolumeMount": `{"x":{"mountPath":"/etc/x"}}`})},
		{name: "userVolume named istio-token", tmpl: clashTemplate(configMapVolume("x"), map[string]string{
			"sidecar.istio.io/userVolume": `{"istio-token":{"secret":{"secretName":"t"}}}`}), want: []string{"adds a volume named istio-token"}},
	}
	checked := 0
	for _, tc := range cases {
		w := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Desired: 1, Since: t0,
			Events: []string{`FailedCreate (3×): Error creating: Pod "web-x" is invalid`}, Template: tc.tmpl}
		c := checkCase{workload: w}
		if tc.noInject {
			c.inj = notExpected
		}
		d := Diagnose(c.facts())
		fs := only(d.Findings, CodeInjectClash)
		checked++
		if len(tc.want) == 0 {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 {
			t.Errorf("%s: want one finding, got %+v", tc.name, fs)
			continue
		}
		for _, want := range tc.want {
			checked++
			if !strings.Contains(fs[0].Evidence+"\n"+fs[0].Fix, want) {
				t.Errorf("%s: lacks %q:\n%s\n%s", tc.name, want, fs[0].Evidence, fs[0].Fix)
			}
		}
		// The missing pods are put down to it.
		short := only(d.Findings, CodeWorkloadShort)
		checked++
		if len(short) != 1 || short[0].Fix != fs[0].Fix || !strings.Contains(short[0].Evidence, "the likely cause") {
			t.Errorf("%s: the workload's missing pods are not put down to the clash: %+v", tc.name, short)
		}
	}
	t.Logf("%d cases, %d things checked", len(cases), checked)
}

// A StatefulSet's volumeClaimTemplate named istio-data (red team round
// 24's 07): its pods are refused; the fix makes the StatefulSet again with
// the claim and its mount renamed (claim templates cannot change). A claim
// of another name is nothing.
func TestClaimTemplateClash(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		claim string
		want  string
	}{
		{"istio-data", `kubectl get statefulset/queue -n shop -o json | kubectl patch --local -f - --type=json -p '[{"op":"replace","path":"/spec/volumeClaimTemplates/0/metadata/name","value":"app-istio-data"},{"op":"replace","path":"/spec/template/spec/containers/0/volumeMounts/0/name","value":"app-istio-data"}]' -o json | kubectl replace --force --cascade=orphan -f -`},
		{"data", ""},
	} {
		tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", VolumeMounts: []corev1.VolumeMount{{Name: tc.claim, MountPath: "/var/lib/queue"}}}}}}
		w := &WorkloadState{Kind: "StatefulSet", Namespace: "shop", Name: "queue", Desired: 1, Since: t0, Template: tmpl, ClaimTemplates: []string{tc.claim}}
		r := injected(nil)
		r.Kind, r.Name = "StatefulSet", "queue"
		got := injectClash(&Input{Facts: Facts{Injection: r, Workload: w, NoPod: "it has no pods"}})
		checks++
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: %+v", tc.claim, got)
		case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0].Fix, tc.want) || !strings.Contains(got[0].Evidence, "volumeClaimTemplate istio-data has the name of a volume Istio's injector adds")):
			t.Errorf("%s: %+v", tc.claim, got)
		}
	}
	t.Logf("%d checks", checks)
}
