package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pendingMount is a Deployment's pod the kubelet cannot set up: the mount
// of volume fails for msg.
func pendingMount(annotations map[string]string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		yes := true
		p.Labels = map[string]string{"pod-template-hash": "5d8f9"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f9", Controller: &yes}}
		p.Annotations = annotations
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		p.Status.ContainerStatuses = nil
	}
}

func mountFailed(msg string) []corev1.Event {
	return []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "FailedMount", Count: 4, LastTimestamp: at(100), Message: msg}}
}

// A volume the injector added for one of the pod's annotations (a
// bootstrap override, a user volume) that cannot be mounted is the mesh's
// cause, named with the annotation, never "the platform's own reason"; a
// volume of the pod's own stays the platform's.
func TestMeshVolumeAttributed(t *testing.T) {
	cases := []struct {
		name            string
		annotations     map[string]string
		msg             string
		evidence, fix   string
		platformsReason bool
	}{
		{name: "bootstrap override naming a missing ConfigMap",
			annotations: map[string]string{"sidecar.istio.io/bootstrapOverride": "custom-bootstrap-config", "sidecar.istio.io/proxyCPU": "10m"},
			msg:         `MountVolume.SetUp failed for volume "custom-bootstrap-volume" : configmap "custom-bootstrap-config" not found`,
			evidence:    `volume custom-bootstrap-volume was added by Istio's injector for the pod's annotation sidecar.istio.io/bootstrapOverride="custom-bootstrap-config"`,
			fix:         `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/sidecar.istio.io~1bootstrapOverride"}]'   # a choice`},
		{name: "user volume naming a missing Secret",
			annotations: map[string]string{"sidecar.istio.io/userVolume": `{"extra-ca":{"secret":{"secretName":"corp-root-ca"}}}`, "sidecar.istio.io/userVolumeMount": `{"extra-ca":{"mountPath":"/etc/ca"}}`},
			msg:         `MountVolume.SetUp failed for volume "extra-ca" : secret "corp-root-ca" not found`,
			evidence:    `volume extra-ca was added by Istio's injector for the pod's annotation sidecar.istio.io/userVolume=`,
			fix:         "kubectl create secret generic corp-root-ca -n shop --from-literal=KEY=VALUE"},
		{name: "the pod's own volume", annotations: map[string]string{"sidecar.istio.io/bootstrapOverride": "x"},
			msg: `MountVolume.SetUp failed for volume "creds" : secret "db-credentials" not found`, fix: "kubectl create secret generic db-credentials -n shop", platformsReason: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := checkCase{pod: pendingMount(tc.annotations), events: mountFailed(tc.msg), now: 5 * time.Minute}.facts()
			d := Diagnose(f)
			fs := only(d.Findings, CodePodSetup)
			if len(fs) != 1 || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v\nwant evidence with %q, fix with %q", fs, tc.evidence, tc.fix)
			}
			if strings.Contains(fs[0].Evidence, noMeshCause) != tc.platformsReason {
				t.Errorf("platform's own reason %v, want %v: %s", !tc.platformsReason, tc.platformsReason, fs[0].Evidence)
			}
		})
	}
}
