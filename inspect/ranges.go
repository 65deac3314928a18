package inspect

import (
	"context"
	"net/netip"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// ClusterRanges reads the cluster's pod and Service address ranges in a few
// requests: the nodes' spec.podCIDRs (one LIST of nodes), the ServiceCIDR
// objects (networking.k8s.io/v1, Kubernetes 1.33+; v1beta1 before), and,
// when no ServiceCIDR gives the Service range, the kubernetes Service's
// ClusterIP in default (one address of it). unknown says what could not be
// read, needs the permissions that would read it: a forbidden read is
// unknown, never taken for an empty one.
func (c *Client) ClusterRanges(ctx context.Context) (ranges []diagnose.ClusterRange, unknown string, needs []string) {
	var why []string
	forbidden := func(err error, verb string) bool {
		if err == nil {
			return false
		}
		if apierrors.IsForbidden(err) {
			why, needs = append(why, "forbidden: "+verb), append(needs, verb)
		} else {
			why = append(why, verb+": "+err.Error())
		}
		return true
	}
	nodes, err := c.Proto.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !forbidden(err, "list nodes") {
		for _, n := range nodes.Items {
			cidrs := n.Spec.PodCIDRs
			if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
				cidrs = []string{n.Spec.PodCIDR}
			}
			for _, s := range cidrs {
				if p, err := netip.ParsePrefix(s); err == nil {
					ranges = append(ranges, diagnose.ClusterRange{Prefix: p.Masked(), Pods: true, From: "node " + n.Name + "'s podCIDRs"})
				}
			}
		}
	}
	svcRanges := 0
	addCIDRs := func(name string, cidrs []string) {
		for _, s := range cidrs {
			if p, err := netip.ParsePrefix(s); err == nil {
				ranges = append(ranges, diagnose.ClusterRange{Prefix: p.Masked(), From: "ServiceCIDR " + name})
				svcRanges++
			}
		}
	}
	const verb = "list servicecidrs.networking.k8s.io"
	v1, err := c.Kube.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	switch {
	case err == nil:
		for _, s := range v1.Items {
			addCIDRs(s.Name, s.Spec.CIDRs)
		}
	case apierrors.IsNotFound(err):
		// Not served (before 1.33): the beta, if it is on.
		beta, err := c.Kube.NetworkingV1beta1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
		switch {
		case err == nil:
			for _, s := range beta.Items {
				addCIDRs(s.Name, s.Spec.CIDRs)
			}
		case apierrors.IsNotFound(err):
		default:
			forbidden(err, verb)
		}
	default:
		forbidden(err, verb)
	}
	if svcRanges == 0 {
		// No ServiceCIDR: the API server's Service has an address of the range.
		svc, err := c.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		switch {
		case err == nil:
			for _, ip := range append([]string{svc.Spec.ClusterIP}, svc.Spec.ClusterIPs...) {
				if a, err := netip.ParseAddr(ip); err == nil {
					ranges = append(ranges, diagnose.ClusterRange{Prefix: netip.PrefixFrom(a, a.BitLen()), From: "the kubernetes Service's ClusterIP"})
				}
			}
		case apierrors.IsNotFound(err):
		default:
			forbidden(err, "get services (namespace default)")
		}
	}
	sort.SliceStable(ranges, func(i, j int) bool { return ranges[i].Pods && !ranges[j].Pods })
	ranges = dedupeRanges(ranges)
	if len(ranges) == 0 && len(why) == 0 {
		why = append(why, "the cluster publishes none (no node has podCIDRs, no ServiceCIDR, no kubernetes Service in default)")
	}
	return ranges, strings.Join(why, "; "), needs
}

func dedupeRanges(rs []diagnose.ClusterRange) []diagnose.ClusterRange {
	seen := map[netip.Prefix]bool{}
	out := rs[:0]
	for _, r := range rs {
		if !seen[r.Prefix] {
			seen[r.Prefix] = true
			out = append(out, r)
		}
	}
	return out
}
