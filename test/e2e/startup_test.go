package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

type startupDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	startup.StartupReport
	// Diagnosis is diagnose's init and start checks on the pod.
	Diagnosis *struct {
		Status string `json:"status"`
		Code   string `json:"code"`
	} `json:"diagnosis"`
}

func hazardSet(r startup.StartupReport) map[string]string {
	out := map[string]string{}
	for _, h := range r.Hazards {
		out[h.ID] = h.Container
	}
	return out
}

// The command reports the kubelet's real timestamps and order, and the right
// hazards, for pods real istiod injects.
func TestStartupOnRealKubelet(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	native := c.Namespace(t, "st-native", map[string]string{"istio-injection": "enabled"})
	held := c.Namespace(t, "st-held", map[string]string{"istio.io/rev": "canary"})
	pods := []struct {
		ns  string
		pod *corev1.Pod
	}{
		{native, appPod("native", nil, nil)},
		{held, appPod("held", nil, nil)},
		// istiod passes proxyMetadata to the proxy's environment: the stand-in
		// proxy reads its readiness delay from there.
		{native, appPod("slow-proxy", nil, map[string]string{"sidecar.istio.io/nativeSidecar": "false",
			"proxy.istio.io/config": `{"proxyMetadata": {"STANDIN_READY_DELAY": "6s"}}`})},
		// istiod does not check includeOutboundPorts at admission; Istio's
		// istio-iptables passes the value on and iptables-restore refuses it.
		{native, appPod("bad-init", nil, map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "abc"})},
	}
	for _, p := range pods {
		if _, err := c.Client.CoreV1().Pods(p.ns).Create(ctx, p.pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitPod(t, native, "native", 90*time.Second, "ready", testcluster.Running)
	c.WaitPod(t, held, "held", 90*time.Second, "ready", testcluster.Running)
	c.WaitPod(t, native, "slow-proxy", 90*time.Second, "ready", testcluster.Running)
	// Failed and restarted: a crash loop, whichever phase of it istio-init
	// is in when it is asked about.
	c.WaitPod(t, native, "bad-init", 90*time.Second, "istio-init to crash-loop", func(p *corev1.Pod) bool {
		if len(p.Status.InitContainerStatuses) == 0 {
			return false
		}
		s := p.Status.InitContainerStatuses[0]
		return s.RestartCount >= 1 && s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0
	})

	get := func(t *testing.T, ns, name string) (startupDoc, *corev1.Pod) {
		t.Helper()
		r := mesh(t, c, "", "startup", name, "-n", ns, "-o", "json")
		d := decode[startupDoc](t, r)
		if d.Kind != "StartupReport" || d.Diagnosis == nil || r.code != 0 && r.code != 4 || (r.code == 4) != (d.Diagnosis.Status == "fail") {
			t.Fatalf("exit %d kind %q diagnosis %+v: %s", r.code, d.Kind, d.Diagnosis, r.stderr)
		}
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d, p
	}

	t.Run("native sidecar with a startup probe", func(t *testing.T) {
		d, p := get(t, native, "native")
		if !d.Native || d.Hold || d.InitResult != "completed" || len(d.Hazards) != 0 || strings.Join(d.StartOrder, ",") != "istio-init,istio-proxy,app" {
			t.Errorf("native %v hold %v init %q hazards %+v order %q", d.Native, d.Hold, d.InitResult, d.Hazards, d.StartOrder)
		}
		proxy := d.InitContainers[1]
		if proxy.Role != startup.RoleProxyNative || proxy.ReadyAt == nil || proxy.StartedAt == nil ||
			!proxy.StartedAt.Equal(p.Status.InitContainerStatuses[1].State.Running.StartedAt.Time) {
			t.Errorf("proxy %+v vs status %+v", proxy, p.Status.InitContainerStatuses[1].State)
		}
		if init := d.InitContainers[0]; init.ExitCode == nil || *init.ExitCode != 0 || !init.FinishedAt.Equal(p.Status.InitContainerStatuses[0].State.Terminated.FinishedAt.Time) {
			t.Errorf("istio-init %+v", init)
		}
	})
	t.Run("classic sidecar held by pilot-agent wait", func(t *testing.T) {
		d, _ := get(t, held, "held")
		if d.Native || !d.Hold || len(d.Hazards) != 0 || d.StartOrder[0] != "istio-init" || d.OrderVerdict != "ok" {
			t.Errorf("native %v hold %v hazards %+v order %q verdict %q", d.Native, d.Hold, d.Hazards, d.StartOrder, d.OrderVerdict)
		}
		if d.Containers[0].Name != "istio-proxy" || d.Containers[0].StartedAt.After(*d.Containers[1].StartedAt) {
			t.Errorf("the proxy did not start first: %+v", d.Containers)
		}
	})
	t.Run("app started before a slow proxy", func(t *testing.T) {
		d, _ := get(t, native, "slow-proxy")
		h := hazardSet(d.StartupReport)
		if h["app-before-proxy-ready"] != "app" {
			t.Errorf("hazards %+v", d.Hazards)
		}
		var proxy startup.ContainerStartup
		for _, cs := range d.Containers {
			if cs.Name == "istio-proxy" {
				proxy = cs
			}
		}
		if proxy.ReadyAt == nil || proxy.StartedAt == nil || proxy.ReadyAt.Sub(*proxy.StartedAt) < 3*time.Second {
			t.Errorf("proxy ready %v, started %v: the 6s delay is not seen", proxy.ReadyAt, proxy.StartedAt)
		}
		unhealthy := false
		for _, e := range d.Events {
			if e.Reason == "Unhealthy" && e.Container == "istio-proxy" {
				unhealthy = true
			}
		}
		if !unhealthy {
			t.Errorf("no Unhealthy event of istio-proxy merged in: %+v", d.Events)
		}
	})
	t.Run("istio-init failing and crash-looping", func(t *testing.T) {
		d, _ := get(t, native, "bad-init")
		h := hazardSet(d.StartupReport)
		init := d.InitContainers[0]
		if d.InitResult != "crash-looping" || h["istio-init-failed"] != "istio-init" || h["stuck-in-init"] == "" ||
			!strings.Contains(init.Failure, "includeOutboundPorts") || init.Restarts < 1 || init.Log == nil {
			t.Fatalf("init %q hazards %+v istio-init %+v", d.InitResult, d.Hazards, init)
		}
		if logs := strings.Join(append(init.Log.Current, init.Log.Previous...), "\n"); !strings.Contains(logs, "invalid port/service `abc'") {
			t.Errorf("log tail lacks the error: %q", logs)
		}
		// A bare pod: its fix is to re-create it without the bad value, named.
		if fix := hazardFix(d.StartupReport, "istio-init-failed"); !strings.Contains(fix, "kubectl get pod bad-init -n "+native+" -o yaml") ||
			!strings.Contains(fix, `traffic.sidecar.istio.io/includeOutboundPorts="abc"`) {
			t.Errorf("istio-init-failed's fix %q does not name the pod, the annotation and its value", fix)
		}
		r := mesh(t, c, "", "startup", "bad-init", "-n", native)
		if !strings.Contains(r.stdout, "Timeline") || !strings.Contains(r.stdout, "istio-init-failed") || strings.Contains(r.stdout, "\x1b") {
			t.Errorf("plain output:\n%s", r.stdout)
		}
	})
	t.Run("many pods, worst first", func(t *testing.T) {
		d := decode[struct {
			Kind  string
			Items []startup.StartupReport
		}](t, mesh(t, c, "", "startup", "-n", native, "-o", "json"))
		if d.Kind != "StartupReportList" || len(d.Items) != 3 || d.Items[0].Name != "bad-init" || d.Items[1].Name != "slow-proxy" {
			var names []string
			for _, it := range d.Items {
				names = append(names, it.Name)
			}
			t.Errorf("kind %q order %q", d.Kind, names)
		}
	})
}

func TestStartupBadInput(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "st-bad", nil)
	unscheduled := appPod("unscheduled", nil, nil)
	unscheduled.Spec.SchedulerName = "kmesh-unscheduled"
	plain := appPod("plain", nil, nil)
	for _, p := range []*corev1.Pod{unscheduled, plain} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitPod(t, ns, "plain", 60*time.Second, "ready", testcluster.Running)

	r := mesh(t, c, "", "startup", "nope", "-n", ns)
	if r.code != 1 || !strings.Contains(r.stderr, `nope not found in namespace "`+ns+`"`) {
		t.Errorf("not found: exit %d %q", r.code, r.stderr)
	}
	r = mesh(t, c, "", "startup", "unscheduled", "-n", ns)
	if r.code != 0 || !strings.Contains(r.stdout, "not scheduled yet") {
		t.Errorf("unscheduled: exit %d\n%s", r.code, r.stdout)
	}
	r = mesh(t, c, "", "startup", "plain", "-n", ns)
	if r.code != 0 || !strings.Contains(r.stdout, "no mesh container") || !strings.Contains(r.stdout, "Timeline") {
		t.Errorf("no mesh: exit %d\n%s", r.code, r.stdout)
	}

	// A user who may read pods and events, but not logs.
	crash := appPod("crash", nil, nil)
	crash.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: testImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/bin/sh", "-c", "echo 'iptables-restore: line 3 failed' >&2; exit 1"}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, crash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "crash", 60*time.Second, "istio-init to fail", func(p *corev1.Pod) bool {
		s := p.Status.InitContainerStatuses
		return len(s) > 0 && (s[0].State.Terminated != nil || s[0].LastTerminationState.Terminated != nil)
	})
	user := "no-logs-" + ns
	c.GrantRole(t, ns, user, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"get", "list"}}})
	// The log is a fact the answer lacks: said, with the permission; the
	// failure it has found decides the exit (4), as diagnose's does.
	r = mesh(t, c, "", "startup", "crash", "-n", ns, "--as", user)
	if r.code != 4 || !strings.Contains(r.stdout, "unavailable: forbidden: the user may not get pods/log") ||
		!strings.Contains(r.stdout, "unknown: log of istio-init: forbidden: the user may not get pods/log") {
		t.Errorf("logs forbidden: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = mesh(t, c, "", "startup", "crash", "-n", ns)
	if !strings.Contains(r.stdout, "iptables-restore rejected") || !strings.Contains(r.stdout, "line 3 failed") {
		t.Errorf("with logs:\n%s", r.stdout)
	}
}

// hazardFix is the fix of the report's first hazard of that id.
func hazardFix(r startup.StartupReport, id string) string {
	for _, h := range r.Hazards {
		if h.ID == id {
			return h.Fix
		}
	}
	return ""
}
