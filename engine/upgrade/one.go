package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// proof is what the target's injector and the admission chain made of one
// template: shared by the workloads with the same template and labels.
type proof struct {
	pod      *corev1.Pod // the injected pod admission admitted (or, refused, the injector's)
	unknown  string      // why the injector could not be asked
	denied   string      // the injector refused it
	refused  string      // admission refused the injected pod
	notAsked string      // why the dry run could not be made
	provedBy string
	// meshSide is the change of the template's annotations whose pod the
	// target's injector makes and admission admits, when refused is set.
	meshSide *injection.MeshSide
}

// planOne plans one candidate; ok is false for a workload not in the mesh
// now and not after either.
func (e *Engine) planOne(ctx context.Context, facts *injection.ClusterFacts, target string, c candidate, relabels map[string]string, proofs map[string]*proof) (upgrade.Workload, bool) {
	w := upgrade.Workload{Kind: c.kind, Namespace: c.namespace, Name: c.name, Restart: restart(c)}
	if c.pod != nil {
		w.Now, w.NowPod = upgrade.SideOf(c.pod), c.pod.Name
	}
	nowMeshed := w.Now != nil && w.Now.Injected
	if nowMeshed && w.Now.Revision != "" {
		release, exists, known, _ := injection.RevisionRelease(facts, w.Now.Revision)
		switch {
		case !exists:
			w.NowFindings = append(w.NowFindings, diagnose.Finding{Status: diagnose.Warning,
				Evidence: "its pod was injected by revision " + w.Now.Revision + ", which no longer exists (no injector of it is installed): its proxy is served by no control plane of its own; restart it under an installed revision"})
		case known:
			if why := upgrade.Skew(w.Now.Release, release); why != "" {
				w.NowFindings = append(w.NowFindings, diagnose.Finding{Status: diagnose.Warning, Evidence: why})
			}
		}
	}
	if c.template == nil {
		if !nowMeshed {
			return w, false
		}
		if target != "" && c.pod != nil {
			// What it becomes is unknown, but its namespace moves all the
			// same: re-created, it is admitted under the namespace's labels.
			nsLabels := map[string]string{}
			if n := facts.Namespaces[c.namespace]; n != nil {
				maps.Copy(nsLabels, n.Labels)
			}
			move(c, target, nsLabels, maps.Clone(c.pod.Labels), relabels)
			delete(relabels, strings.ToLower(c.kind)+"/"+c.namespace+"/"+c.name) // a live pod's labels move nothing
		}
		w.AfterUnknown = "a bare pod: the manifest it was created from is not kept (it was not applied with kubectl apply), and the live pod carries what the injector added"
		w.Starts, w.Selected = upgrade.StartsUnknown, "unknown"
		return w, true
	}
	nsLabels := map[string]string{}
	if n := facts.Namespaces[c.namespace]; n != nil {
		maps.Copy(nsLabels, n.Labels)
	}
	podLabels := maps.Clone(c.template.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	if target != "" {
		move(c, target, nsLabels, podLabels, relabels)
		if rev := podLabels[istio.LabelRev]; c.kind == "Pod" && rev != c.template.Labels[istio.LabelRev] && strings.HasPrefix(w.Restart, "kubectl apply view-last-applied") {
			// Its manifest gets the label that moves it.
			w.Restart = strings.Replace(w.Restart, " | kubectl replace", fmt.Sprintf(` | kubectl patch --local -f - --type=merge -p '{"metadata":{"labels":{%q:%q}}}' -o json | kubectl replace`, istio.LabelRev, rev), 1)
		}
	}
	r := injection.Istio{}.Explain(facts, &injection.Workload{Kind: c.kind, Namespace: c.namespace, Name: c.name,
		Labels: podLabels, Annotations: c.template.Annotations, Spec: c.template.Spec,
		NamespaceSource: injection.NamespaceFromFile, NamespaceLabels: nsLabels})
	if !r.IsExpected() && !nowMeshed {
		return w, false
	}
	pod := podOf(c, podLabels)
	if !r.IsExpected() {
		w.Selected = "no sidecar: " + r.Reason
		w.After = upgrade.SideOf(pod)
		w.Starts = upgrade.StartsYes
		w.Changes, w.Compared = compare(w.Now, w.After)
		return w, true
	}
	w.Selected = fmt.Sprintf("revision %s (webhook %s)", r.Revision, r.Webhook)
	key := templateKey(c.namespace, r.Webhook, pod)
	pr, seen := proofs[key]
	if !seen {
		pr = e.prove(ctx, facts, r.Webhook, r.Revision, pod)
		if pr.refused != "" && !freedByRollout(c, pr.refused) {
			pr.meshSide = e.proveMeshSide(ctx, facts, r.Webhook, r.Revision, pod)
		}
		proofs[key] = pr
	}
	w.ProvedBy = pr.provedBy
	decide(&w, pr, c, facts)
	return w, true
}

// move changes the labels that select a revision to select target: the
// namespace's (istio-injection removed, istio.io/rev set), else the pod
// template's; the command that does it goes in relabels.
func move(c candidate, target string, nsLabels, podLabels map[string]string, relabels map[string]string) {
	_, injLabel := nsLabels[istio.LabelInjection]
	if injLabel || nsLabels[istio.LabelRev] != "" {
		if nsLabels[istio.LabelRev] == target && !injLabel {
			return
		}
		cmd := "kubectl label namespace " + c.namespace + " " + istio.LabelRev + "=" + target + " --overwrite"
		if injLabel {
			cmd += " " + istio.LabelInjection + "-"
		}
		delete(nsLabels, istio.LabelInjection)
		nsLabels[istio.LabelRev] = target
		relabels["namespace/"+c.namespace] = cmd
		return
	}
	if podLabels[istio.LabelRev] == "" && podLabels[istio.KeyInject] != "true" || podLabels[istio.LabelRev] == target {
		return
	}
	podLabels[istio.LabelRev] = target
	if c.kind == "Pod" || c.kind == "Job" {
		return // re-created from its manifest with the label: said by its restart
	}
	if selectsByRevision(c.selector) && c.kind != "CronJob" {
		// Its selector, immutable, reads the label: the workload is made
		// again without it there, its pods orphaned meanwhile and adopted
		// by the new one, which rolls them (no outage).
		kind := strings.ToLower(c.kind)
		relabels[kind+"/"+c.namespace+"/"+c.name] = fmt.Sprintf(`kubectl get %s/%s -n %s -o json | kubectl patch --local -f - --type=merge -p '{"spec":{"selector":{"matchLabels":{%q:null}},"template":{"metadata":{"labels":{%q:%q}}}}}' -o json | kubectl replace --force --cascade=orphan -f -   # its selector holds %s, and a selector cannot change: this makes %s/%s again selecting its pods without it; its pods are kept meanwhile, then rolled to the new revision`,
			kind, c.name, c.namespace, istio.LabelRev, istio.LabelRev, target, istio.LabelRev, kind, c.name)
		return
	}
	path := `{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}`
	if c.kind == "CronJob" {
		path = `{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}}}`
	}
	relabels[strings.ToLower(c.kind)+"/"+c.namespace+"/"+c.name] = fmt.Sprintf("kubectl patch %s/%s -n %s --type=merge -p '%s'", strings.ToLower(c.kind), c.name, c.namespace, fmt.Sprintf(path, istio.LabelRev, target))
}

// podOf is the pod a controller would create from the template, with the
// labels after the move.
func podOf(c candidate, podLabels map[string]string) *corev1.Pod {
	base := c.name
	if c.kind == "Pod" {
		base = strings.TrimSuffix(base, "-")
	}
	p := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: base + "-", Namespace: c.namespace, Labels: podLabels, Annotations: maps.Clone(c.template.Annotations)},
		Spec:       *c.template.Spec.DeepCopy(),
	}
	p.Spec.NodeName = ""
	return p
}

// proveMeshSide asks the target's injector and admission, for a pod whose
// injection admission refuses, which change of its annotations (the
// candidates diagnose tries) makes one it admits, sidecar and all: nil
// when none does.
func (e *Engine) proveMeshSide(ctx context.Context, facts *injection.ClusterFacts, webhook, revision string, pod *corev1.Pod) *injection.MeshSide {
	for _, c := range injection.MeshSideCandidates(pod.Annotations) {
		changed := pod.DeepCopy()
		changed.Annotations = c.Apply(pod.Annotations)
		pr := e.prove(ctx, facts, webhook, revision, changed)
		switch {
		case pr.unknown != "" || pr.notAsked != "":
			return nil // asked no more
		case pr.denied != "" || pr.refused != "" || pr.pod == nil || !injected(pr.pod):
			continue
		}
		return &c
	}
	return nil
}

// injected: the pod has istio-proxy.
func injected(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == istio.ProxyContainer {
				return true
			}
		}
	}
	return false
}

// prove asks the revision's injector for the pod, then the admission chain
// (a dry-run create) whether it admits what the injector made.
func (e *Engine) prove(ctx context.Context, facts *injection.ClusterFacts, webhook, revision string, pod *corev1.Pod) *proof {
	cc, ok := clientConfig(facts, webhook)
	if !ok {
		return &proof{unknown: "webhook " + webhook + " is not among the cluster's configurations"}
	}
	where := "service " + svcName(cc)
	if cc.URL != nil {
		where = *cc.URL
	}
	pr := &proof{provedBy: "the injector of revision " + revision + " (" + where + "), then a dry-run create"}
	injected, denied, err := e.Client.CallInjector(ctx, cc, pod)
	switch {
	case err != nil:
		pr.unknown = "the injector of revision " + revision + " could not be asked: " + err.Error()
		return pr
	case denied != "":
		pr.denied = denied
		return pr
	}
	pr.pod = injected
	// The injected pod through the rest of the admission chain: labelled
	// so that no Istio webhook selects it again (the namespace's revision
	// now would inject it anew, as a re-invocation).
	probe := injected.DeepCopy()
	if probe.Labels == nil {
		probe.Labels = map[string]string{}
	}
	probe.Labels[istio.KeyInject] = "false"
	admitted, err := e.Client.DryRunCreate(ctx, probe)
	switch {
	case err == nil:
		if v, had := injected.Labels[istio.KeyInject]; had {
			admitted.Labels[istio.KeyInject] = v
		} else {
			delete(admitted.Labels, istio.KeyInject)
		}
		pr.pod = admitted
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource"):
		pr.notAsked = "the user may not create pods in namespace " + pod.Namespace + " (a dry run needs it)"
	case apierrors.IsNotFound(err):
		pr.notAsked = "namespace " + pod.Namespace + " does not exist"
	default:
		pr.refused = err.Error()
	}
	return pr
}

func svcName(cc admissionregistrationv1.WebhookClientConfig) string {
	if cc.Service == nil {
		return ""
	}
	return cc.Service.Namespace + "/" + cc.Service.Name
}

// clientConfig is the clientConfig of "<configuration>/<webhook>".
func clientConfig(f *injection.ClusterFacts, webhook string) (admissionregistrationv1.WebhookClientConfig, bool) {
	config, name, _ := strings.Cut(webhook, "/")
	for _, c := range f.Webhooks {
		if c.Name != config {
			continue
		}
		for _, w := range c.Webhooks {
			if w.Name == name {
				return w.ClientConfig, true
			}
		}
	}
	return admissionregistrationv1.WebhookClientConfig{}, false
}

// decide fills after, the changes and whether it starts from the proof.
func decide(w *upgrade.Workload, pr *proof, c candidate, facts *injection.ClusterFacts) {
	switch {
	case pr.unknown != "":
		w.AfterUnknown, w.Starts = pr.unknown, upgrade.StartsUnknown
		return
	case pr.denied != "":
		w.AfterUnknown, w.Starts = "the target's injector refuses the template", upgrade.StartsNo
		w.Findings = append(w.Findings, diagnose.Finding{Code: diagnose.RefusalCode(injection.BlockedAnnotation), Status: diagnose.Fail,
			Evidence: "the target's injector refuses the pod: " + oneLine(pr.denied)})
		return
	}
	w.After = upgrade.SideOf(pr.pod)
	w.Changes, w.Compared = compare(w.Now, w.After)
	switch {
	case pr.refused != "" && freedByRollout(c, pr.refused):
		// A quota full with its own pods: its rollout deletes one first.
		w.Starts = upgrade.StartsYes
		w.Findings = append(w.Findings, diagnose.Finding{Status: diagnose.Info,
			Evidence: "a dry-run create of the pod the target's injector makes is refused by a quota that counts its pod of now (" + oneLine(pr.refused) + "); its rollout deletes that pod before it creates the new one, which then fits"})
		w.Findings = append(w.Findings, hazards(pr.pod, c)...)
		startsFrom(w)
	case pr.refused != "":
		w.Starts = upgrade.StartsNo
		code := diagnose.RefusalCode(injection.RefusalOf(pr.refused))
		iw := &injection.Workload{Kind: c.kind, Namespace: c.namespace, Name: c.name, Spec: c.template.Spec, Annotations: c.template.Annotations}
		f := diagnose.Finding{Code: code, Status: diagnose.Fail,
			Evidence: "a dry-run create of the pod the target's injector makes is refused: " + oneLine(pr.refused), Fix: injection.RefusalFix(iw, pr.refused)}
		if f.Fix == "" {
			// What of the sidecar the refusal is about, as diagnose puts a
			// refused workload's pods down to it.
			ws := &diagnose.WorkloadState{Kind: c.kind, Namespace: c.namespace, Name: c.name, Template: c.template}
			if ev, mesh, fix, ok := diagnose.RefusalCause(ws, pr.refused); ok {
				f.Evidence, f.Mesh, f.Fix = f.Evidence+"; "+ev, mesh, fix
			} else if fix := diagnose.MeshSideOfPolicy(ws, pr.refused); fix != "" {
				why, cmd, _ := strings.Cut(fix, "\n")
				f.Mesh, f.Fix = "what the target's injector adds", cmd+"   # keeping the policy: "+strings.TrimSuffix(why, ":")
			}
			// The policy or webhook that refused it, and the exemption of
			// its namespace: the fix, or the other way out.
			var nsLabels map[string]string
			if n := facts.Namespaces[c.namespace]; n != nil {
				nsLabels = n.Labels
			}
			iw.Labels = c.template.Labels
			by, exempt := injection.PolicyExemption(facts, iw, nsLabels, pr.refused)
			if exempt != "" {
				f.Evidence += "; refused by " + by
				if f.Fix == "" {
					f.Fix = exempt + "   # then the restart below"
				} else {
					f.Fix += "\n# or: " + exempt
				}
			}
			if ms := pr.meshSide; ms != nil {
				// Proved by the target's injector and admission: the
				// knob that keeps the policy.
				f.Mesh, f.Evidence = ms.What, f.Evidence+"; "+diagnose.ProvedMeshSide(ms)
				f.Fix = diagnose.MeshSideFix(ws, ms, exempt)
			}
		}
		w.Findings = append(w.Findings, f)
		// What it would meet once admitted, on the injector's pod.
		w.Findings = append(w.Findings, hazards(pr.pod, c)...)
	case pr.notAsked != "":
		w.Starts = upgrade.StartsUnknown
		w.Findings = append(w.Findings, diagnose.Finding{Status: diagnose.Unknown, Evidence: "whether admission admits it is unknown: " + pr.notAsked,
			Needs: []string{"create pods (dry run) in namespace " + c.namespace}})
	default:
		w.Starts = upgrade.StartsYes
		w.Findings = append(w.Findings, hazards(pr.pod, c)...)
		if why := notReadyNow(c.pod); why != "" && !stuckJobFreed(c, w.After) {
			w.Findings = append(w.Findings, diagnose.Finding{Status: diagnose.Warning,
				Evidence: "its pod is not ready now (" + why + "): a restart under the target does not change that; kubectl mesh diagnose pod/" + c.pod.Name + " -n " + c.namespace + " says why"})
		}
		startsFrom(w)
	}
}

// startsFrom lowers a workload's answer by its findings: one that fails,
// it will not start; one that warns, it starts with a hazard.
func startsFrom(w *upgrade.Workload) {
	for _, f := range w.Findings {
		switch {
		case f.Status == diagnose.Fail:
			w.Starts = upgrade.StartsNo
		case f.Status == diagnose.Warning && w.Starts == upgrade.StartsYes:
			w.Starts = upgrade.StartsWarning
		}
	}
}

// compare compares, with a pod that has none now counted as no sidecar.
func compare(now, after *upgrade.Side) ([]upgrade.Change, int) {
	if now == nil {
		return nil, 0 // no pod now: nothing to compare with
	}
	return upgrade.Compare(now, after)
}

// restart is the command that re-creates a workload's pods.
func restart(c candidate) string {
	switch {
	case c.held != "" && c.selector != "":
		// A rollout restart replaces none of its pods: they are deleted,
		// and its controller makes them again from the template.
		return fmt.Sprintf("kubectl delete pods -n %s -l '%s'   # %s/%s: %s; its controller makes them again", c.namespace, c.selector, strings.ToLower(c.kind), c.name, c.held)
	case c.kind == "Deployment" && c.paused:
		return fmt.Sprintf("kubectl rollout resume deployment/%s -n %s && kubectl rollout restart deployment/%s -n %s   # it is paused (a paused Deployment refuses a restart): resumed first; pause it again after, if that was meant", c.name, c.namespace, c.name, c.namespace)
	}
	switch c.kind {
	case "Deployment", "StatefulSet", "DaemonSet":
		return fmt.Sprintf("kubectl rollout restart %s/%s -n %s", strings.ToLower(c.kind), c.name, c.namespace)
	case "CronJob":
		return fmt.Sprintf("# cronjob/%s -n %s: its next Job gets the new sidecar (no restart)", c.name, c.namespace)
	case "Job":
		if c.done {
			return ""
		}
		if appDone(c.pod) {
			// Its app is done, its classic sidecar keeps it running: it is
			// never done by itself.
			return injection.RecreateJob(c.name, c.namespace, nil, nil)
		}
		return fmt.Sprintf("# job/%s -n %s: a Job's pods are not restarted; re-create it through what created it once it is done", c.name, c.namespace)
	}
	if c.pod != nil && c.pod.Annotations[lastApplied] != "" {
		return fmt.Sprintf("kubectl apply view-last-applied pod/%s -n %s -o json | kubectl replace --force -n %s -f -   # a bare pod: re-created from the manifest it was applied with", c.name, c.namespace, c.namespace)
	}
	return fmt.Sprintf("# pod/%s -n %s: a bare pod; re-create it from its manifest", c.name, c.namespace)
}

// lastApplied is the annotation kubectl apply keeps the applied manifest in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// appDone: the pod's containers but istio-proxy have all terminated (a
// run-once pod's work is done) while istio-proxy still runs.
func appDone(p *corev1.Pod) bool {
	if p == nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	proxy, apps := false, 0
	for _, st := range p.Status.ContainerStatuses {
		switch {
		case st.Name == istio.ProxyContainer:
			proxy = st.State.Running != nil
		case st.State.Terminated == nil:
			return false
		default:
			apps++
		}
	}
	return proxy && apps > 0
}

// stuckJobFreed: a Job whose classic sidecar keeps its finished pod
// running, which the target gives a native sidecar (the kubelet stops it
// when the job is done): the move is its fix, not a hazard it keeps.
func stuckJobFreed(c candidate, after *upgrade.Side) bool {
	return (c.kind == "Job" || c.kind == "CronJob") && appDone(c.pod) && after != nil && after.Sidecar == "native"
}

// templateKey identifies a template with its labels after the move and the
// webhook that injects it: the workloads that share one share its proof.
func templateKey(ns, webhook string, p *corev1.Pod) string {
	b, _ := json.Marshal(struct {
		L, A map[string]string
		S    corev1.PodSpec
	}{p.Labels, p.Annotations, p.Spec})
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%s/%s/%x", ns, webhook, h.Sum64())
}

// appliedTemplate is a bare pod's template from the manifest kubectl apply
// kept on it (nil without one).
func appliedTemplate(p *corev1.Pod) *corev1.PodTemplateSpec {
	raw := p.Annotations["kubectl.kubernetes.io/last-applied-configuration"]
	if raw == "" {
		return nil
	}
	var applied corev1.Pod
	if err := json.Unmarshal([]byte(raw), &applied); err != nil {
		return nil
	}
	return &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: applied.Labels, Annotations: applied.Annotations}, Spec: applied.Spec}
}

// oneLine is an error message on one line: its escaped and real line
// breaks and runs of spaces made one space.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, `\n`, " ")), " ")
}

// notReadyNow says why a workload's current pod is not ready ("" when it
// is, or there is none, or it is a finished run-once pod).
func notReadyNow(p *corev1.Pod) string {
	if p == nil || p.Status.Phase == corev1.PodSucceeded {
		return ""
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return ""
		}
	}
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if st.State.Waiting != nil && st.State.Waiting.Reason != "" && st.State.Waiting.Reason != "PodInitializing" {
			return "container " + st.Name + ": " + st.State.Waiting.Reason
		}
	}
	return "phase " + string(p.Status.Phase)
}

// hazards are the catalogue's findings on the predicted pod, a classic
// sidecar in a run-once pod fixed on what makes it (its template asks for
// a native sidecar).
func hazards(p *corev1.Pod, c candidate) []diagnose.Finding {
	fs := diagnose.Hazards(p, c.kind)
	for i := range fs {
		native := "true"
		set := map[string]*string{"sidecar.istio.io/nativeSidecar": &native}
		if fs[i].Code == diagnose.CodeInitWaitsClassicProxy && c.kind != "" && c.kind != "Pod" && !strings.HasPrefix(fs[i].Fix, "# init container ") {
			// The predicted pod has no owner to patch: its workload's template.
			_, why, _ := strings.Cut(fs[i].Fix, "   # ")
			fs[i].Fix = injection.SetTemplateAnnotations(c.kind, c.name, c.namespace, set) + why
			continue
		}
		if fs[i].Code != "KM-START-007" {
			continue
		}
		switch c.kind {
		case "CronJob":
			fs[i].Fix = injection.SetTemplateAnnotations("CronJob", c.name, c.namespace, set) + "a native sidecar (Kubernetes 1.29+) ends with the Job's own containers"
		case "Job":
			fs[i].Fix = injection.RecreateJob(c.name, c.namespace, set, nil)
		}
	}
	return fs
}

// freedByRollout: a quota refusal that the rollout's own deletion of the
// workload's pod of now makes room for (a rollout that deletes before it
// creates, one pod at a time).
func freedByRollout(c candidate, refused string) bool {
	if !c.deletesFirst || c.pod == nil {
		return false
	}
	fits, ok := injection.QuotaFitsWithout(&c.pod.Spec, refused)
	return ok && fits
}

// selectsByRevision says a workload's pod selector reads the revision
// label.
func selectsByRevision(selector string) bool {
	sel, err := labels.Parse(selector)
	if err != nil {
		return false
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if r.Key() == istio.LabelRev {
			return true
		}
	}
	return false
}
