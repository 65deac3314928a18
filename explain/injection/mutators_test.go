package injection

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podCreate() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
}

func mutatingConfig(name string, hooks ...admissionregistrationv1.MutatingWebhook) admissionregistrationv1.MutatingWebhookConfiguration {
	return admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: hooks}
}

// The mutators other than Istio's injector whose rules and selectors match
// the pod are named, each with the patch that exempts its namespace; Istio's
// own webhooks, and those that do not select the pod, are not.
func TestOtherMutators(t *testing.T) {
	ifNeeded := admissionregistrationv1.IfNeededReinvocationPolicy
	shopSel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "shop"}}
	drop := admissionregistrationv1.MutatingWebhook{Name: "drop-caps.rt1-hardening.example.com", Rules: podCreate(), NamespaceSelector: shopSel, ReinvocationPolicy: &ifNeeded}
	istioHook := admissionregistrationv1.MutatingWebhook{Name: "rev.namespace.sidecar-injector.istio.io", Rules: podCreate()}
	otherNS := admissionregistrationv1.MutatingWebhook{Name: "x.example.com", Rules: podCreate(), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "billing"}}}
	deployments := admissionregistrationv1.MutatingWebhook{Name: "deploy.example.com", Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}
	mirror := admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "rt2-mirror"}, Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: "rt2-images"}}
	w := &Workload{Kind: "Pod", Namespace: "shop", Name: "web-1", Labels: map[string]string{"app": "web"}}
	ns := map[string]string{"team": "shop", "kubernetes.io/metadata.name": "shop"}
	for _, tc := range []struct {
		name    string
		f       ClusterFacts
		by      []string
		exempt  []string
		unknown string
	}{
		{name: "none but Istio's", f: ClusterFacts{Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("istio-revision-tag-default", istioHook)}}},
		{name: "a hardening webhook", f: ClusterFacts{Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("istio-revision-tag-default", istioHook), mutatingConfig("rt1-hardening", otherNS, deployments, drop)}},
			by:     []string{"MutatingWebhookConfiguration rt1-hardening (webhook drop-caps.rt1-hardening.example.com)"},
			exempt: []string{`kubectl patch mutatingwebhookconfiguration rt1-hardening --type=json -p '[{"op":"add","path":"/webhooks/2/namespaceSelector/matchExpressions","value":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}]'`}},
		{name: "a webhook and a policy binding", f: ClusterFacts{Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig("rt1-hardening", drop)}, MutatingPolicyBindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{mirror}},
			by: []string{"MutatingWebhookConfiguration rt1-hardening (webhook drop-caps.rt1-hardening.example.com)", "MutatingAdmissionPolicyBinding rt2-mirror (policy rt2-images)"},
			exempt: []string{"/webhooks/0/namespaceSelector/matchExpressions",
				`kubectl patch mutatingadmissionpolicybinding rt2-mirror --type=json -p '[{"op":"add","path":"/spec/matchResources","value":{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}}}]'`}},
		{name: "a binding that selects other pods", f: ClusterFacts{MutatingPolicyBindings: []admissionregistrationv1.MutatingAdmissionPolicyBinding{{ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Spec: admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{MatchResources: &admissionregistrationv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}}},
		{name: "bindings not read", f: ClusterFacts{MutatingPolicyBindingsUnknown: "list mutatingadmissionpolicybindings.admissionregistration.k8s.io: forbidden"}, unknown: "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, unknown := otherMutators(&tc.f, w, ns)
			if len(got) != len(tc.by) {
				t.Fatalf("got %+v, want %v", got, tc.by)
			}
			for i := range got {
				if got[i].By != tc.by[i] || !strings.Contains(got[i].Exempt, tc.exempt[i]) {
					t.Errorf("mutator %d: got %+v, want %q with %q", i, got[i], tc.by[i], tc.exempt[i])
				}
			}
			if !strings.Contains(unknown, tc.unknown) || (tc.unknown == "") != (unknown == "") {
				t.Errorf("unknown %q, want %q", unknown, tc.unknown)
			}
		})
	}
}

// The image the injector sets, from the revision's values and the pod's
// annotations, and whether a container's image is another one.
func TestInjectorImage(t *testing.T) {
	rev := &istioRevision{name: "default"}
	rev.values.Global.Hub, rev.values.Global.Tag = "docker.io/istio", "1.28.0"
	distroless := &istioRevision{name: "d"}
	distroless.values.Global.Hub, distroless.values.Global.Tag, distroless.values.Global.Variant = "docker.io/istio", "1.28.0", "distroless"
	for _, tc := range []struct {
		rev  *istioRevision
		ann  map[string]string
		want string
	}{
		{rev, nil, "docker.io/istio/proxyv2:1.28.0"},
		{distroless, nil, "docker.io/istio/proxyv2:1.28.0-distroless"},
		{rev, map[string]string{annotationProxyImageType: "distroless"}, "docker.io/istio/proxyv2:1.28.0-distroless"},
		{rev, map[string]string{annotationProxyImage: "registry.local/proxyv2:x"}, "registry.local/proxyv2:x"},
		{&istioRevision{name: "unread"}, nil, ""},
		{nil, nil, ""},
	} {
		if got := injectorImage(tc.rev, tc.ann); got != tc.want {
			t.Errorf("%v %v: %q, want %q", tc.rev, tc.ann, got, tc.want)
		}
	}
	for _, tc := range []struct {
		want, got string
		differs   bool
	}{
		{"docker.io/istio/proxyv2:1.28.0", "docker.io/istio/proxyv2:1.28.0", false},
		{"docker.io/istio/proxyv2:1.28.0", "docker.io/istio/proxyv2:1.28.0-distroless", false},
		{"docker.io/istio/proxyv2:1.28.0", "mirror.rt2.example/istio/proxyv2:1.28.0", true},
		{"docker.io/istio/proxyv2:1.28.0", "docker.io/istio/proxyv2:1.27.0", true},
		{"localhost:5000/istio/proxyv2:1.28.0", "localhost:5000/istio/proxyv2:1.28.0", false},
		{"", "anything", false},
	} {
		if d := ImageDiffers(tc.want, tc.got); d != tc.differs {
			t.Errorf("ImageDiffers(%q, %q) = %v", tc.want, tc.got, d)
		}
	}
}
