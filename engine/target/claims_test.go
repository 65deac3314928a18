package target

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A StatefulSet's pod template, as its controller makes its pods: a volume
// for each claim template, one of the same name replaced (red team round
// 24's 07: a claim named istio-data, which --verify's dry run must carry
// to meet the injector's volume); the StatefulSet itself is unchanged.
func TestWithClaimVolumes(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "queue"}, Spec: appsv1.StatefulSetSpec{
		Template:             corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "istio-data"}}, {ObjectMeta: metav1.ObjectMeta{Name: "cache"}}},
	}}
	got := WithClaimVolumes(s).Spec.Volumes
	checks := 3
	if len(got) != 2 || got[0].Name != "cache" || got[0].PersistentVolumeClaim == nil || got[0].PersistentVolumeClaim.ClaimName != "cache-queue-0" {
		t.Errorf("volumes %+v", got)
	}
	if got[1].Name != "istio-data" || got[1].PersistentVolumeClaim == nil || got[1].PersistentVolumeClaim.ClaimName != "istio-data-queue-0" {
		t.Errorf("volumes %+v", got)
	}
	if len(s.Spec.Template.Spec.Volumes) != 1 || s.Spec.Template.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("the StatefulSet's own template changed: %+v", s.Spec.Template.Spec.Volumes)
	}
	t.Logf("%d checks", checks)
}
