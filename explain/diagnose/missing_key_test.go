package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A volume whose items name a key its ConfigMap or Secret lacks: the fix
// adds that key to the object the pod's volume reads, also when the volume
// is the injector's (a userVolume annotation), with its removal beside.
func TestMissingKeyFix(t *testing.T) {
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-h-x", Namespace: "shop", Labels: map[string]string{"pod-template-hash": "h"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-h", Controller: &yes}},
		Annotations:     map[string]string{annotationUserVolume: `{"extra":{"configMap":{"name":"proxy-extra","items":[{"key":"tls.conf","path":"tls.conf"}]}}}`}},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{
			{Name: "extra", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "proxy-extra"}}}},
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
			{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj-secret"}}}}}}},
		}}}
	cases := []struct{ msg, want string }{
		{`MountVolume.SetUp failed for volume "extra" : configmap references non-existent config key: tls.conf`,
			`kubectl patch configmap proxy-extra -n shop --type=merge -p '{"data":{"tls.conf":"VALUE"}}'   # a choice: `},
		{`MountVolume.SetUp failed for volume "creds" : references non-existent secret key: password`,
			`kubectl patch secret db -n shop --type=merge -p '{"stringData":{"password":"VALUE"}}'   # a choice: `},
		{`MountVolume.SetUp failed for volume "both" : secret references non-existent secret key: k`,
			`kubectl patch secret proj-secret -n shop`},
		{`MountVolume.SetUp failed for volume "other" : configmap references non-existent config key: x`, ""},
		{`MountVolume.SetUp failed for volume "extra" : configmap references non-existent config key: it's`, ""},
	}
	checks := 0
	for _, tc := range cases {
		got := missingKeyFix(pod, tc.msg)
		checks++
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q…", tc.msg, got, tc.want)
		}
	}
	// Through the setup finding: the key first, the annotation's removal
	// the other choice.
	in := &Input{Facts: Facts{Pod: pod}, Target: "pod/web-h-x"}
	f := Finding{Code: CodePodSetup}
	meshVolumeFinding(in, &f, cases[0].msg)
	checks++
	lines := strings.Split(f.Fix, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], cases[0].want) || !strings.HasPrefix(lines[1], "# or, if the volume is not wanted: kubectl patch deployment/web") || !strings.Contains(f.Mesh, annotationUserVolume) {
		t.Errorf("mesh volume finding: %+v", f)
	}
	t.Logf("%d checks", checks)
}
