package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// why-injected --verify on the real apiserver and istiod: a workload's
// template and its pod proven by a dry-run create, a manifest istiod refuses,
// a user who may not create pods (the prediction alone, said), a user who may
// not read the webhooks but may create pods (the proof answers what the
// prediction could not), and a planted disagreement — a webhook the model
// does not know (not named like Istio's) that calls the real istiod — reported
// loudly with how to file it.
func TestWhyInjectedVerify(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "vfy", map[string]string{"istio-injection": "enabled"})
	planted := c.Namespace(t, "vfy-planted", map[string]string{"kmesh-planted": "yes"})

	web := appDeployment(ns, "web", 1, nil)
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.RunningPod(t, ns, "app=web", 120*time.Second)

	checks := verifyWorkloadAndSweep(t, c, ns)
	checks += verifyManifests(t, c, ns)
	twins := verifyTwins(t, c)
	checks += twins(1, "the twins' namespaces alike, the third with a quota")
	checks += verifyPlantedDisagreement(t, c, planted)
	checks += verifyWithoutPermissions(t, c, ns)
	// A webhook that selects namespaces by name can tell the twins apart:
	// nothing is shared while it is there.
	checks += twins(0, "a webhook selects a namespace by name")
	testreport.Count(t, "--verify: %d proofs checked on the real apiserver and istiod, one planted disagreement reported; two namespaces alike shared one dry run", checks)
}

// verifyWorkloadAndSweep: a workload's template and its pod (through its
// ReplicaSet's template), both proven; a namespace's sweep, its pod
// proven, as a JSON list with the summary and as the table.
func verifyWorkloadAndSweep(t *testing.T, c *testcluster.Cluster, ns string) int {
	checks := 0
	d := decode[listDoc](t, mesh(t, c, "", "why-injected", "deploy/web", "-n", ns, "--verify", "-o", "json"))
	if len(d.Items) != 2 {
		t.Fatalf("%d items, want the template and its pod", len(d.Items))
	}
	for _, it := range d.Items {
		v := it.Verified
		if v == nil || !v.Injected || v.Revision != "default" || v.Sidecar != "native" || v.Agrees == nil || !*v.Agrees {
			t.Errorf("%s %s: verified %+v (not verified: %q)", it.Kind, it.Name, v, it.NotVerified)
		}
		checks++
	}
	d = decode[listDoc](t, mesh(t, c, "", "why-injected", "-n", ns, "--verify", "-o", "json"))
	if len(d.Items) != 1 || len(d.Summary) != 1 || d.Summary[0].Pods != 1 {
		t.Fatalf("sweep --verify: %d items, summary %+v; want the pod and its namespace", len(d.Items), d.Summary)
	}
	if v := d.Items[0].Verified; v == nil || !v.Injected || v.Agrees == nil || !*v.Agrees {
		t.Errorf("sweep --verify: %s verified %+v (not verified: %q)", d.Items[0].Name, v, d.Items[0].NotVerified)
	}
	table := mesh(t, c, "", "why-injected", "-n", ns, "--verify")
	if lines := strings.Split(table.stdout, "\n"); !strings.Contains(lines[0], "VERIFIED") || len(lines) < 2 || !strings.Contains(lines[1], "agrees") {
		t.Errorf("sweep --verify table: no proof in the VERIFIED column:\n%s", table.stdout)
	}
	return checks + 2
}

// verifyManifests: one manifest istiod refuses at admission (predicted:
// blocked), one in a namespace that does not exist yet (no proof
// possible, said).
func verifyManifests(t *testing.T, c *testcluster.Cluster, ns string) int {
	refused := appDeployment(ns, "refused", 1, map[string]string{"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/33"})
	later := appDeployment("vfy-not-yet", "later", 1, nil)
	file := writeManifest(t, refused, later)
	d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-f", file, "--verify", "-o", "json"))
	if len(d.Items) != 2 {
		t.Fatalf("-f: %d items", len(d.Items))
	}
	if v := d.Items[0].Verified; !d.Items[0].CreationBlocked || v == nil || !v.Refused || v.Agrees == nil || !*v.Agrees || !strings.Contains(v.Message, "10.0.0.0/33") {
		t.Errorf("refused manifest: blocked %v, verified %+v", d.Items[0].CreationBlocked, v)
	}
	if d.Items[1].Verified != nil || !strings.Contains(d.Items[1].NotVerified, "does not exist") {
		t.Errorf("manifest for a namespace not there yet: verified %+v, not verified %q", d.Items[1].Verified, d.Items[1].NotVerified)
	}
	return 2
}

// verifyTwins plants two namespaces admission cannot tell apart (the same
// labels, no quota), the same Deployment in each, and a third with a
// quota; the check it returns says how many proofs a sweep shares (one dry
// run proves both twins, and the pod of the other twin says where it was
// made; the third gets its own) and counts what it checked.
func verifyTwins(t *testing.T, c *testcluster.Cluster) func(wantShared int, why string) int {
	ctx := context.Background()
	twinLabels := map[string]string{"istio-injection": "enabled", "kmesh.test/twins": "yes"}
	twinA, twinB := c.Namespace(t, "vfy-twin", twinLabels), c.Namespace(t, "vfy-twin", twinLabels)
	quoted := c.Namespace(t, "vfy-twin", twinLabels)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}}
	if _, err := c.Client.CoreV1().ResourceQuotas(quoted).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tn := range []string{twinA, twinB, quoted} {
		if _, err := c.Client.AppsV1().Deployments(tn).Create(ctx, appDeployment(tn, "twin", 1, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range []string{twinA, twinB, quoted} {
		c.RunningPod(t, tn, "app=twin", 120*time.Second)
	}
	return func(wantShared int, why string) int {
		checks := 0
		d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-A", "-l", "app=twin", "--verify", "-o", "json"))
		shared, own := 0, 0
		for _, it := range d.Items {
			v := it.Verified
			if v == nil || !v.Injected || v.Agrees == nil || !*v.Agrees {
				t.Errorf("twin %s/%s: verified %+v (not verified: %q)", it.Namespace, it.Name, v, it.NotVerified)
				continue
			}
			switch {
			case v.SharedFrom == "":
				own++
			case it.Namespace != quoted && (v.SharedFrom == twinA || v.SharedFrom == twinB) && v.SharedFrom != it.Namespace:
				shared++
			default:
				t.Errorf("twin %s/%s: proof shared from %s", it.Namespace, it.Name, v.SharedFrom)
			}
			checks++
		}
		if len(d.Items) != 3 || shared != wantShared || own != 3-wantShared {
			t.Errorf("twins, %s: %d items, %d proofs shared, %d made for their own pod; want 3, %d shared", why, len(d.Items), shared, own, wantShared)
		}
		return checks
	}
}

// verifyPlantedDisagreement: the real istiod behind a webhook the model
// does not know (not named like Istio's), selecting namespace planted:
// the disagreement is reported loudly, with how to file it.
func verifyPlantedDisagreement(t *testing.T, c *testcluster.Cluster, planted string) int {
	ctx := context.Background()
	mwc, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url, caBundle := *mwc.Webhooks[0].ClientConfig.URL, mwc.Webhooks[0].ClientConfig.CABundle
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	plant := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kmesh-planted-" + planted},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "inject.planted.kubectl-mesh.test", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, FailurePolicy: &fail,
			ClientConfig:      admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kmesh-planted": "yes", "kubernetes.io/metadata.name": planted}},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
		}}}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, plant, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), plant.Name, metav1.DeleteOptions{})
	})
	pl := appDeployment(planted, "planted", 1, nil)
	pfile := writeManifest(t, pl)
	r := decode[reportDoc](t, mesh(t, c, "", "why-injected", "-f", pfile, "--verify", "-o", "json"))
	if v := r.Verified; r.IsExpected() || v == nil || !v.Injected || v.Agrees == nil || *v.Agrees || !strings.Contains(v.Disagreement, "injected false; admission: injected true") {
		t.Errorf("planted disagreement: expected %s, verified %+v", fmtBool(r.Expected), v)
	}
	human := mesh(t, c, "", "why-injected", "-f", pfile, "--verify")
	if !strings.Contains(human.stdout, "DISAGREES") || !strings.Contains(human.stdout, "Please report it") {
		t.Errorf("the disagreement is not said loudly:\n%s", human.stdout)
	}
	return 2
}

// verifyWithoutPermissions: a user who may not create pods gets the
// prediction alone, and why; a namespace editor who cannot read the
// webhooks (the prediction is unknown) but may create pods gets the dry
// run's answer.
func verifyWithoutPermissions(t *testing.T, c *testcluster.Cluster, ns string) int {
	checks := 0
	viewer := ns + "-viewer"
	c.GrantClusterRole(t, viewer, "view", nil)
	d := decode[listDoc](t, mesh(t, c, "", "why-injected", "deploy/web", "-n", ns, "--verify", "--as", viewer, "-o", "json"))
	for _, it := range d.Items {
		if it.Verified != nil || !strings.Contains(it.NotVerified, "may not create pods in namespace "+ns) {
			t.Errorf("viewer: %s verified %+v, not verified %q", it.Name, it.Verified, it.NotVerified)
		}
		checks++
	}
	editor := ns + "-editor"
	c.GrantRole(t, ns, editor, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"get", "list", "create"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews"}, Verbs: []string{"create"}},
	})
	d = decode[listDoc](t, mesh(t, c, "", "why-injected", "deploy/web", "-n", ns, "--verify", "--as", editor, "-o", "json"))
	for _, it := range d.Items {
		if v := it.Verified; it.Expected != nil || v == nil || !v.Injected || v.Agrees != nil {
			t.Errorf("editor: %s expected %s, verified %+v (not verified %q)", it.Name, fmtBool(it.Expected), v, it.NotVerified)
		}
		checks++
	}
	return checks
}
