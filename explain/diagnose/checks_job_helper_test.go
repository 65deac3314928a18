package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// jobHelperPod is a Job's pod whose app ended with exit 0 at second
// ended while its log shipper still runs.
func jobHelperPod(ended int) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "export", Controller: &yes}}
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		always := corev1.ContainerRestartPolicyAlways
		// Istio's proxy is a native sidecar here.
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-proxy", RestartPolicy: &always})
		p.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "log-shipper", Image: "shipper:1", Command: []string{"tail", "-f", "/logs/x"},
			VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/logs"}, {Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: at(3), FinishedAt: at(ended)}}},
			{Name: "log-shipper", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}},
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at(ended)}}
	}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeJobHelperRuns, pod: jobHelperPod(5), now: 3 * time.Minute, status: Fail,
		evidence: "log-shipper still runs: a run-once pod ends only when all its regular containers have",
		fix:      `"initContainers":[{"command":["tail","-f","/logs/x"],"image":"shipper:1","name":"log-shipper","resources":{},"restartPolicy":"Always","volumeMounts":[{"mountPath":"/logs","name":"logs"}]}]`})
}

// The helper of a Job's pod that runs on after the work ended: a fail past
// the grace, a warning within it; a pod whose work is still running, one
// whose work failed, and a pod that restarts (a Deployment's) are left
// alone.
func TestJobHelperRuns(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name   string
		pod    func(p *corev1.Pod)
		now    time.Duration
		status string // "" for no finding
	}{
		{"stuck for minutes", jobHelperPod(5), 3 * time.Minute, Fail},
		{"just ended", jobHelperPod(50), time.Minute, Warning},
		{"work still running", func(p *corev1.Pod) {
			jobHelperPod(5)(p)
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}
		}, 3 * time.Minute, ""},
		{"work failed", func(p *corev1.Pod) {
			jobHelperPod(5)(p)
			p.Status.ContainerStatuses[0].State.Terminated.ExitCode = 1
		}, 3 * time.Minute, ""},
		{"a pod that restarts", func(p *corev1.Pod) {
			jobHelperPod(5)(p)
			p.Spec.RestartPolicy = corev1.RestartPolicyAlways
		}, 3 * time.Minute, ""},
	} {
		d := Diagnose(checkCase{pod: tc.pod, now: tc.now}.facts())
		got := ""
		for _, f := range d.Findings {
			if f.Code == CodeJobHelperRuns {
				got = f.Status
				checks++
				if strings.Contains(f.Fix, "kube-api-access") {
					t.Errorf("%s: the fix keeps the token mount admission added (its volume is the pod's only): %s", tc.name, f.Fix)
				}
			}
		}
		checks++
		if got != tc.status {
			t.Errorf("%s: status %q, want %q (findings %+v)", tc.name, got, tc.status, d.Findings)
		}
	}
	t.Logf("%d checks", checks)
}

// With the template unread, the helper's probe comes from istio-proxy's
// record of the app's own, not the injector's rewrite to the agent's port.
func TestJobHelperProbeAsWritten(t *testing.T) {
	d := Diagnose(checkCase{pod: func(p *corev1.Pod) {
		jobHelperPod(5)(p)
		proxy := &p.Spec.InitContainers[len(p.Spec.InitContainers)-1] // the native istio-proxy
		proxy.Env = []corev1.EnvVar{{Name: "ISTIO_KUBE_APP_PROBERS",
			Value: `{"/app-health/log-shipper/readyz":{"httpGet":{"path":"/ready","port":9100,"scheme":"HTTP"},"timeoutSeconds":3}}`}}
		p.Spec.Containers[1].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/app-health/log-shipper/readyz", Port: intstr.FromInt32(15020)}}}
	}, now: 3 * time.Minute}.facts())
	checks := 0
	for _, f := range d.Findings {
		if f.Code != CodeJobHelperRuns {
			continue
		}
		checks++
		if strings.Contains(f.Fix, "15020") || strings.Contains(f.Fix, "app-health") {
			t.Errorf("the fix carries the injector's probe rewrite: %s", f.Fix)
		}
		checks++
		if first, _, _ := strings.Cut(f.Fix, "\n"); strings.Count(first, "   # ") != 1 {
			t.Errorf("the fix's line carries more than one comment: %s", first)
		}
		checks++
		if !strings.Contains(f.Fix, `"path":"/ready","port":9100`) {
			t.Errorf("the fix lost the helper's own probe: %s", f.Fix)
		}
	}
	if checks == 0 {
		t.Fatalf("no %s finding: %+v", CodeJobHelperRuns, d.Findings)
	}
	t.Logf("%d checks", checks)
}
