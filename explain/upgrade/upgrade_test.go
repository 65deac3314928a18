package upgrade

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

func injectedPod(rev, kind string, hold bool, args []string) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	proxy := corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.31.2",
		Env:       []corev1.EnvVar{{Name: "ISTIO_KUBE_APP_PROBERS", Value: `{"/app-health/app/readyz":{}}`}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/status": `{"revision":"` + rev + `"}`}}}
	p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Args: args}}
	app := corev1.Container{Name: "app"}
	if kind == "native" {
		proxy.RestartPolicy = &always
		p.Spec.InitContainers = append(p.Spec.InitContainers, proxy)
		p.Spec.Containers = []corev1.Container{app}
	} else {
		if hold {
			proxy.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"pilot-agent", "wait"}}}}
		}
		p.Spec.Containers = []corev1.Container{proxy, app}
	}
	return p
}

// The fields an upgrade changes are read off both pods and compared one by
// one: the sidecar kind, hold, revision and istio-init's arguments (each
// flag with its value); the same pod twice changes nothing.
func TestCompareReadsWhatChanges(t *testing.T) {
	now := SideOf(injectedPod("default", "native", false, []string{"-p", "15001", "-i", "*", "-x", ""}))
	after := SideOf(injectedPod("canary", "classic", true, []string{"-p", "15001", "-i", "*", "-x", "", "--log_output_level=default:info"}))
	if now.Sidecar != "native" || after.Sidecar != "classic" || !after.Hold || now.Hold || now.Release != "1.31" || !now.ProbeRewrite || now.Resources != "requests cpu=10m" {
		t.Fatalf("sides: now %+v after %+v", now, after)
	}
	changes, n := Compare(now, after)
	if n != 11 {
		t.Errorf("compared %d fields, want 11", n)
	}
	got := map[string]Change{}
	for _, c := range changes {
		got[c.Field] = c
	}
	for _, f := range []string{"revision", "sidecar kind", "hold", "init containers", "istio-init arguments"} {
		if _, ok := got[f]; !ok {
			t.Errorf("no change of %s: %+v", f, changes)
		}
	}
	if c := got["istio-init arguments"]; c.After != "--log_output_level=default:info" || c.Now != "-" {
		t.Errorf("istio-init arguments: %+v", c)
	}
	if !strings.Contains(got["sidecar kind"].Means, "ordinary container") || !strings.Contains(got["hold"].Means, "waits for the proxy") {
		t.Errorf("means: %+v", changes)
	}
	if s := Summary(changes); s != "revision default→canary, sidecar kind native→classic, hold no→yes, istio-init arguments" {
		t.Errorf("summary %q", s)
	}
	if same, n := Compare(now, now); len(same) != 0 || n != 11 {
		t.Errorf("a pod against itself: %+v (%d)", same, n)
	}
}

// The plan puts the workloads that will not start first, each one's fix
// before its restart, the relabels before everything; the exit status
// follows the worst.
func TestPlanOrdersWhatWillNotStartFirst(t *testing.T) {
	p := &Plan{Relabels: []string{"kubectl label namespace shop istio.io/rev=canary --overwrite istio-injection-"},
		Workloads: []Workload{
			{Kind: "Deployment", Namespace: "shop", Name: "a", Starts: StartsYes, Restart: "kubectl rollout restart deployment/a -n shop", Compared: 11},
			{Kind: "Deployment", Namespace: "shop", Name: "b", Starts: StartsNo, Restart: "kubectl rollout restart deployment/b -n shop", Compared: 11,
				Findings: []diagnose.Finding{{Code: "KM-INJ-012", Status: diagnose.Fail, Fix: "kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite"}}},
		}}
	p.Finish()
	want := []string{p.Relabels[0], "# deployment/b -n shop will not start (KM-INJ-012): fix it first",
		"kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite",
		"kubectl rollout restart deployment/b -n shop", "kubectl rollout restart deployment/a -n shop"}
	if strings.Join(p.Steps, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(p.Steps, "\n"), strings.Join(want, "\n"))
	}
	if p.Compared != 22 || p.Worst() != diagnose.Fail || p.Workloads[0].Name != "b" {
		t.Errorf("compared %d, worst %s, first %s", p.Compared, p.Worst(), p.Workloads[0].Name)
	}
}
