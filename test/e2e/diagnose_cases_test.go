package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// casesHealthyAndPermissions: the healthy pod, and what a user without some permissions is told.
func (b *dgBed) casesHealthyAndPermissions(t *testing.T, k *diagTally) {
	c, ctx, ns := b.c, context.Background(), b.ns
	t.Run("healthy pod", func(t *testing.T) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "healthy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		connectN(t, p.Status.PodIP, 8080, 2) // live inbound flows, through the proxy
		nc := diagnose.NotChecked
		for _, tc := range []struct {
			args                 []string
			capture, connections string
		}{
			{[]string{"healthy", "-n", ns}, nc, nc},
			{[]string{"healthy", "-n", ns, "--rules", "--connections"}, diagnose.Pass, diagnose.Pass},
			{[]string{"healthy", "-n", ns, "--verify"}, nc, nc},
		} {
			r, d := diagOne(t, c, tc.args...)
			where := "diagnose " + strings.Join(tc.args, " ")
			k.check(t, r.code == 0 && d.First == "" && d.Fix == "" && d.Status == diagnose.Pass, "%s: exit %d first %q fix %q status %q: %s\n%s", where, r.code, d.First, d.Fix, d.Status, r.stderr, describeDiagnosis(d))
			want := map[string]string{diagnose.CheckInjection: diagnose.Pass, diagnose.CheckInit: diagnose.Pass, diagnose.CheckStart: diagnose.Pass,
				diagnose.CheckCapture: tc.capture, diagnose.CheckConnections: tc.connections}
			for _, ch := range d.Checks {
				k.check(t, ch.Status == want[ch.Name], "%s: %s is %q (%s), want %q", where, ch.Name, ch.Status, ch.Evidence, want[ch.Name])
			}
		}
		noNodePods(t, c)
		k.faults++
	})

	t.Run("permissions", func(t *testing.T) {
		read := []string{"get", "list"}
		rules := func(webhooks, debug bool) []rbacv1.PolicyRule {
			r := []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods", "pods/log", "namespaces", "configmaps", "services", "endpoints", "nodes", "events"}, Verbs: read},
				{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: read},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: read},
				{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
			}
			if webhooks {
				r = append(r, rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, Verbs: read})
			}
			if debug {
				r = append(r, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"get", "patch"}})
			}
			return r
		}
		noDebug, noWebhooks := ns+"-no-debug", ns+"-no-webhooks"
		c.GrantClusterRole(t, noDebug, "", rules(true, false))
		c.GrantClusterRole(t, noWebhooks, "", rules(false, true))

		// --rules without patch pods/ephemeralcontainers: capture unknown, the
		// permission named, exit 3, nothing added to the pod.
		before, err := c.Client.CoreV1().Pods(ns).Get(ctx, "healthy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, d := diagOne(t, c, "healthy", "-n", ns, "--rules", "--as", noDebug)
		capt := checkOf(d, diagnose.CheckCapture)
		k.check(t, r.code == 3 && d.Status == diagnose.Unknown && d.First == "", "no pods/ephemeralcontainers: exit %d status %q first %q, want 3 unknown \"\": %s\n%s", r.code, d.Status, d.First, r.stderr, describeDiagnosis(d))
		k.check(t, capt.Status == diagnose.Unknown && strings.Contains(strings.Join(capt.Needs, "; ")+" "+capt.Evidence, "patch pods/ephemeralcontainers"),
			"capture %q, needs %q, evidence %q: want unknown, naming patch pods/ephemeralcontainers", capt.Status, capt.Needs, capt.Evidence)
		k.check(t, checkOf(d, diagnose.CheckInjection).Status == diagnose.Pass, "injection %q for a user who may read the webhooks", checkOf(d, diagnose.CheckInjection).Status)
		after, err := c.Client.CoreV1().Pods(ns).Get(ctx, "healthy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		k.check(t, len(after.Spec.EphemeralContainers) == len(before.Spec.EphemeralContainers), "an ephemeral container was added despite the refusal")

		// Without list mutatingwebhookconfigurations: injection unknown, never pass.
		r, d = diagOne(t, c, "healthy", "-n", ns, "--as", noWebhooks)
		inj := checkOf(d, diagnose.CheckInjection)
		k.check(t, r.code == 3 && d.Status == diagnose.Unknown && d.First == "", "no webhooks: exit %d status %q first %q, want 3 unknown \"\": %s\n%s", r.code, d.Status, d.First, r.stderr, describeDiagnosis(d))
		k.check(t, inj.Status == diagnose.Unknown && strings.Contains(strings.Join(inj.Needs, "; ")+" "+inj.Evidence, "list mutatingwebhookconfigurations"),
			"injection %q, needs %q, evidence %q: want unknown, naming list mutatingwebhookconfigurations", inj.Status, inj.Needs, inj.Evidence)
		// ... unless another check fails: that is the answer, exit 4.
		r, d = diagOne(t, c, "no-netadmin", "-n", ns, "--as", noWebhooks)
		k.check(t, r.code == 4, "no webhooks, failing init: exit %d, want 4: %s", r.code, r.stderr)
		k.firstIs(t, "no-netadmin as "+noWebhooks, d, diagnose.CheckInit, diagnose.Fail, "kubectl get pod no-netadmin -n "+ns+" -o jsonpath=")
		k.check(t, checkOf(d, diagnose.CheckInjection).Status == diagnose.Unknown, "injection %q for a user who may not read the webhooks, want unknown", checkOf(d, diagnose.CheckInjection).Status)
		k.faults++
	})

}

// casesSweep: the namespace sweep, worst first.
func (b *dgBed) casesSweep(t *testing.T, k *diagTally) {
	c, ns, brokenNS, ambientNS, late := b.c, b.ns, b.brokenNS, b.ambientNS, b.late
	t.Run("namespace sweep, worst first", func(t *testing.T) {
		want := map[string]struct{ kind, first, status string }{
			late:          {"Pod", diagnose.CheckInjection, diagnose.Fail},
			"bad-cidr":    {"ReplicaSet", diagnose.CheckInjection, diagnose.Fail},
			"no-netadmin": {"Pod", diagnose.CheckInit, diagnose.Fail},
			"never-ready": {"Pod", diagnose.CheckStart, diagnose.Fail},
			"slow-proxy":  {"Pod", diagnose.CheckStart, diagnose.Warning},
			"drift":       {"Pod", "", diagnose.Pass}, // its rules are not read without --rules
			"bypass":      {"Pod", "", diagnose.Pass}, // nor its connections without --connections
			"healthy":     {"Pod", "", diagnose.Pass},
			"ports":       {"Pod", diagnose.CheckInit, diagnose.Fail},
		}
		// ports's pod is named after its Deployment; bad-cidr has only a ReplicaSet.
		short := func(it diagnose.Diagnosis) string {
			switch {
			case it.WorkloadKind == "ReplicaSet" && strings.HasPrefix(it.Name, "bad-cidr-"):
				return "bad-cidr"
			case it.WorkloadKind == "Pod" && strings.HasPrefix(it.Name, "ports-"):
				return "ports"
			}
			return it.Name
		}
		r, doc := diag(t, c, "-n", ns)
		k.check(t, r.code == 4 && doc.Kind == "DiagnosisList", "exit %d kind %q, want 4 DiagnosisList: %s", r.code, doc.Kind, r.stderr)
		k.check(t, len(doc.Items) == len(want), "%d items, want %d (the 8 pods and bad-cidr's ReplicaSet)", len(doc.Items), len(want))
		seen := map[string]bool{}
		var order []string
		for i, it := range doc.Items {
			name := short(it)
			order = append(order, it.WorkloadKind+"/"+it.Name+" "+it.Status)
			w, ok := want[name]
			k.check(t, ok && !seen[name], "unexpected or repeated item %s %s", it.WorkloadKind, it.Name)
			seen[name] = true
			k.check(t, it.WorkloadKind == w.kind && it.First == w.first && it.Status == w.status && (w.first == "" || checkOf(it, w.first).Status == w.status),
				"%s: kind %q first %q status %q, want %q %q %q\n%s", name, it.WorkloadKind, it.First, it.Status, w.kind, w.first, w.status, describeDiagnosis(it))
			if i > 0 {
				prev := doc.Items[i-1]
				k.check(t, diagRank[prev.Status] >= diagRank[it.Status], "not worst first: %s (%s) after %s (%s)", it.Name, it.Status, prev.Name, prev.Status)
			}
		}
		t.Logf("sweep order: %s", strings.Join(order, ", "))
		k.check(t, len(doc.Summary) > 0 && string(doc.Summary) != "null", "no summary: %s", doc.Summary)

		// Every namespace: the same answers among the cluster's other pods,
		// worst first over them all.
		r, doc = diag(t, c, "-A")
		mine := 0
		for i, it := range doc.Items {
			if i > 0 {
				k.check(t, diagRank[doc.Items[i-1].Status] >= diagRank[it.Status], "-A: not worst first: %s/%s (%s) after %s/%s (%s)",
					it.Namespace, it.Name, it.Status, doc.Items[i-1].Namespace, doc.Items[i-1].Name, doc.Items[i-1].Status)
			}
			name := short(it)
			if w, ok := want[name]; ok && it.Namespace == ns {
				mine++
				k.check(t, it.First == w.first && it.Status == w.status, "-A: %s first %q status %q, want %q %q", name, it.First, it.Status, w.first, w.status)
			}
		}
		_, broken := itemOf(doc.Items, brokenNS, "ReplicaSet", "web")
		k.check(t, r.code == 4 && mine == len(want) && broken, "-A: exit %d, %d of the %d items of %s, ReplicaSet of %s %v: %s", r.code, mine, len(want), ns, brokenNS, broken, r.stderr)

		// A selector: a warning alone exits 0, the warning first.
		r, doc = diag(t, c, "-n", ns, "-l", "kmesh.test/fault in (healthy,slow-proxy)")
		k.check(t, r.code == 0 && doc.Kind == "DiagnosisList" && len(doc.Items) == 2 && doc.Items[0].Name == "slow-proxy" && doc.Items[0].Status == diagnose.Warning &&
			doc.Items[1].Name == "healthy" && doc.Items[1].Status == diagnose.Pass,
			"-l: exit %d kind %q items %+v, want slow-proxy (warning) then healthy (pass), exit 0", r.code, doc.Kind, doc.Items)

		// With --rules, one node pod reads every pod of the node: the drift
		// is found, and nothing is left behind.
		r, doc = diag(t, c, "-n", ns, "--rules")
		d, ok := itemOf(doc.all(), ns, "Pod", "drift")
		k.check(t, r.code == 4 && ok, "--rules sweep: exit %d, drift item %v: %s", r.code, ok, r.stderr)
		k.firstIs(t, "sweep --rules: drift", d, diagnose.CheckCapture, diagnose.Fail, "kubectl delete pod drift -n "+ns)
		h, _ := itemOf(doc.all(), ns, "Pod", "healthy")
		k.check(t, checkOf(h, diagnose.CheckCapture).Status == diagnose.Pass, "--rules sweep: healthy's capture %q, want pass\n%s", checkOf(h, diagnose.CheckCapture).Status, describeDiagnosis(h))
		noNodePods(t, c)

		// The ambient namespace: its two uncaptured pods before the captured one.
		r, doc = diag(t, c, "-n", ambientNS)
		var names []string
		for _, it := range doc.Items {
			names = append(names, it.Name+":"+it.First)
		}
		k.check(t, r.code == 4 && len(names) == 3 && names[2] == "amb-captured:" &&
			strings.Contains(strings.Join(names[:2], ","), "amb-pending:start") && strings.Contains(strings.Join(names[:2], ","), "amb-unset:capture"),
			"ambient sweep: exit %d, items %q, want amb-pending:start and amb-unset:capture before amb-captured", r.code, names)
	})
}
