package diagnose

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeJobHelperRuns: a run-once pod's work is done, but a container of
// its own (a log shipper, a proxy of its own) keeps it running.
const CodeJobHelperRuns = "KM-START-017"

// helperGrace is how long a run-once pod's other containers may go on
// after its work ended (flushing a log) before the pod is called stuck.
const helperGrace = time.Minute

func init() {
	register(&Spec{Code: CodeJobHelperRuns, Title: "a Job's helper container never ends", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactOwner},
		Means:   "A run-once pod (a Job's, restartPolicy Never or OnFailure) ends only when every regular container has ended. Its work container ended with exit 0, but another container of its own (a log shipper, a tail -f, a helper proxy) runs on, so the pod never ends and the Job never completes. This is the classic sidecar's problem with the app's own helper: Istio's proxy is a native sidecar, which the kubelet stops once the others end; the helper is not.",
		Detects: "A running pod with restartPolicy Never or OnFailure, one of whose regular app containers ended with exit 0 over a minute ago while another regular app container still runs (Istio's containers left out).",
		Fixes:   "The helper made a native sidecar: moved from containers to initContainers with restartPolicy: Always (Kubernetes 1.29+), which the kubelet stops once the Job's containers end; a Job's pod template cannot change, so the Job is re-created with it (a CronJob's job template is patched, its stuck run deleted).",
		Source:  "Kubernetes docs, sidecar containers (Jobs with sidecars); istio/istio issues on Jobs that never complete (the classic sidecar's case)",
		Planted: "a Job whose pod runs its work container and a tail -f log shipper as regular containers",
		run:     jobHelperRuns})
}

func jobHelperRuns(in *Input) []Finding {
	p := in.Pod
	if p == nil || in.Startup == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning ||
		p.Spec.RestartPolicy != corev1.RestartPolicyNever && p.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return nil
	}
	var done []string
	var ended time.Time
	var running []corev1.Container
	for _, st := range p.Status.ContainerStatuses {
		if istio.IsIstioContainer(st.Name) {
			continue
		}
		switch t := st.State.Terminated; {
		case t != nil && t.ExitCode == 0:
			done = append(done, st.Name)
			if t.FinishedAt.After(ended) {
				ended = t.FinishedAt.Time
			}
		case t != nil:
			return nil // a failed container: its own finding
		case st.State.Running != nil:
			for _, c := range p.Spec.Containers {
				if c.Name == st.Name {
					running = append(running, c)
				}
			}
		default:
			return nil // one not started yet
		}
	}
	if len(done) == 0 || len(running) == 0 || ended.IsZero() {
		return nil
	}
	since := in.Startup.Now.Sub(ended).Round(time.Second)
	var names []string
	for _, c := range running {
		names = append(names, c.Name)
	}
	f := Finding{Status: Fail,
		Evidence: fmt.Sprintf("%s ended with exit 0 %s ago, but %s still runs: a run-once pod ends only when all its regular containers have, so it never ends and its Job never completes; %s is a helper of the app's own, not Istio's (istio-proxy is a native sidecar, which the kubelet stops)",
			quoteList(done), since, quoteList(names), quoteList(names)),
		Fix:      helperNativeFix(in, running),
		explains: []string{CodePodNotReady, CodeJobFailed}}
	if since < helperGrace {
		f.Status = Warning
		f.Evidence += "; it ended less than " + helperGrace.String() + " ago, and a helper may still be flushing"
	}
	return []Finding{f}
}

// helperNativeFix moves the pod's helper containers to native sidecars
// (initContainers, restartPolicy Always) where its template is.
func helperNativeFix(in *Input, helpers []corev1.Container) string {
	always := corev1.ContainerRestartPolicyAlways
	var dels, adds []any
	for _, c := range helpers {
		dels = append(dels, map[string]any{"name": c.Name, "$patch": "delete"})
		c = templateContainer(in, c)
		c.RestartPolicy = &always
		b, err := json.Marshal(c)
		if err != nil {
			panic(err) // a container always encodes
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			panic(err)
		}
		adds = append(adds, m)
	}
	patch := plainJSON(map[string]any{"spec": map[string]any{"containers": dels, "initContainers": adds}})
	fix := in.templateSpecFix(patch)
	if fix == "" {
		var names []string
		for _, c := range helpers {
			names = append(names, c.Name)
		}
		return "in the pod's manifest, move " + strings.Join(names, ", ") + " to initContainers with restartPolicy: Always (a native sidecar), then re-create the pod"
	}
	return firstLineNote(fix, "a native sidecar, which the kubelet stops once the Job's own containers end")
}

// templateContainer is container c as the pod's template has it (the
// workload's, when read), else as the pod has it less what admission
// added: the service account token's mount, whose volume only the pod has,
// and the injector's probe rewrite (its probes as istio-proxy keeps them).
func templateContainer(in *Input, c corev1.Container) corev1.Container {
	if w := in.Owner; w != nil && w.Template != nil {
		for _, t := range w.Template.Spec.Containers {
			if t.Name == c.Name {
				return t
			}
		}
	}
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(m.Name, "kube-api-access-") {
			mounts = append(mounts, m)
		}
	}
	c.VolumeMounts = mounts
	if in.Pod != nil {
		for field, probe := range rewrittenProbes(in.Pod, c.Name) {
			switch field {
			case "readinessProbe":
				c.ReadinessProbe = probe
			case "livenessProbe":
				c.LivenessProbe = probe
			case "startupProbe":
				c.StartupProbe = probe
			}
		}
	}
	return c
}
