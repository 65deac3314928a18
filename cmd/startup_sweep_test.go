package cmd

import (
	"bytes"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// What a sweep keeps of each report prints, in JSON, YAML and as a table,
// byte for byte what print prints of the reports themselves: healthy,
// pending, crash-looping and hazardous pods in several namespaces, names that
// JSON escapes, an incomplete answer; its error names the same facts. The
// pods arrive sorted (kept compressed, by severity), shuffled (mostly kept
// apart, sorted and merged in) and sorted until halfway.
func TestStartupSweepPrintsAsReports(t *testing.T) {
	yes, no := true, false
	var pods []*corev1.Pod
	for i := 0; i < 120; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%7), Name: fmt.Sprintf("web-%03d<&>\u2028", (i*37)%120), CreationTimestamp: mt(0)},
			Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "istio-init"}},
				Containers: []corev1.Container{{Name: "app"}, {Name: "istio-proxy"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending},
		}
		switch i % 4 {
		case 1: // running, app before a slow proxy
			p.Spec.NodeName = "node-1"
			p.Status.Phase = corev1.PodRunning
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: mt(1), FinishedAt: mt(2)}}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{
				{Name: "app", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(3)}}},
				{Name: "istio-proxy", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(3 + i%3)}}},
			}
		case 2: // istio-init crash-looping
			p.Spec.NodeName = "node-2"
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-init", RestartCount: int32(i), Started: &no,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "iptables-restore failed\n\x1b[31m", StartedAt: mt(20), FinishedAt: mt(21)}}}}
		}
		pods = append(pods, p)
	}
	incomplete := []string{"events: forbidden: the user may not list events (all namespaces)"}
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	halfway := append(append([]*corev1.Pod(nil), sorted[:60]...), pods[60:]...)
	reports := func(pods []*corev1.Pod) []*startup.StartupReport {
		var rs []*startup.StartupReport
		for _, p := range pods {
			r := startup.AnalyzeStartup(startup.StartupFacts{Pod: p, Now: origin.Add(time.Minute)})
			r.Incomplete = append(r.Incomplete, incomplete...)
			rs = append(rs, r)
		}
		return rs
	}
	checked := 0
	for _, arrival := range []struct {
		name    string
		pods    []*corev1.Pod
		inOrder bool
	}{{"sorted", sorted, true}, {"shuffled", pods, false}, {"sorted until halfway", halfway, false}} {
		for _, format := range []string{render.JSON, render.YAML, ""} {
			var want, got, wantErr, gotErr bytes.Buffer
			o := &StartupOptions{Output: format, IOStreams: genericiooptions.IOStreams{Out: &want, ErrOut: &wantErr}}
			rs := reports(arrival.pods)
			ds := make([]*diagnose.Diagnosis, len(rs))
			for i := range rs {
				ds[i] = startupSlice(rs[i], arrival.pods[i])
			}
			if err := o.print(false, false, rs, ds); err != nil {
				t.Fatal(err)
			}
			wantIncomplete := rs[0].Incomplete
			o = &StartupOptions{Output: format, IOStreams: genericiooptions.IOStreams{Out: &got, ErrOut: &gotErr}}
			s := newStartupSweep(o)
			for i, r := range reports(arrival.pods) {
				if err := s.add(r, arrival.pods[i], diagnose.Facts{}); err != nil {
					t.Fatal(err)
				}
			}
			late := s.list.Late()
			if err := s.print(); err != nil {
				t.Fatal(err)
			}
			if (late == 0) != arrival.inOrder {
				t.Errorf("%s, -o %q: %d of %d reports kept out of order", arrival.name, format, late, len(pods))
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("%s, -o %q: the kept sweep prints\n%s\nprint prints\n%s", arrival.name, format, got.String(), want.String())
			}
			if fmt.Sprint(s.incomplete) != fmt.Sprint(wantIncomplete) {
				t.Errorf("-o %q: incomplete %q, want %q", format, s.incomplete, wantIncomplete)
			}
			if want.Len() < 1000 {
				t.Errorf("-o %q: only %d bytes printed", format, want.Len())
			}
			checked++
		}
	}
	t.Logf("%d arrival orders × formats, %d reports each, printed alike", checked, len(pods))
}
