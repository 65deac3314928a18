package inspect_test

// inspect's reads against the real apiserver of the local cluster (they skip
// without one, and fail under CI=true): paging, kinds the user may not read,
// the fallback to one GET per namespace, a deadline.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

func unscheduledPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{SchedulerName: "kmesh-unscheduled", Containers: []corev1.Container{{Name: "app", Image: "kmesh.local/mesh-test:v1"}}}}
}

// clientAs is an inspect client that acts as user (impersonated).
func clientAs(t *testing.T, c *testcluster.Cluster, user string) *inspect.Client {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := inspect.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// Paged LISTs (where the apiserver cannot stream, or PagesOnly): pages of
// two pods hand every pod over once, in the apiserver's order, 3 pages for
// 5 pods, each page one LIST request.
func TestEachPodPagePaging(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "inspect-pages", nil)
	for i := 0; i < 5; i++ {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, unscheduledPod(fmt.Sprintf("p%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client, err := inspect.New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	client.PageSize = 2
	client.PagesOnly = true
	before := client.Requests()
	var sizes []int
	seen := map[string]int{}
	if err := client.EachPodPage(ctx, ns, "", func(pods []corev1.Pod) error {
		sizes = append(sizes, len(pods))
		for _, p := range pods {
			seen[p.Name]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sizes) != "[2 2 1]" || len(seen) != 5 || client.Requests()-before != 3 {
		t.Errorf("pages %v, %d distinct pods, %d requests; want [2 2 1], 5, 3", sizes, len(seen), client.Requests()-before)
	}
	for name, n := range seen {
		if n != 1 {
			t.Errorf("pod %s handed over %d times", name, n)
		}
	}
	// A selector is the apiserver's: only the matching pod comes back.
	n := 0
	if err := client.EachPodPage(ctx, ns, "nothing=here", func(pods []corev1.Pod) error { n += len(pods); return nil }); err != nil || n != 0 {
		t.Errorf("selector matching nothing: %d pods, %v", n, err)
	}
}

// Streamed: on an apiserver that streams lists (1.34 and later) the same 5
// pods come in batches of two from one request; on one that refuses (1.33,
// its WatchList off) the refusal costs one request and the pods come in
// pages. A selector is applied by the apiserver either way, and a user who
// may list pods but not watch them still gets them, in pages.
func TestStreamPods(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "inspect-stream", nil)
	for i := 0; i < 5; i++ {
		p := unscheduledPod(fmt.Sprintf("p%d", i))
		p.Labels = map[string]string{"odd": fmt.Sprint(i%2 == 1)}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	v, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	minor, _ := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	streams := minor >= 34
	sweep := func(client *inspect.Client, selector string) (sizes []int, names []string, requests int64, streamed bool) {
		t.Helper()
		before := client.Requests()
		s := client.StreamPods(ctx, ns, selector)
		if err := s.Each(func(pods []corev1.Pod) error {
			sizes = append(sizes, len(pods))
			for _, p := range pods {
				names = append(names, p.Name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return sizes, names, client.Requests() - before, s.Streamed()
	}
	client, err := inspect.New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	client.PageSize = 2
	sizes, names, requests, streamed := sweep(client, "")
	wantRequests := int64(1)
	if !streams {
		wantRequests = 1 + 3
	}
	if fmt.Sprint(sizes) != "[2 2 1]" || fmt.Sprint(names) != "[p0 p1 p2 p3 p4]" || requests != wantRequests || streamed != streams {
		t.Errorf("Kubernetes 1.%d: batches %v of %v, %d requests, streamed %v; want [2 2 1] of p0…p4, %d requests, streamed %v",
			minor, sizes, names, requests, streamed, wantRequests, streams)
	}
	if _, names, _, _ := sweep(client, "odd=true"); fmt.Sprint(names) != "[p1 p3]" {
		t.Errorf("selector odd=true: %v", names)
	}
	// May list pods, not watch them: pages.
	c.GrantRole(t, ns, "pod-lister", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}}})
	lclient := clientAs(t, c, "pod-lister")
	lclient.PageSize = 2
	if sizes, names, requests, streamed := sweep(lclient, ""); fmt.Sprint(names) != "[p0 p1 p2 p3 p4]" || streamed || requests != 4 {
		t.Errorf("a user who may not watch: batches %v of %v, %d requests, streamed %v; want p0…p4 in pages, 4 requests", sizes, names, requests, streamed)
	}
}

// A user who may read pods and their own namespace only: every kind they may
// not list is an unknown fact naming the permission, not an error and not an
// empty list; their namespace is read with one GET; another namespace they
// may not get stays unknown, and says so; a namespace that does not exist is
// known absent.
func TestMeshFactsForbiddenKinds(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "inspect-rbac", map[string]string{"istio-injection": "enabled"})
	other := c.Namespace(t, "inspect-other", nil)
	user := ns + "-user"
	c.GrantRole(t, ns, user, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list"}},
	})
	client := clientAs(t, c, user)
	f, err := client.MeshFacts(ctx)
	if err != nil {
		t.Fatalf("MeshFacts as a namespace user: %v", err)
	}
	want := map[string]string{
		injection.FactWebhooks:      "list mutatingwebhookconfigurations.admissionregistration.k8s.io",
		injection.FactNamespaces:    "list namespaces",
		injection.FactConfigMaps:    "list configmaps (all namespaces)",
		injection.FactControlPlanes: "list deployments.apps (all namespaces)",
		injection.FactNodes:         "list nodes",
	}
	for kind, perm := range want {
		if why := f.Unknown[kind]; why != "forbidden: the user may not "+perm {
			t.Errorf("unknown[%s] = %q, want it to name %q", kind, why, perm)
		}
	}
	if len(f.Webhooks) != 0 || len(f.Namespaces) != 0 {
		t.Errorf("facts read despite the refusal: %d webhooks, %d namespaces", len(f.Webhooks), len(f.Namespaces))
	}
	if !inspect.NamespaceExists(f, ns) {
		t.Error("an unknown namespace reported missing")
	}

	// Its own namespace: one GET, its labels known, the namespaces no longer unknown.
	before := client.Requests()
	if err := client.ResolveNamespaces(ctx, f, ns, ns); err != nil {
		t.Fatal(err)
	}
	if got := f.Namespaces[ns]; got == nil || got.Labels["istio-injection"] != "enabled" || client.Requests()-before != 1 {
		t.Errorf("own namespace: %v after %d requests", got, client.Requests()-before)
	}
	if _, unknown := f.Unknown[injection.FactNamespaces]; unknown {
		t.Errorf("namespaces still unknown after every needed one was read: %q", f.Unknown[injection.FactNamespaces])
	}
	// Another namespace it may not get: unknown, naming that permission, and
	// it stays unknown once set (asked once).
	if err := client.ResolveNamespaces(ctx, f, other); err != nil {
		t.Fatal(err)
	}
	if why := f.Unknown[injection.FactNamespaces]; why != "forbidden: the user may not get namespaces/"+other+" (or list namespaces)" {
		t.Errorf("unknown namespaces: %q", why)
	}
	before = client.Requests()
	if err := client.ResolveNamespaces(ctx, f, other, ns); err != nil {
		t.Fatal(err)
	}
	if _, unknown := f.Unknown[injection.FactNamespaces]; !unknown || client.Requests() != before {
		t.Errorf("a refused namespace asked again (%d requests) or forgotten (%q)", client.Requests()-before, f.Unknown[injection.FactNamespaces])
	}

	// A namespace that does not exist: RBAC refuses before existence is
	// checked, so for this user it is unknown, not absent.
	if err := client.ResolveNamespaces(ctx, f, "no-such-namespace-"+ns); err != nil {
		t.Fatal(err)
	}
	if !inspect.NamespaceExists(f, "no-such-namespace-"+ns) || !strings.Contains(f.Unknown[injection.FactNamespaces], "no-such-namespace-") {
		t.Errorf("a namespace the user may not get is not unknown: %q", f.Unknown[injection.FactNamespaces])
	}
	// A user who may get any namespace but list none learns that one is absent.
	getter := ns + "-getter"
	c.GrantClusterRole(t, getter, "", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}}})
	gclient := clientAs(t, c, getter)
	gf, err := gclient.MeshFacts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := gclient.ResolveNamespaces(ctx, gf, "no-such-namespace-"+ns, other); err != nil {
		t.Fatal(err)
	}
	if inspect.NamespaceExists(gf, "no-such-namespace-"+ns) || !inspect.NamespaceExists(gf, other) || gf.Unknown[injection.FactNamespaces] != "" {
		t.Errorf("get without list: missing %v, present %v, unknown %q", !inspect.NamespaceExists(gf, "no-such-namespace-"+ns), inspect.NamespaceExists(gf, other), gf.Unknown[injection.FactNamespaces])
	}

	// Events: an unknown fact too.
	if _, err := client.FailedCreateEvents(ctx, f, ns); err != nil {
		t.Fatal(err)
	}
	if why := f.Unknown[injection.FactEvents]; !strings.Contains(why, "list events") {
		t.Errorf("events unknown: %q", why)
	}
	// Pods in another namespace: an error, not an empty answer.
	err = client.EachPodPage(ctx, other, "", func([]corev1.Pod) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("listing another namespace's pods: %v", err)
	}
}

// A read that runs out of time is an error that says so, never an empty answer.
func TestMeshFactsDeadline(t *testing.T) {
	c := testcluster.Get(t)
	client, err := inspect.New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	f, err := client.MeshFacts(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "deadline") {
		t.Errorf("MeshFacts past its deadline: facts %v, error %v", f != nil, err)
	}
	err = client.EachPodPage(ctx, "", "", func([]corev1.Pod) error { return nil })
	if err == nil {
		t.Error("EachPodPage past its deadline returned no error")
	}
}
