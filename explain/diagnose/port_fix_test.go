package diagnose

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// patchOf runs a fix's first line in a shell whose kubectl prints the -p
// argument it was given: the patch as kubectl would read it.
func patchOf(t *testing.T, line string) map[string]any {
	t.Helper()
	out, err := exec.Command("sh", "-c", `kubectl() { while [ $# -gt 0 ]; do if [ "$1" = -p ]; then printf '%s' "$2"; return; fi; shift; done; }; `+line).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("the patch %q: %v", out, err)
	}
	return m
}

// An app's port that collides with the proxy's moves, as a command: in
// its ports, command and env, with the Service whose targetPort is its
// number; a StatefulSet's pod that never became ready is deleted after.
func TestMovePortsFix(t *testing.T) {
	yes := true
	app := corev1.Container{Name: "app", Command: []string{"/bin/sh", "-c", "echo 'up' > /m && exec httpd -f -p 15020 -h /m"},
		Env:   []corev1.EnvVar{{Name: "STATS", Value: "15020"}, {Name: "OTHER", Value: "150200"}},
		Ports: []corev1.ContainerPort{{Name: "http-metrics", ContainerPort: 15020}},
		// The readiness probe as the injector rewrote it (the template's is
		// in istio-proxy's env); the liveness probe as the template has it.
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/app-health/app/readyz", Port: intstr.FromInt32(15020)}}},
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15020)}}}}
	probers := `{"/app-health/app/readyz":{"httpGet":{"path":"/m","port":15020,"scheme":"HTTP"},"timeoutSeconds":1}}`
	pod := func(kind, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x-0", Namespace: "ns", Labels: map[string]string{"pod-template-hash": "h"},
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{app, {Name: "istio-proxy", Ports: []corev1.ContainerPort{{ContainerPort: 15090}},
				Env: []corev1.EnvVar{{Name: "ISTIO_KUBE_APP_PROBERS", Value: probers}}}}}}
	}
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics", Namespace: "ns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}, {Port: 9100, TargetPort: intstr.FromInt32(15020)}}}}
	checks := 0
	for _, tc := range []struct {
		owner, name, starts string
		lines               int
	}{
		{"ReplicaSet", "web-h", "kubectl patch deployment/web -n ns --type=strategic -p '", 2},
		{"StatefulSet", "db", "kubectl patch statefulset/db -n ns --type=strategic -p '", 3},
	} {
		in := &Input{Facts: Facts{Pod: pod(tc.owner, tc.name), Services: []corev1.Service{svc}}}
		fix := in.movePortsFix([]corev1.Container{app})
		lines := strings.Split(fix, "\n")
		checks++
		if !strings.HasPrefix(fix, tc.starts) || len(lines) != tc.lines {
			t.Fatalf("%s: %d lines, want %d starting %q:\n%s", tc.owner, len(lines), tc.lines, tc.starts, fix)
		}
		m := patchOf(t, lines[0])
		c := m["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		checks++
		if got := c["command"].([]any)[2]; got != "echo 'up' > /m && exec httpd -f -p 9020 -h /m" {
			t.Errorf("%s: the command moved: %q", tc.owner, got)
		}
		checks++
		if env := c["env"].([]any); len(env) != 1 || env[0].(map[string]any)["value"] != "9020" {
			t.Errorf("%s: the env moved: %v (OTHER's 150200 is another number)", tc.owner, env)
		}
		checks++
		if ports := c["ports"].([]any); len(ports) != 2 || ports[0].(map[string]any)["$patch"] != "delete" || ports[1].(map[string]any)["containerPort"] != float64(9020) || ports[1].(map[string]any)["name"] != "http-metrics" {
			t.Errorf("%s: the declared port moved: %v", tc.owner, ports)
		}
		checks++
		if got, _ := json.Marshal([]any{c["readinessProbe"], c["livenessProbe"]}); string(got) != `[{"httpGet":{"port":9020}},{"tcpSocket":{"port":9020}}]` {
			t.Errorf("%s: the probes moved: %s (the readiness probe is the template's, kept in istio-proxy's env)", tc.owner, got)
		}
		checks++
		if want := `kubectl patch service metrics -n ns --type=json -p '[{"op":"replace","path":"/spec/ports/1/targetPort","value":9020}]'`; !strings.HasPrefix(lines[1], want) {
			t.Errorf("%s: the Service's line %q, want %q", tc.owner, lines[1], want)
		}
		if tc.owner == "StatefulSet" {
			checks++
			if !strings.HasPrefix(lines[2], "kubectl delete pod x-0 -n ns") {
				t.Errorf("the StatefulSet's unready pod is not deleted: %s", lines[2])
			}
		}
	}
	t.Logf("%d checks", checks)
}
