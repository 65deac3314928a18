package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// A fault a red team planted without reading the checks (testdata/redteam,
// its sources in INDEX.md): the state it waits for, and what diagnose must
// say of it — the code of the finding that names the cause, and a word of
// the fix that is right for it.
type redFault struct {
	nn, object string // the item diagnose gives: a pod's app label, or kind/name of a workload
	code, fix  string
	rules      bool // diagnose with --rules (a live check)
	state      func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string)
}

// redPods are the pods of ns labelled app=app.
func redPods(ctx context.Context, c *testcluster.Cluster, ns, app string) []corev1.Pod {
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil
	}
	return l.Items
}

// anyPod holds when a pod of app satisfies cond.
func anyPod(app string, what string, cond func(p *corev1.Pod) bool) func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	return func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
		pods := redPods(ctx, c, ns, app)
		var seen []string
		for i := range pods {
			if cond(&pods[i]) {
				return true, ""
			}
			seen = append(seen, catPodState(&pods[i]))
		}
		return false, what + "; pods of " + app + ": " + strings.Join(seen, "; ")
	}
}

// waitingOn: a container waits for reason.
func waitingOn(container, reason string) func(p *corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		s := catStatus(p, container)
		return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == reason
	}
}

// restarted: a container failed and was restarted at least once.
func restarted(container string) func(p *corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		s := catStatus(p, container)
		return s != nil && s.RestartCount >= 1 && s.LastTerminationState.Terminated != nil
	}
}

// lastEnded: a container's last run ended for reason.
func lastEnded(container, reason string) func(p *corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		s := catStatus(p, container)
		return s != nil && s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.Reason == reason
	}
}

// runningFor: a container has been running for at least d.
func runningFor(container string, d time.Duration) func(p *corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		s := catStatus(p, container)
		return s != nil && s.State.Running != nil && time.Since(s.State.Running.StartedAt.Time) >= d
	}
}

func podReadyNow(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == "Unschedulable" {
			return true
		}
	}
	return false
}

// olderThan: the pod has existed for d.
func olderThan(d time.Duration, cond func(p *corev1.Pod) bool) func(p *corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return time.Since(p.CreationTimestamp.Time) > d && cond(p) }
}

// rsFailed: a ReplicaSet of ns reports that it cannot create pods.
func rsFailed(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	l, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, rs := range l.Items {
		for _, cond := range rs.Status.Conditions {
			if cond.Type == appsv1.ReplicaSetReplicaFailure && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
	}
	return false, "no ReplicaSet with ReplicaFailure yet"
}

// podEvent: a pod of ns has an event of reason.
func podEvent(reason string) func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	return func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
		l, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) > 0, "no " + reason + " event yet"
	}
}

func jobFailed(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	l, err := c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, j := range l.Items {
		for _, cond := range j.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
	}
	return false, "no Job failed yet"
}

// redFaults: the red team's first round, each a case.
var redFaults = []redFault{
	{nn: "01", object: "web", code: "KM-INJ-010", fix: "istio.io/rev=default", state: anyPod("web", "ready", podReadyNow)},
	{nn: "02", object: "web", code: "KM-INJ-003", fix: "istio-injection-", state: anyPod("web", "ready", podReadyNow)},
	{nn: "03", object: "web", code: "KM-INJ-010", fix: "istio-injection=enabled", state: anyPod("web", "ready", podReadyNow)},
	{nn: "04", object: "web", code: "KM-INJ-010", fix: "istio-injection=enabled", state: anyPod("web", "ready", podReadyNow)},
	{nn: "05", object: "replicaset/web", code: "KM-INJ-007", fix: "proxy.istio.io~1config", state: rsFailed},
	{nn: "06", object: "deployment/web", code: "KM-INJ-013", fix: "sidecar.istio.io~1proxyMemory", state: rsFailed},
	{nn: "07", object: "web", code: "KM-INIT-003", fix: "proxyMemoryLimit", state: anyPod("web", "istio-init OOMKilled", lastEnded("istio-init", "OOMKilled"))},
	{nn: "08", object: "web", code: "KM-INIT-009", fix: "sidecar.istio.io~1proxyImage", state: anyPod("web", "istio-init cannot pull its image", func(p *corev1.Pod) bool {
		return waitingOn("istio-init", "ErrImagePull")(p) || waitingOn("istio-init", "ImagePullBackOff")(p) || waitingOn("istio-init", "ErrImageNeverPull")(p)
	})},
	{nn: "09", object: "web", code: "KM-START-003", fix: "istio-proxy", state: anyPod("web", "initialising over 65s", olderThan(65*time.Second, func(p *corev1.Pod) bool {
		s := catStatus(p, "istio-proxy")
		return p.Status.Phase == corev1.PodPending && s != nil && s.State.Running != nil
	}))},
	{nn: "10", object: "report", code: "KM-START-007", fix: "nativeSidecar", state: anyPod("report", "the job's container completed", func(p *corev1.Pod) bool {
		s := catStatus(p, "app")
		return s != nil && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
	})},
	{nn: "11", object: "web", code: "KM-INIT-004", fix: "istio-cni-node", state: anyPod("web", "istio-validation restarted", restarted("istio-validation"))},
	{nn: "12", object: "client", code: "KM-START-001", fix: "holdApplicationUntilProxyStarts", state: anyPod("client", "proxy ready, app started", func(p *corev1.Pod) bool {
		proxy, app := catStatus(p, "istio-proxy"), catStatus(p, "app")
		return proxy != nil && proxy.Ready && app != nil && (app.State.Running != nil || app.LastTerminationState.Terminated != nil)
	})},
	{nn: "13", object: "ledger", code: "KM-CAP-002", fix: "runAsUser", state: anyPod("ledger", "ready", podReadyNow)},
	{nn: "14", object: "api", code: "KM-CONN-002", fix: "0.0.0.0", rules: true, state: anyPod("api", "ready", podReadyNow)},
	{nn: "15", object: "mysql", code: "KM-CONN-006", fix: "appProtocol", state: anyPod("mysql", "ready", podReadyNow)},
	{nn: "16", object: "payments", code: "KM-CAP-003", fix: "excludeInboundPorts", state: anyPod("payments", "ready", podReadyNow)},
	{nn: "17", object: "web", code: "KM-START-008", fix: "moves app's 15021 → 9021", state: anyPod("web", "app restarted", restarted("app"))},
	{nn: "18", object: "replicaset/web", code: "KM-INJ-012", fix: "privileged", state: rsFailed},
	{nn: "19", object: "replicaset/web", code: "KM-INJ-011", fix: "proxyCPU", state: rsFailed},
	{nn: "20", object: "deployment/web", code: "KM-INJ-013", fix: "proxyCPULimit", state: rsFailed},
	{nn: "21", object: "deployment/orders", code: "KM-INJ-013", fix: "kubectl create serviceaccount orders-sa", state: rsFailed},
	{nn: "22", object: "orders", code: "KM-START-005", fix: "kubectl set image", state: anyPod("orders", "app ErrImageNeverPull", waitingOn("app", "ErrImageNeverPull"))},
	{nn: "23", object: "orders", code: "KM-START-005", fix: "kubectl create configmap orders-config", state: anyPod("orders", "app CreateContainerConfigError", waitingOn("app", "CreateContainerConfigError"))},
	{nn: "24", object: "orders", code: "KM-INIT-010", fix: "kubectl create secret generic orders-db-credentials", state: podEvent("FailedMount")},
	{nn: "25", object: "cache", code: "KM-START-005", fix: "kubectl set resources", state: anyPod("cache", "app OOMKilled", lastEnded("app", "OOMKilled"))},
	{nn: "26", object: "orders", code: "KM-START-014", fix: "readinessProbe", state: anyPod("orders", "running, not ready, over 75s", olderThan(75*time.Second, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && !podReadyNow(p)
	}))},
	{nn: "27", object: "orders", code: "KM-START-012", fix: "nodeSelector", state: anyPod("orders", "unschedulable", unschedulable)},
	{nn: "28", object: "job/migrate", code: "KM-START-015", fix: "kubectl logs job/migrate", state: jobFailed},
	{nn: "29", object: "orders", code: "KM-INIT-008", fix: "db-migrate", state: anyPod("orders", "db-migrate restarted", restarted("db-migrate"))},
	{nn: "30", object: "orders", code: "KM-START-005", fix: "livenessProbe", state: anyPod("orders", "liveness kill and restart", restarted("app"))},
	{nn: "31", object: "orders", code: "KM-START-005", fix: "kubectl logs", state: anyPod("orders", "app restarted", restarted("app"))},
	{nn: "32", object: "orders", code: "KM-START-012", fix: "PersistentVolumeClaim", state: anyPod("orders", "unschedulable", unschedulable)},
	{nn: "33", object: "agent", code: "KM-INJ-009", fix: "", state: anyPod("agent", "ready", podReadyNow)},
	{nn: "34", object: "web", code: "KM-START-012", fix: "proxyCPU", state: anyPod("web", "unschedulable", unschedulable)},
}

var redNamespace = regexp.MustCompile(`\brt-(\d\d)\b`)

// TestRedTeamFaults plants, on the real cluster, the faults a red team
// chose from Istio's issues and docs without reading the checks (34, in
// testdata/redteam, one namespace each, renamed redteam-NN), waits for each
// to reach the state it is about, and checks that diagnose names its cause
// with the code and the fix that fit it, and never calls it a pass.
func TestRedTeamFaults(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx := context.Background()
	start := time.Now()
	named, checks := 0, 0
	defer func() {
		testreport.Count(t, "red team: %d of %d planted faults named with their cause and fix; %d checks (%s)", named, len(redFaults), checks, time.Since(start).Round(time.Second))
	}()

	files, err := filepath.Glob("testdata/redteam/[0-9][0-9]-*.yaml")
	if err != nil || len(files) != len(redFaults) {
		t.Fatalf("testdata/redteam: %d fault files (%v), %d cases", len(files), err, len(redFaults))
	}
	sort.Strings(files)
	for _, f := range files {
		nn := filepath.Base(f)[:2]
		ns := "redteam-" + nn
		t.Cleanup(func() {
			_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyManifest(ctx, ns, redNamespace.ReplaceAll(b, []byte("redteam-$1"))); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}

	// Every fault reaches its state, all at once.
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	errs := make([]error, len(redFaults))
	var wg sync.WaitGroup
	for i, f := range redFaults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = catPoll(waitCtx, "red team fault "+f.nn+"'s state", func(ctx context.Context) (bool, string) { return f.state(ctx, c, "redteam-"+f.nn) })
		}()
	}
	wg.Wait()

	for i, f := range redFaults {
		t.Run(f.nn, func(t *testing.T) {
			if errs[i] != nil {
				t.Fatalf("not in its state: %v", errs[i])
			}
			ns := "redteam-" + f.nn
			var more []string
			if f.rules {
				more = append(more, "--rules")
			}
			d, r, err := catDiagnose(bin, c.Kubeconfig, ns, more...)
			if err != nil {
				t.Fatal(err)
			}
			var it *catItem
			var items []string
			for _, x := range d.all() {
				x := x
				items = append(items, strings.ToLower(x.WorkloadKind)+"/"+x.Name)
				kindName := strings.ToLower(x.WorkloadKind) + "/" + x.Name
				if x.WorkloadKind == "Pod" && strings.HasPrefix(x.Name, f.object+"-") || kindName == f.object || strings.HasPrefix(kindName, f.object+"-") {
					it = &x
					break
				}
			}
			checks++
			if it == nil {
				t.Fatalf("no item %s in diagnose -n %s: %v\n%s", f.object, ns, items, r.stderr)
			}
			// why-injected and startup give each pod diagnose's answer.
			msg, n := commandsAgree(bin, c, ns)
			checks += n
			if msg != "" {
				t.Errorf("the commands disagree in %s: %s", ns, msg)
			}
			checks++
			if it.Status == "pass" {
				t.Errorf("%s is broken (%s), diagnose says pass: %s", f.object, filepath.Base(files[i]), it.says())
			}
			var found *catFinding
			for j := range it.Findings {
				if it.Findings[j].Code == f.code {
					found = &it.Findings[j]
				}
			}
			checks++
			if found == nil {
				t.Errorf("%s: no finding %s; diagnose says %s", f.object, f.code, it.says())
				return
			}
			checks++
			if !strings.Contains(found.Fix, f.fix) {
				t.Errorf("%s: finding %s's fix %q does not have %q", f.object, f.code, found.Fix, f.fix)
				return
			}
			named++
			t.Logf("%s %s: %s %s; fix: %s", f.nn, f.object, f.code, found.Status, catShort(found.Fix))
		})
	}
}
