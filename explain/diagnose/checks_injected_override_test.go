package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInjectedOverridden, pod: deploymentPod,
		owner: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "istio-init", Command: []string{"sh", "-c", "cp /cfg /data"}}},
			Containers:     []corev1.Container{{Name: "app"}}}}},
		status: Fail, evidence: "runs that command instead of istio-iptables",
		fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"replace","path":"/spec/template/spec/initContainers/0/name","value":"istio-init-app"}]'`})
}

// A template's own istio-init or istio-proxy is judged by what it sets: a
// command on istio-init, a uid other than 1337 on istio-proxy, image auto
// pulled Always (a failure when the pull is what the pod waits on); one
// that sets resources only, or a pod not injected, is nothing; a bare
// pod's applied manifest is read as its template.
func TestInjectedOverridden(t *testing.T) {
	root, proxyUID := int64(0), int64(1337)
	tmpl := func(init []corev1.Container, cs ...corev1.Container) *WorkloadState {
		return &WorkloadState{Kind: "StatefulSet", Namespace: "shop", Name: "db", Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: init, Containers: cs}}}
	}
	injectedPod := func(waiting string) *corev1.Pod {
		yes := true
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "shop", Annotations: map[string]string{"sidecar.istio.io/status": `{"revision":"default"}`},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "db", Controller: &yes}}}}
		if waiting != "" {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "istio-proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}}}}
		}
		return p
	}
	app := corev1.Container{Name: "app"}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		owner  *WorkloadState
		status string
		want   []string
	}{
		{name: "proxy as root", pod: injectedPod(""), owner: tmpl(nil, app, corev1.Container{Name: "istio-proxy", SecurityContext: &corev1.SecurityContext{RunAsUser: &root}}),
			status: Fail, want: []string{"runAsUser 0", `kubectl patch statefulset/db -n shop --type=json -p '[{"op":"remove","path":"/spec/template/spec/containers/1/securityContext/runAsUser"}]'`}},
		{name: "proxy as 1337: nothing", pod: injectedPod(""), owner: tmpl(nil, app, corev1.Container{Name: "istio-proxy", SecurityContext: &corev1.SecurityContext{RunAsUser: &proxyUID}})},
		{name: "image auto pulled Always, waiting on the pull", pod: injectedPod("ImagePullBackOff"), owner: tmpl(nil, corev1.Container{Name: "istio-proxy", Image: "auto", ImagePullPolicy: corev1.PullAlways}, app),
			status: Fail, want: []string{"imagePullPolicy Always", `"op":"replace","path":"/spec/template/spec/containers/0/imagePullPolicy","value":"IfNotPresent"`}},
		{name: "image auto pulled Always, running", pod: injectedPod(""), owner: tmpl(nil, corev1.Container{Name: "istio-proxy", Image: "auto", ImagePullPolicy: corev1.PullAlways}, app), status: Warning},
		{name: "resources only: nothing", pod: injectedPod(""), owner: tmpl(nil, app, corev1.Container{Name: "istio-proxy", Image: "auto", ImagePullPolicy: corev1.PullIfNotPresent})},
		{name: "not injected: nothing", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "shop"}}, owner: tmpl([]corev1.Container{{Name: "istio-init", Command: []string{"true"}}}, app)},
		{name: "a CronJob's Job: the CronJob's jobTemplate", pod: injectedPod(""),
			owner:  &WorkloadState{Kind: "Job", Namespace: "shop", Name: "sync-1", Controller: "CronJob/sync", Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "istio-init", Args: []string{"x"}}}}}},
			status: Fail, want: []string{`kubectl patch cronjob/sync -n shop --type=json -p '[{"op":"replace","path":"/spec/jobTemplate/spec/template/spec/initContainers/0/name","value":"istio-init-app"}]'`}},
	}
	checked := 0
	for _, tc := range cases {
		fs := injectedOverridden(&Input{Facts: Facts{Pod: tc.pod, Owner: tc.owner}})
		checked++
		if tc.status == "" {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Status != tc.status {
			t.Errorf("%s: want one %s, got %+v", tc.name, tc.status, fs)
			continue
		}
		for _, w := range tc.want {
			checked++
			if !strings.Contains(fs[0].Evidence+"\n"+fs[0].Fix, w) {
				t.Errorf("%s: lacks %q:\n%s\n%s", tc.name, w, fs[0].Evidence, fs[0].Fix)
			}
		}
	}
	// A bare pod: its applied manifest.
	p := injectedPod("")
	p.OwnerReferences = nil
	p.Name = "web"
	p.Annotations[lastApplied] = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"shop"},"spec":{"initContainers":[{"name":"istio-init","command":["sh"]}],"containers":[{"name":"app"}]}}`
	fs := injectedOverridden(&Input{Facts: Facts{Pod: p}})
	checked++
	if len(fs) != 1 || !strings.Contains(fs[0].Fix, `kubectl apply view-last-applied pod/web -n shop -o json | kubectl patch --local -f - --type=json -p '[{"op":"replace","path":"/spec/initContainers/0/name","value":"istio-init-app"}]'`) {
		t.Errorf("bare pod: %+v", fs)
	}
	t.Logf("%d assertions", checked)
}
