package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An injected container whose image cannot be pulled is fixed at the
// annotation that chose the image (proxyImage, proxyImageType), removed from
// what makes the pod; with neither, the mesh's values are named.
func TestMeshImageFixRemovesTheAnnotationThatChoseIt(t *testing.T) {
	yes := true
	pod := func(ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f9-x", Namespace: "shop", Annotations: ann,
			Labels:          map[string]string{"pod-template-hash": "5d8f9"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f9", Controller: &yes}}}}
	}
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{"sidecar.istio.io/proxyImageType": "distroless"}, `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/sidecar.istio.io~1proxyImageType"}]'`},
		{map[string]string{"sidecar.istio.io/proxyImage": "x:1"}, `sidecar.istio.io~1proxyImage"}]'`},
		{nil, "global.hub, global.tag"},
	} {
		if got := meshImageFix(pod(tc.ann), "istio-proxy"); !strings.Contains(got, tc.want) {
			t.Errorf("%v: fix %q lacks %q", tc.ann, got, tc.want)
		}
	}
}
