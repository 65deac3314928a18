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
		if got := meshImageFix(pod(tc.ann), "istio-proxy", ""); !strings.Contains(got, tc.want) {
			t.Errorf("%v: fix %q lacks %q", tc.ann, got, tc.want)
		}
	}
}

// A variant of the injector's image that no annotation of the pod asks for
// (a ProxyConfig's image type) is fixed with the pod's own image type,
// which istiod puts first.
func TestImageVariantFromProxyConfig(t *testing.T) {
	p := pod(func(p *corev1.Pod) {
		deploymentPod(p)
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == "istio-proxy" {
				p.Spec.Containers[i].Image = "kmesh.local/istio/proxyv2:1.31-dev-debug"
			}
		}
	})
	got := meshImageFix(p, "istio-proxy", "kmesh.local/istio/proxyv2:1.31-dev")
	want := `kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyImageType":"default"}}}}}'`
	if !strings.HasPrefix(got, want) || !strings.Contains(got, `the variant "debug"`) {
		t.Errorf("%s", got)
	}
	if got := meshImageFix(p, "istio-proxy", "kmesh.local/istio/proxyv2:1.31-dev-debug"); strings.Contains(got, "proxyImageType") {
		t.Errorf("the injector's own image: %s", got)
	}
}
