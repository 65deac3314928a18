package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// reportDoc and listDoc are why-injected's -o json documents.
type reportDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	injection.InjectionReport
}

type listDoc struct {
	APIVersion string                       `json:"apiVersion"`
	Kind       string                       `json:"kind"`
	Items      []injection.InjectionReport  `json:"items"`
	Summary    []injection.NamespaceSummary `json:"summary"`
	Incomplete []string                     `json:"incomplete"`
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("output is not the expected JSON (exit %d): %v\n%s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	return v
}

// workloads of every pod-bearing kind; schedulerName keeps their pods
// Pending, so they are created (and injected) but never run.
const workloadsYAML = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent, sidecar.istio.io/inject: "false"}}
    spec: {schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs1}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs1}}
  template:
    metadata: {labels: {app: rs1}}
    spec: {schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: v1
kind: ReplicationController
metadata: {name: rc1}
spec:
  replicas: 1
  selector: {app: rc1}
  template:
    metadata: {labels: {app: rc1}}
    spec: {schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: once}
spec:
  template:
    metadata: {labels: {app: once}}
    spec: {restartPolicy: Never, schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {app: nightly}, annotations: {sidecar.istio.io/inject: "false"}}
        spec: {restartPolicy: Never, schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bare}
spec: {schedulerName: kmesh-unscheduled, containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
`

func waitPods(t *testing.T, c *testcluster.Cluster, ns, selector string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		pods = l.Items
		return len(pods) >= n, nil
	})
	if err != nil {
		t.Fatalf("pods %q in %s: %d of %d after 60s", selector, ns, len(pods), n)
	}
	return pods
}

func TestWhyInjectedTargets(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ns := c.Namespace(t, "why", map[string]string{"istio-injection": "enabled"})
	c.Apply(t, ns, []byte(workloadsYAML))
	web := waitPods(t, c, ns, "app=web", 2)
	waitPods(t, c, ns, "app in (db,agent,rs1,rc1,once)", 5)

	t.Run("pod by name", func(t *testing.T) {
		r := mesh(t, c, "", "why-injected", web[0].Name, "-n", ns, "-o", "json")
		d := decode[reportDoc](t, r)
		if r.code != 0 || d.Kind != "InjectionReport" || d.APIVersion != "kubectl-mesh.io/v1alpha1" {
			t.Fatalf("exit %d kind %q apiVersion %q", r.code, d.Kind, d.APIVersion)
		}
		if d.Injected == nil || !*d.Injected || !d.IsExpected() || d.Revision != "default" || !isFalse(d.Mismatch) ||
			d.Webhook != "istio-sidecar-injector/namespace.sidecar-injector.istio.io" || d.Sidecar != "native" || len(d.Factors) < 10 {
			t.Errorf("report %+v", d.InjectionReport)
		}
	})
	t.Run("pod/NAME and yaml", func(t *testing.T) {
		r := mesh(t, c, "", "why-injected", "pod/"+web[0].Name, "-n", ns, "-o", "yaml")
		var d reportDoc
		if err := yaml.Unmarshal([]byte(r.stdout), &d); err != nil || r.code != 0 || d.Name != web[0].Name {
			t.Fatalf("exit %d err %v name %q\n%s", r.code, err, d.Name, r.stderr)
		}
	})
	for _, tc := range []struct {
		arg, kind string
		pods      int
		expected  bool
	}{
		{"deploy/web", "Deployment", 2, true},
		{"deployment/web", "Deployment", 2, true},
		{"sts/db", "StatefulSet", 1, true},
		{"ds/agent", "DaemonSet", 1, false},
		{"rs/rs1", "ReplicaSet", 1, true},
		{"rc/rc1", "ReplicationController", 1, true},
		{"job/once", "Job", 1, true},
		{"cj/nightly", "CronJob", 0, false},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			r := mesh(t, c, "", "why-injected", tc.arg, "-n", ns, "-o", "json")
			d := decode[listDoc](t, r)
			if r.code != 0 || len(d.Items) < 1+tc.pods {
				t.Fatalf("exit %d, %d items, want the template and %d pods\n%s", r.code, len(d.Items), tc.pods, r.stderr)
			}
			tmpl := d.Items[0]
			if tmpl.Kind != tc.kind || tmpl.Injected != nil || tmpl.Expected == nil || *tmpl.Expected != tc.expected {
				t.Errorf("template: kind %q injected %v expected %s: %s", tmpl.Kind, tmpl.Injected, fmtBool(tmpl.Expected), tmpl.Verdict)
			}
			for _, p := range d.Items[1:] {
				if p.Kind != "Pod" || p.Injected == nil || *p.Injected != tc.expected || !isFalse(p.Mismatch) {
					t.Errorf("pod %s: injected %v expected %s mismatch %s", p.Name, p.Injected, fmtBool(p.Expected), fmtBool(p.Mismatch))
				}
			}
		})
	}
	t.Run("svc/NAME: the pods it selects", func(t *testing.T) {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if _, err := c.Client.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := mesh(t, c, "", "why-injected", "svc/web", "-n", ns, "-o", "json")
		d := decode[listDoc](t, r)
		if r.code != 0 || len(d.Items) != 2 || d.Items[0].Kind != "Pod" || d.Items[1].Kind != "Pod" {
			t.Errorf("why-injected svc/web: exit %d, %d items, want its 2 pods\n%s", r.code, len(d.Items), r.stderr)
		}
		r = mesh(t, c, "", "diagnose", "service/web", "-n", ns, "-o", "json")
		var dd catDoc
		if err := json.Unmarshal([]byte(r.stdout), &dd); err != nil || r.code != 0 || len(dd.all()) != 2 {
			t.Errorf("diagnose service/web: exit %d, %d items (%v)\n%s", r.code, len(dd.all()), err, r.stderr)
		}
	})
	t.Run("namespace sweep", func(t *testing.T) {
		d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-n", ns, "-o", "json"))
		// 2 web, db, agent (opted out), rs1, rc1, once, bare
		if d.Kind != "InjectionReportList" || len(d.Items) != 8 || len(d.Summary) != 1 || d.Summary[0].Pods != 8 || d.Summary[0].Injected != 7 {
			t.Errorf("kind %q, %d items, summary %+v", d.Kind, len(d.Items), d.Summary)
		}
	})
	t.Run("selector", func(t *testing.T) {
		d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-n", ns, "-l", "app=web", "-o", "json"))
		if len(d.Items) != 2 {
			t.Errorf("%d items, want the 2 web pods", len(d.Items))
		}
	})
	t.Run("all namespaces", func(t *testing.T) {
		d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-A", "-o", "json"))
		seen := 0
		for _, it := range d.Items {
			if it.Namespace == ns {
				seen++
			}
		}
		if seen != 8 {
			t.Errorf("-A lists %d pods of %s, want 8", seen, ns)
		}
	})
	t.Run("completion from the cluster", func(t *testing.T) {
		r := mesh(t, c, "", "__complete", "why-injected", "-n", ns, "")
		if r.code != 0 || !strings.Contains(r.stdout, web[0].Name+"\n") || !strings.Contains(r.stdout, "deployment/\n") {
			t.Errorf("pod completion: exit %d\n%s", r.code, r.stdout)
		}
		r = mesh(t, c, "", "__complete", "why-injected", "-n", ns, "deploy/w")
		if !strings.Contains(r.stdout, "deploy/web\n") {
			t.Errorf("workload completion:\n%s", r.stdout)
		}
		r = mesh(t, c, "", "__complete", "why-injected", "-o", "")
		if !strings.Contains(r.stdout, "json\nyaml\n") {
			t.Errorf("-o completion:\n%s", r.stdout)
		}
	})
	t.Run("plain output when piped", func(t *testing.T) {
		r := mesh(t, c, "", "why-injected", "deploy/web", "-n", ns)
		if r.code != 0 || !strings.Contains(r.stdout, "Verdict: Pods created from this template will be injected") ||
			!strings.Contains(r.stdout, "FACTOR") || strings.Contains(r.stdout, "\x1b") {
			t.Errorf("exit %d:\n%s", r.code, r.stdout)
		}
	})
}

// A pod created before its namespace was labelled is reported as a mismatch,
// with the restart that fixes it.
func TestWhyInjectedCreatedBeforeLabel(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ns := c.Namespace(t, "why-late", nil)
	c.Apply(t, ns, []byte(strings.Split(workloadsYAML, "---")[0]))
	waitPods(t, c, ns, "app=web", 2)
	nsObj, err := c.Client.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["istio-injection"] = "enabled"
	if _, err := c.Client.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-n", ns, "-o", "json"))
	for _, it := range d.Items {
		if !it.IsMismatch() || !it.IsExpected() || *it.Injected || it.Fix != "kubectl rollout restart deployment/web -n "+ns {
			t.Errorf("%s: mismatch %s expected %s injected %v fix %q", it.Name, fmtBool(it.Mismatch), fmtBool(it.Expected), *it.Injected, it.Fix)
		}
	}
	r := mesh(t, c, "", "why-injected", "-n", ns)
	if !strings.Contains(r.stdout, "created before injection was enabled: restart") || !strings.Contains(r.stdout, "kubectl rollout restart deployment/web -n "+ns) {
		t.Errorf("table:\n%s", r.stdout)
	}
}

func TestWhyInjectedFromFile(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	existing := c.Namespace(t, "why-file", map[string]string{"istio.io/rev": "canary"})
	newNS := "why-file-new-" + fmt.Sprint(time.Now().UnixNano()%100000)
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %s, labels: {istio.io/rev: prod}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: %s}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec: {containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: %s}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Pod
metadata: {name: solo, namespace: %s}
spec: {containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: nowhere, namespace: not-there-at-all}
spec: {containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
`, newNS, newNS, existing, existing)
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, src := range []struct{ name, file, stdin string }{{"file", path, ""}, {"stdin", "-", manifest}} {
		t.Run(src.name, func(t *testing.T) {
			r := mesh(t, c, src.stdin, "why-injected", "-f", src.file, "-o", "json")
			d := decode[listDoc](t, r)
			if r.code != 0 || len(d.Items) != 3 {
				t.Fatalf("exit %d, %d items (Service skipped)\n%s", r.code, len(d.Items), r.stderr)
			}
			api, solo, nowhere := d.Items[0], d.Items[1], d.Items[2]
			if !api.IsExpected() || api.Revision != "canary" || api.Webhook != "istio-revision-tag-prod/rev.namespace.sidecar-injector.istio.io" ||
				!strings.Contains(factorSource(api, "namespace label istio.io/rev"), "from the manifest") {
				t.Errorf("api (namespace only in the file): %+v", api)
			}
			if !solo.IsExpected() || solo.Revision != "canary" || strings.Contains(factorSource(solo, "namespace label istio.io/rev"), "manifest") {
				t.Errorf("solo (namespace in the cluster): %+v", solo)
			}
			if !isFalse(nowhere.Expected) || !strings.Contains(factorSource(nowhere, "namespace label istio-injection"), "does not exist") {
				t.Errorf("nowhere (namespace nowhere): %+v", nowhere)
			}
		})
	}
	// The same Namespace and Deployment as `kubectl get ns,deploy -o yaml` prints them: one List.
	list := fmt.Sprintf(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: %s, labels: {istio.io/rev: prod}}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: api, namespace: %s}
  spec:
    selector: {matchLabels: {app: api}}
    template:
      metadata: {labels: {app: api}}
      spec: {containers: [{name: app, image: kmesh.local/mesh-test:v1}]}
`, newNS, newNS)
	r := mesh(t, c, list, "why-injected", "-f", "-", "-o", "json")
	api := decode[reportDoc](t, r)
	if r.code != 0 || !api.IsExpected() || api.Revision != "canary" || !strings.Contains(factorSource(api.InjectionReport, "namespace label istio.io/rev"), "from the manifest") {
		t.Errorf("a List's Namespace is not used: exit %d, %+v\n%s", r.code, api.InjectionReport, r.stderr)
	}
}

func factorSource(r injection.InjectionReport, name string) string {
	for _, f := range r.Factors {
		if f.Factor == name {
			return f.Source
		}
	}
	return ""
}

// A webhook whose service has no endpoints: the apiserver refuses every pod,
// the Deployment has none, and why-injected says so from the owner's events.
func TestWhyInjectedWebhookWithoutEndpoints(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "why-broken", map[string]string{"kmesh.test/broken-injector": "yes"})
	c.Apply(t, ns, []byte(brokenWebhook(ns)))
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "istio-sidecar-injector-broken-"+ns, metav1.DeleteOptions{})
	})
	c.Apply(t, ns, []byte(strings.Split(workloadsYAML, "---")[0]))
	// Wait for the ReplicaSet's FailedCreate event.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		return err == nil && len(evs.Items) > 0, nil
	}); err != nil {
		t.Fatal("no FailedCreate event after 60s")
	}
	d := decode[listDoc](t, mesh(t, c, "", "why-injected", "deploy/web", "-n", ns, "-o", "json"))
	if len(d.Items) != 1 {
		t.Fatalf("%d items, want only the template (no pod exists)", len(d.Items))
	}
	tmpl := d.Items[0]
	if !tmpl.CreationBlocked || !isFalse(tmpl.Expected) || !strings.Contains(tmpl.Verdict, "has no ready endpoints") ||
		!strings.Contains(tmpl.Fix, "kubectl delete mutatingwebhookconfiguration istio-sidecar-injector-broken-"+ns+"   # only if revision broken is gone for good") {
		t.Errorf("template: blocked %v expected %s verdict %q fix %q", tmpl.CreationBlocked, fmtBool(tmpl.Expected), tmpl.Verdict, tmpl.Fix)
	}
	if src := factorSource(tmpl, "event FailedCreate"); !strings.Contains(src, "ReplicaSet web-") {
		t.Errorf("no FailedCreate factor from the ReplicaSet: %+v", tmpl.Factors)
	}
	sweep := decode[listDoc](t, mesh(t, c, "", "why-injected", "-n", ns, "-o", "json"))
	if len(sweep.Items) != 1 || sweep.Items[0].Kind != "ReplicaSet" || !sweep.Items[0].CreationBlocked {
		t.Errorf("namespace sweep: %+v", sweep.Items)
	}
}

func TestWhyInjectedBadInput(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ns := c.Namespace(t, "why-bad", map[string]string{"istio-injection": "enabled"})
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown pod", []string{"why-injected", "no-such-pod", "-n", ns}, 1, `no-such-pod not found in namespace "` + ns + `"`},
		{"unknown kind", []string{"why-injected", "frobnicator/x", "-n", ns}, 1, `the server doesn't have a resource type "frobnicator"`},
		{"unknown namespace", []string{"why-injected", "-n", "no-such-namespace"}, 1, `namespace "no-such-namespace" not found`},
		{"invalid YAML", []string{"why-injected", "-f", write("bad.yaml", "kind: Pod\n  metadata: [oops")}, 2, "is not valid YAML or JSON"},
		{"no pod-bearing kind", []string{"why-injected", "-f", write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")}, 2, "no pod or workload with a pod template found"},
		{"not a workload", []string{"why-injected", "configmap/kube-root-ca.crt", "-n", "default"}, 2, "creates no pods"},
		{"a Service without a selector", []string{"why-injected", "svc/kubernetes", "-n", "default"}, 2, "service/kubernetes has no selector"},
		{"bad output", []string{"why-injected", "-A", "-o", "wide"}, 2, "unsupported output format"},
		{"target and -A", []string{"why-injected", "x", "-A"}, 2, "takes no POD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mesh(t, c, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", r.code, tc.code, r.stderr, tc.msg)
			}
		})
	}
}

// A user who may list pods and namespaces but not webhooks or ConfigMaps
// still gets a verdict, with the missing facts named and exit code 3.
func TestWhyInjectedForbiddenFacts(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "why-rbac", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{SchedulerName: "kmesh-unscheduled", Containers: []corev1.Container{{Name: "app", Image: testImage}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "viewer-" + ns
	c.GrantClusterRole(t, user, "", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "events", "nodes"}, Verbs: []string{"get", "list"}},
	})
	r := mesh(t, c, "", "why-injected", "p", "-n", ns, "--as", user, "-o", "json")
	d := decode[reportDoc](t, r)
	if r.code != 3 {
		t.Errorf("exit %d, want 3 (answer incomplete)", r.code)
	}
	joined := strings.Join(d.Incomplete, "\n")
	for _, want := range []string{"webhooks: forbidden: the user may not list mutatingwebhookconfigurations.admissionregistration.k8s.io", "configmaps: forbidden"} {
		if !strings.Contains(joined, want) {
			t.Errorf("incomplete %q lacks %q", d.Incomplete, want)
		}
	}
	if d.Verdict == "" || !strings.Contains(r.stderr, "incomplete") {
		t.Errorf("verdict %q, stderr %q", d.Verdict, r.stderr)
	}
	if f := factorSource(d.InjectionReport, "mutating webhooks"); !strings.Contains(f, "forbidden") {
		t.Errorf("no unknown webhook factor: %+v", d.Factors)
	}
}

// With no Istio injector installed, why-injected says so and fails.
func TestWhyInjectedWithoutIstio(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	mwcs, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.ApplyMesh(ctx); err != nil {
			t.Errorf("restore the mesh: %v", err)
		}
	})
	for _, m := range mwcs.Items {
		if strings.HasPrefix(m.Name, "istio-") {
			if err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := mesh(t, c, "", "why-injected", "-A")
	if r.code != 1 || !strings.Contains(r.stderr, "no Istio sidecar injector in this cluster") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// The page fetcher of a pod sweep ends when the consumer stops early: with
// a page of one pod and three pods, a consumer that fails on the first page
// gets its error back, and EachPodPage does not return before its fetcher
// has ended. (Before, the fetcher's failed LIST of the next page blocked
// forever on a page nobody took: a leaked goroutine; with the send left
// unguarded, this test times out.)
func TestEachPodPageStopsItsFetcher(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "pages", nil)
	for i := 0; i < 3; i++ {
		p := appPod(fmt.Sprintf("p%d", i), nil, nil)
		p.Spec.SchedulerName = "kmesh-unscheduled"
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	client, err := inspect.New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	client.PageSize = 1
	stop := errors.New("consumer stops")
	for i := 0; i < 20; i++ {
		done := make(chan error, 1)
		go func() {
			done <- client.EachPodPage(ctx, ns, "", func([]corev1.Pod) error { return stop })
		}()
		select {
		case err := <-done:
			if !errors.Is(err, stop) {
				t.Fatalf("round %d: %v, want the consumer's error", i, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: EachPodPage did not return after its consumer stopped", i)
		}
	}
	pages := 0
	if err := client.EachPodPage(ctx, ns, "", func(p []corev1.Pod) error { pages++; return nil }); err != nil || pages != 3 {
		t.Errorf("a full sweep: %d pages, %v", pages, err)
	}
}

// brokenWebhook is an Istio-shaped webhook (failurePolicy Fail) for
// namespace ns only, whose service has no endpoints: every pod created
// there (labelled kmesh.test/broken-injector=yes) is refused at admission.
// The caller deletes MutatingWebhookConfiguration
// istio-sidecar-injector-broken-NS.
func brokenWebhook(ns string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: istiod-broken, namespace: %[1]s}
spec: {ports: [{port: 443, targetPort: 15017}], selector: {app: no-such-istiod}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: istio-sidecar-injector-broken-%[1]s
  labels: {istio.io/rev: broken}
webhooks:
- name: namespace.sidecar-injector.istio.io
  clientConfig:
    service: {name: istiod-broken, namespace: %[1]s, path: /inject, port: 443}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  namespaceSelector: {matchLabels: {kmesh.test/broken-injector: "yes", kubernetes.io/metadata.name: %[1]s}}
  objectSelector: {matchExpressions: [{key: sidecar.istio.io/inject, operator: NotIn, values: ["false"]}]}
`, ns)
}
