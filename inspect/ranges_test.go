package inspect_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	networkingv1beta1 "k8s.io/api/networking/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

func node(name string, cidrs ...string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: cidrs}}
}

func kubernetesService(ip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}}}
}

// refuse makes the fake refuse a verb on a resource: forbidden, or not
// found (an API the cluster does not serve).
func refuse(cs *fake.Clientset, verb, resource, version string, forbidden bool) {
	cs.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if version != "" && a.GetResource().Version != version {
			return false, nil, nil
		}
		gr := schema.GroupResource{Group: a.GetResource().Group, Resource: resource}
		if forbidden {
			return true, nil, apierrors.NewForbidden(gr, "", nil)
		}
		return true, nil, apierrors.NewNotFound(gr, "")
	})
}

func TestClusterRanges(t *testing.T) {
	cidr := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	cases := []struct {
		name    string
		objects []runtime.Object
		setup   func(cs *fake.Clientset)
		want    string // the ranges, "prefix(from)" joined by ", "
		unknown string
		needs   string
	}{
		{name: "nodes and ServiceCIDRs", objects: []runtime.Object{node("a", "10.244.0.0/24"), node("b", "10.244.1.0/24", "fd00:10:244:1::/64"),
			cidr("kubernetes", "10.96.0.0/16"), kubernetesService("10.96.0.1")},
			want: "10.244.0.0/24(node a's podCIDRs), 10.244.1.0/24(node b's podCIDRs), fd00:10:244:1::/64(node b's podCIDRs), 10.96.0.0/16(ServiceCIDR kubernetes)"},
		{name: "before 1.33: the beta", objects: []runtime.Object{node("a", "10.244.0.0/24"),
			&networkingv1beta1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1beta1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12"}}}},
			setup: func(cs *fake.Clientset) { refuse(cs, "list", "servicecidrs", "v1", false) },
			want:  "10.244.0.0/24(node a's podCIDRs), 10.96.0.0/12(ServiceCIDR kubernetes)"},
		{name: "no ServiceCIDR API: the kubernetes Service", objects: []runtime.Object{node("a", "10.244.0.0/24"), kubernetesService("10.96.0.1")},
			setup: func(cs *fake.Clientset) { refuse(cs, "list", "servicecidrs", "", false) },
			want:  "10.244.0.0/24(node a's podCIDRs), 10.96.0.1/32(the kubernetes Service's ClusterIP)"},
		{name: "forbidden: unknown, with the permissions", objects: []runtime.Object{kubernetesService("10.96.0.1")},
			setup: func(cs *fake.Clientset) {
				refuse(cs, "list", "nodes", "", true)
				refuse(cs, "list", "servicecidrs", "", true)
			},
			want:    "10.96.0.1/32(the kubernetes Service's ClusterIP)",
			unknown: "forbidden: list nodes; forbidden: list servicecidrs.networking.k8s.io", needs: "list nodes, list servicecidrs.networking.k8s.io"},
		{name: "nothing published", objects: []runtime.Object{node("a")}, setup: func(cs *fake.Clientset) { refuse(cs, "list", "servicecidrs", "", false) },
			unknown: "the cluster publishes none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objects...)
			if tc.setup != nil {
				tc.setup(cs)
			}
			c := &inspect.Client{Kube: cs, Proto: cs}
			ranges, unknown, needs := c.ClusterRanges(context.Background())
			var got []string
			for _, r := range ranges {
				got = append(got, r.Prefix.String()+"("+r.From+")")
			}
			if strings.Join(got, ", ") != tc.want {
				t.Errorf("ranges\n got %s\nwant %s", strings.Join(got, ", "), tc.want)
			}
			if !strings.Contains(unknown, tc.unknown) || tc.unknown == "" && unknown != "" {
				t.Errorf("unknown %q, want %q", unknown, tc.unknown)
			}
			if strings.Join(needs, ", ") != tc.needs {
				t.Errorf("needs %q, want %q", needs, tc.needs)
			}
			if n := len(cs.Actions()); n > 4 {
				t.Errorf("%d requests, want at most 4: %v", n, cs.Actions())
			}
		})
	}
}
