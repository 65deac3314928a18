package diagnose

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// An app that names one of the proxy's ports in its command without
// declaring it is put down to the collision only when its log says the
// bind failed; its fix moves the number in its command.
func TestUndeclaredPortInUse(t *testing.T) {
	app := corev1.Container{Name: "app", Command: []string{"/bin/sh", "-c", "httpd -p 15000 -h /www && nc 127.0.0.1 15000"}}
	in := func(log string) *Input {
		return &Input{Facts: Facts{Startup: &startup.StartupReport{Containers: []startup.ContainerStartup{{Name: "app", Log: &startup.LogTail{Current: []string{log}}}}}}}
	}
	checks := 0
	for _, tc := range []struct {
		log  string
		want string
	}{
		{"httpd: bind: Address already in use", "[15000]"},
		{"Error: listen EADDRINUSE: address already in use :::15000", "[15000]"},
		{"connection refused", "[]"},
	} {
		checks++
		if got := fmt.Sprint(undeclaredInUse(in(tc.log), app)); got != tc.want {
			t.Errorf("log %q: ports %q, want %q", tc.log, got, tc.want)
		}
	}
	declared := app
	declared.Ports = []corev1.ContainerPort{{ContainerPort: 15000}}
	checks++
	if ports := undeclaredInUse(in("bind: Address in use"), declared); len(ports) != 0 {
		t.Errorf("a declared port is the declared check's, not this one's: %v", ports)
	}
	t.Logf("%d checks", checks)
}
