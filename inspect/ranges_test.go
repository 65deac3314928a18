package inspect_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// The cluster's pod and Service ranges, read from the real apiserver: every
// node's podCIDRs, and a Service range that holds the kubernetes
// Service's ClusterIP; a user who may read none of it gets an unknown that
// names the permissions, never an empty answer.
func TestClusterRanges(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	admin := clientAs(t, c, "kmesh-ranges-admin")
	c.GrantClusterRole(t, "kmesh-ranges-admin", "cluster-admin", nil)
	ranges, unknown, needs := admin.ClusterRanges(ctx)
	if unknown != "" || len(needs) > 0 {
		t.Fatalf("cluster-admin: unknown %q, needs %q", unknown, needs)
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	has := func(prefix string, pods bool) bool {
		for _, r := range ranges {
			if r.Prefix.String() == prefix && r.Pods == pods {
				return true
			}
		}
		return false
	}
	checked := 0
	for _, n := range nodes.Items {
		for _, cidr := range n.Spec.PodCIDRs {
			checked++
			if p, err := netip.ParsePrefix(cidr); err != nil || !has(p.Masked().String(), true) {
				t.Errorf("node %s's podCIDR %s is not among the ranges %+v", n.Name, cidr, ranges)
			}
		}
	}
	svc, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr(svc.Spec.ClusterIP)
	inService := false
	for _, r := range ranges {
		inService = inService || !r.Pods && r.Prefix.Contains(ip)
	}
	if !inService {
		t.Errorf("no Service range holds the kubernetes Service's ClusterIP %s: %+v", ip, ranges)
	}
	// A user with no permission at all: unknown, each permission named.
	nobody := clientAs(t, c, "kmesh-ranges-nobody")
	_, unknown, needs = nobody.ClusterRanges(ctx)
	if !strings.Contains(unknown, "forbidden: list nodes") || !strings.Contains(strings.Join(needs, ","), "list nodes") {
		t.Errorf("a user who may not list nodes: unknown %q, needs %q", unknown, needs)
	}
	t.Logf("ranges %+v; %d node podCIDRs checked", ranges, checked)
}
