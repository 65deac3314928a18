package diagnose

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	corev1 "k8s.io/api/core/v1"
)

// The injection family: what admission did to the pod, and would do now
// (why-injected's verdict, its warnings, and --verify's proof), one code
// per cause.
const (
	CodeSidecarMissing     = "KM-INJ-001"
	CodeInjectedDifferent  = "KM-INJ-002"
	CodeConflictingLabels  = "KM-INJ-003"
	CodeWebhookUnreachable = "KM-INJ-004"
	CodeOverlapping        = "KM-INJ-005"
	CodeAnnotationRefused  = "KM-INJ-007"
	CodeSkippedByInjector  = "KM-INJ-009"
	CodeAskedNotDone       = "KM-INJ-010"
	CodeQuota              = "KM-INJ-011"
	CodePodSecurity        = "KM-INJ-012"
)

// fromReport are the codes whose findings why-injected's report makes
// (its verdict, warnings and fix): the rest come from checks of their own.
var fromReport = map[string]bool{}

// FromReport says a code's finding is made from the injection report
// (why-injected's own answer, with its own fix).
func FromReport(code string) bool { return fromReport[code] }

func init() {
	decision := func(code string) func(in *Input) []Finding {
		fromReport[code] = true
		return func(in *Input) []Finding { return only(in.injection().findings, code) }
	}
	reads := []Fact{FactPod, FactMesh, FactBackends, FactOwner}
	register(&Spec{Code: CodeSidecarMissing, Title: "no sidecar; re-created, it would get one", Stage: CheckInjection, Kind: Static, Status: Fail,
		Istioctl: []string{"IST0103"}, Reads: reads,
		Means:   "The pod has no sidecar, but admission would inject one into the same pod created now: it was created before its namespace was labelled, while the webhook failed open, or before a revision was installed. Its traffic is outside the mesh.",
		Detects: "why-injected's model of the webhooks, namespace labels and injector policy says a pod created now is injected, and the pod has no istio-proxy container; with --verify, a server-side dry-run create proves it.",
		Fixes:   "Re-create the pod so that admission decides again (kubectl rollout restart of its workload).",
		Source:  "istioctl analyze IST0103; Istio docs, sidecar injection problems",
		Planted: "a Deployment created in an unlabelled namespace, then the namespace labelled istio-injection=enabled",
		run:     decision(CodeSidecarMissing)})
	register(&Spec{Code: CodeInjectedDifferent, Title: "sidecar differs from what admission gives now", Stage: CheckInjection, Kind: Static, Status: Fail,
		Istioctl: []string{"IST0158"}, Reads: reads,
		Means:   "The pod's sidecar came from another revision (or the pod would get none now): a revision moved, a tag was re-pointed, or the namespace was relabelled after the pod was created.",
		Detects: "The sidecar.istio.io/status annotation's revision against the revision whose webhook matches the pod now.",
		Fixes:   "Re-create the pod so that the revision now in charge injects it.",
		Source:  "istioctl analyze IST0158 (proxy image differs from the namespace's revision)",
		Planted: "a pod injected by revision canary, then its namespace relabelled to the default revision",
		run:     decision(CodeInjectedDifferent)})
	register(&Spec{Code: CodeConflictingLabels, Title: "conflicting mesh labels", Stage: CheckInjection, Kind: Static, Status: Warning,
		Istioctl: []string{"IST0123"}, Reads: reads,
		Means:   "The namespace has both istio-injection and istio.io/rev (istio-injection wins, the revision is ignored), or the pod is selected both for ambient mode and a sidecar.",
		Detects: "The namespace's labels and the pod's, read as the webhooks' selectors read them.",
		Fixes:   "Remove the label that is not meant (kubectl label namespace NS istio.io/rev-), then re-create the pods.",
		Source:  "istioctl analyze IST0123; Istio docs, sidecar injection problems",
		Planted: "a namespace labelled istio-injection=enabled and istio.io/rev=canary",
		run:     decision(CodeConflictingLabels)})
	register(&Spec{Code: CodeWebhookUnreachable, Title: "injection webhook cannot be called", Stage: CheckInjection, Kind: Static, Status: Fail,
		Istioctl: []string{"IST0139"}, Reads: reads,
		Means:   "An Istio injection webhook that matches the pod cannot be called (its Service is missing or has no ready endpoints, the call fails or times out): with failurePolicy Fail the apiserver refuses every pod.",
		Detects: "The webhook's Service and EndpointSlices, and the owner's FailedCreate events naming an Istio webhook.",
		Fixes:   "Bring the injector's endpoints back (its Deployment's pods and logs), or delete a stale webhook configuration.",
		Source:  "istioctl analyze IST0139; Istio docs, sidecar injection problems (pods cannot be created at all)",
		Planted: "an extra MutatingWebhookConfiguration, failurePolicy Fail, scoped to a test namespace label, calling a Service with no endpoints",
		run:     decision(CodeWebhookUnreachable)})
	register(&Spec{Code: CodeOverlapping, Title: "two Istio webhooks match the pod", Stage: CheckInjection, Kind: Static, Status: Warning,
		Istioctl: []string{"IST0139"}, Reads: reads,
		Means:   "More than one Istio injection webhook matches the pod: each injects in turn, a misconfiguration left by tags or revisions.",
		Detects: "Every Istio webhook's namespaceSelector and objectSelector against the pod's namespace and labels.",
		Fixes:   "istioctl tag list; remove the duplicate tag or webhook configuration.",
		Source:  "istioctl analyze IST0139 (webhooks overlap)",
		Planted: "an extra MutatingWebhookConfiguration with Istio's selectors plus a test label, failurePolicy Ignore",
		run:     decision(CodeOverlapping)})
	register(&Spec{Code: CodeAnnotationRefused, Title: "istiod refuses the pod at admission", Stage: CheckInjection, Kind: Static, Status: Fail,
		Istioctl: []string{"IST0125"}, Reads: reads,
		Means:   "istiod's injector refuses an annotation's value (a CIDR, a port list, an interception mode) or a template asked for: with failurePolicy Fail no pod of the template is created.",
		Detects: "The annotations istiod validates, checked as istiod checks them, and the owner's FailedCreate events.",
		Fixes:   "Correct or remove the annotation in the pod template (a kubectl patch that names it).",
		Source:  "istioctl analyze IST0125 InvalidAnnotation",
		Planted: "a Deployment with traffic.sidecar.istio.io/excludeOutboundIPRanges: 10.0.0.0/33",
		run:     decision(CodeAnnotationRefused)})
	register(&Spec{Code: CodeSkippedByInjector, Title: "asks for a sidecar istiod never injects", Stage: CheckInjection, Kind: Static, Status: Warning,
		Reads:   reads,
		Means:   "The pod asks for a sidecar (label sidecar.istio.io/inject=true, or its namespace's label), but istiod never injects it: it uses the node's network (hostNetwork), or its namespace is one the injector ignores.",
		Detects: "spec.hostNetwork and the injector's ignored namespaces, against what the pod asks for.",
		Fixes:   "Drop hostNetwork, or run the workload in another namespace; otherwise accept that it is outside the mesh.",
		Source:  "Istio docs, sidecar injection (hostNetwork pods and kube-system are never injected)",
		Planted: "a hostNetwork pod labelled sidecar.istio.io/inject=true",
		run:     decision(CodeSkippedByInjector)})
	register(&Spec{Code: CodeAskedNotDone, Title: "injection asked for, not done", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   reads,
		Means:   "The pod or its namespace asks for injection, but no webhook injects it: the annotation instead of the label, a label value webhooks do not match (\"yes\", istio-injection=true), a pod label its namespace's label overrules, an istio.io/rev naming no revision: a mistake, so it fails (a pod that asked for a sidecar runs without one). Where the injector's own policy or ambient mode's conditions decide instead, it only warns.",
		Detects: "The webhooks' selectors and the injector's policy and selectors, as istiod applies them.",
		Fixes:   "Label the pod sidecar.istio.io/inject=true, or correct the label that does not select a webhook (why-injected names it); an istio.io/rev naming no revision is set to a revision or tag that exists (the finding lists them), never left beside istio-injection=enabled.",
		Source:  "Istio docs, sidecar injection problems (check the default policy)",
		Planted: "a pod with the annotation (not the label) sidecar.istio.io/inject=true in a namespace without injection labels",
		run:     decision(CodeAskedNotDone)})
	register(&Spec{Code: CodeQuota, Title: "a quota refuses the pods with their sidecar", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   reads,
		Means:   "A ResourceQuota or LimitRange refuses the pods once the sidecar's requests and limits are added (or because the Istio containers have none): the workload's pods are never created.",
		Detects: "The owner's FailedCreate events (exceeded quota, must specify limits) on a template that gets a sidecar.",
		Fixes:   "Size the sidecar with sidecar.istio.io/proxyCPU(Limit) and proxyMemory(Limit) annotations in the template, or raise the quota.",
		Source:  "istio/istio issues on namespaces with ResourceQuota and LimitRange (pods not coming up once injection is on)",
		Planted: "an injection-enabled namespace with a ResourceQuota limits.memory below the sidecar's limit",
		run:     decision(CodeQuota)})
	register(&Spec{Code: CodePodSecurity, Title: "PodSecurity refuses istio-init", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   reads,
		Means:   "Pod Security admission refuses istio-init's NET_ADMIN and NET_RAW capabilities (baseline or restricted level): the workload's pods are never created.",
		Detects: "The owner's FailedCreate events: violates PodSecurity, naming an Istio container.",
		Fixes:   "Label the namespace pod-security.kubernetes.io/enforce=privileged, or install Istio with its CNI plugin (no istio-init).",
		Source:  "Istio docs, application requirements (NET_ADMIN and NET_RAW); istio/istio issues on PodSecurity",
		Planted: "an injection-enabled namespace labelled pod-security.kubernetes.io/enforce=baseline",
		run:     decision(CodePodSecurity)})
}

// blockedCodes are the codes of the refusals whose checks say so in their
// own files.
var blockedCodes = map[string]string{}

// blockedCode is the code of what refuses a pod's creation.
func blockedCode(by string) string {
	if code, ok := blockedCodes[by]; ok {
		return code
	}
	switch by {
	case injection.BlockedAnnotation, injection.BlockedTemplate:
		return CodeAnnotationRefused
	case injection.BlockedQuota:
		return CodeQuota
	case injection.BlockedPodSecurity:
		return CodePodSecurity
	}
	return CodeWebhookUnreachable
}

// warningCode is the code of an injection warning's kind ("" for one that
// is another stage's).
func warningCode(r *injection.InjectionReport, kind string) string {
	switch kind {
	case injection.WarnConflictingLabels, injection.WarnAmbientAndSidecar:
		return CodeConflictingLabels
	case injection.WarnOverlapping:
		return CodeOverlapping
	case injection.WarnInitFailure:
		return ""
	case injection.WarnInjectorSkips:
		return CodeSkippedByInjector
	case injection.WarnAskedNotDone:
		for _, f := range r.Factors {
			if f.Effect == injection.EffectBlocks && (f.Factor == "hostNetwork" || f.Factor == "ignored namespace") {
				return CodeSkippedByInjector
			}
		}
	}
	return CodeAskedNotDone
}

// injection is the injection stage: why-injected's verdict, its warnings
// (each a finding of its own), --verify's proof.
func (in *Input) injection() *stageAnswer {
	if in.inj != nil {
		return in.inj
	}
	a := &stageAnswer{}
	in.inj = a
	r := in.Injection
	c := Check{Name: CheckInjection, Detail: "kubectl mesh why-injected " + in.Target}
	if r == nil {
		c.Status, c.Evidence = NotChecked, "not checked: not read"
		a.row = c
		return a
	}
	var warned []Finding
	refusedMesh := "" // what of the mesh a refusal of the template's pods is about
	for i, w := range r.Warnings {
		kind := ""
		if i < len(r.WarningKinds) {
			kind = r.WarningKinds[i]
		}
		if code := warningCode(r, kind); code != "" {
			status := Warning
			if kind == injection.WarnAskedNotDone && code == CodeAskedNotDone {
				// The pod (or its namespace) asks for a sidecar with a label
				// no webhook reads as asked: a mistake, not a choice.
				status = Fail
			}
			f := Finding{Code: code, Status: status, Evidence: w, Fix: warningFix(r, code, in.Target)}
			if kind == injection.WarnAmbientAndSidecar {
				f.Fix = ambientSidecarFix(in, r)
			}
			if code == CodeSkippedByInjector {
				hostNetworkFix(in, &f)
			}
			warned = append(warned, f)
		}
	}
	switch {
	case r.Ambient && (r.AmbientCapture == injection.AmbientPending || r.AmbientCapture == injection.AmbientNotSetUp):
		// Enrolled as it should be: its setup failed, which init, start or
		// capture says.
		c.Status, c.Evidence = Pass, "ambient mode enrolls it (no sidecar, none expected)"
	case r.CreationBlocked:
		c.Status, c.Evidence, c.Fix, c.Code = Fail, r.Verdict, r.Fix, blockedCode(r.BlockedBy)
		if rb := r.RefusedBy; rb != nil && rb.MeshSide != nil && rb.WithoutSidecar == "admitted" {
			// The dry runs proved which part it refuses, and the mesh's
			// knob it admits: that is the fix, the exemption the other way.
			w := &WorkloadState{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
			if rb.OwnerKind != "" && rb.OwnerKind != "Pod" {
				w.Kind, w.Name = rb.OwnerKind, rb.OwnerName
			}
			if in.Workload != nil {
				w = in.Workload
			}
			c.Evidence += "; " + ProvedMeshSide(rb.MeshSide)
			c.Fix = MeshSideFix(w, rb.MeshSide, r.Fix)
			refusedMesh = rb.MeshSide.What
		}
	case r.RefusedBy != nil && in.Workload == nil && in.Pod == nil && r.Kind != "Pod" && len(in.Files) == 0:
		// A live template whose pods admission refuses now, read without
		// its workload's state (why-injected): diagnose's answer for the
		// workload, from the same refusal.
		w := &WorkloadState{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		if r.RefusedBy.OwnerKind != "" && r.RefusedBy.OwnerKind != "Pod" {
			w.Kind, w.Name = r.RefusedBy.OwnerKind, r.RefusedBy.OwnerName
		}
		ev, mesh, fix := refusalAnswer(w, r, r.RefusedBy.Message)
		c.Status, c.Code, c.Fix = Fail, CodeWorkloadShort, fix
		c.Evidence = "its pods are refused at admission: " + oneLine(r.RefusedBy.Message, 300) + ev
		if fix == "" {
			c.Fix = "kubectl describe " + strings.ToLower(r.Kind) + "/" + r.Name + " -n " + r.Namespace + "   # its conditions and events say why its pods are missing"
		}
		refusedMesh = mesh
	case r.IsMismatch() && len(imageAuto(in)) > 0:
		// Its istio-proxy container is not a sidecar: KM-INJ-006 says what it is.
		c.Status, c.Evidence, c.Code = Pass, "no injector processed the pod", ""
	case r.IsMismatch():
		c.Status, c.Evidence, c.Fix, c.Code = Fail, r.Verdict, r.Fix, CodeSidecarMissing
		if r.Injected != nil && *r.Injected {
			c.Code = CodeInjectedDifferent
		}
		if r.FailedOpen {
			c.Code = CodeWebhookUnreachable // the webhook did not answer: the cause, not the symptom
		} else if why, fix := in.superseded(); why != "" {
			// The rollout in progress replaces it: what stops that
			// rollout is the newer pod's finding, not this one's.
			c.Status, c.Evidence, c.Fix = Warning, c.Evidence+" "+why, fix
		}
	case r.Expected == nil || r.AmbientCapture == injection.EffectUnknown:
		c.Status, c.Evidence, c.Needs, c.Code = Unknown, r.Verdict, r.Needs, CodeSidecarMissing
	case len(warned) > 0:
		var ws []string
		for _, w := range warned {
			ws = append(ws, w.Evidence)
		}
		c.Status, c.Evidence, c.Fix, c.Code = Warning, r.Verdict+" ("+strings.Join(ws, "; ")+")", r.Fix, warned[0].Code
		for _, w := range warned {
			if w.Status == Fail {
				c.Status, c.Code = Fail, w.Code
				break
			}
		}
		if c.Fix == "" {
			c.Fix = warned[0].Fix
		}
	default:
		c.Status, c.Evidence = Pass, r.Verdict
	}
	proof(&c, r)
	if v := r.Verified; v != nil && v.Condition && refusedMesh == "" {
		refusedMesh = "the matchCondition of " + v.RefusedBy
	}
	if len(in.Files) > 0 && r.Kind == "Pod" && strings.HasPrefix(c.Fix, "in the pod's manifest, set ") {
		// A pod of a manifest: the file applied with the proved change.
		if fix := fileMeshSideFix(in.Files, r); fix != "" {
			_, rest, _ := strings.Cut(c.Fix, "\n")
			c.Fix = strings.TrimSuffix(fix+"\n"+rest, "\n")
		}
	}
	if len(in.Files) > 0 && c.Status == Fail && strings.HasPrefix(c.Fix, "kubectl ") && !strings.HasPrefix(c.Fix, "kubectl annotate --local") {
		// A manifest: once admission lets it in, it is created.
		// A workload not created yet has no pods to re-create: its
		// retries' lines go.
		lines := strings.Split(c.Fix, "\n")
		apply := "kubectl apply -f " + strings.Join(in.Files, " -f ") + " -n " + r.Namespace
		fix := []string{lines[0], "sleep 3; " + apply + "   # then create it (admission reads the change within seconds)"}
		if relabel := fileRelabel(lines[0], r, in.Files); relabel != nil {
			fix = relabel
		}
		if self := strings.ToLower(r.Kind) + "/" + r.Name; strings.HasPrefix(lines[0], "kubectl patch "+self+" ") || strings.HasPrefix(lines[0], "kubectl get "+strings.ToLower(r.Kind)+" "+r.Name+" ") {
			// The fix changes the object the manifest makes: made first,
			// then changed (change the file too).
			fix = []string{apply + "   # creates it; its pods are refused until the next line changes it (change the file the same way)", lines[0]}
		}
		for _, l := range lines[1:] {
			if !strings.Contains(l, "kubectl rollout restart") && !strings.Contains(l, "kubectl delete pod") {
				fix = append(fix, l)
			}
		}
		c.Fix = strings.Join(fix, "\n")
	}
	a.row = c
	if c.Status != Pass && c.Code != "" && (len(warned) == 0 || refusedMesh != "") {
		a.findings = append(a.findings, Finding{Code: c.Code, Status: c.Status, Evidence: c.Evidence, Fix: c.Fix, Needs: c.Needs, Mesh: refusedMesh})
	}
	a.findings = append(a.findings, warned...)
	return a
}

// proof adds --verify's dry-run create to the injection check: it agrees,
// it answers where the prediction could not, or it disagrees (then the
// apiserver is right, and the prediction is a bug to report).
func proof(c *Check, r *injection.InjectionReport) {
	v := r.Verified
	switch {
	case r.NotVerified != "":
		c.Evidence += " (not verified: " + r.NotVerified + ")"
	case v == nil:
	case v.FailedOpen != "":
		c.Status, c.Code, c.Needs = Fail, CodeWebhookUnreachable, nil
		c.Evidence = "a dry-run create now: " + v.Summary() + "; pods created while it does not answer get no sidecar"
		c.Fix = r.FailOpenFix + "\n" + "# then re-create the pods (a rollout restart of their workload) once a dry run shows the sidecar: " + c.Detail + " --verify"
		if r.FailedOpen {
			c.Fix = r.Fix // the same three steps as without --verify
		}
	case v.Agrees != nil && *v.Agrees:
		c.Evidence += "; a dry-run create through the real admission chain agrees: " + v.Summary()
	case v.Refused:
		c.Status, c.Evidence = Fail, "a dry-run create was refused: "+v.Summary()
		if v.BlockedBy != "" || v.RefusedBy != "" {
			c.Code = blockedCode(v.BlockedBy)
			if v.BlockedBy == "" {
				c.Code = CodeWorkloadShort // the platform's own refusal
				c.Evidence += "; refused by " + v.RefusedBy
			}
			if v.Fix != "" {
				c.Fix = v.Fix
			}
			if v.BlockedBy == "" && v.WithoutSidecar == "admitted" {
				// Proved: without what the injector adds it is admitted.
				c.Code = CodePolicyRefused
				c.Evidence += "; the same pod without the sidecar is admitted (a dry-run create labelled sidecar.istio.io/inject=false): it is what Istio's injector adds (its containers, volumes or their settings) that " + v.RefusedBy + " refuses"
				w := &WorkloadState{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
				if v.Fix != "" {
					c.Fix = v.Fix + "\n" + meshSideOfRefusal(w, v.Message)
				}
				if ms := v.MeshSide; ms != nil {
					c.Evidence += "; " + ProvedMeshSide(ms)
					c.Fix = MeshSideFix(w, ms, v.Fix)
				}
			}
			if ms := v.MeshSide; v.BlockedBy != "" && ms != nil && v.WithoutSidecar == "admitted" {
				// A policy refusing a part the injector adds: the knob the
				// dry runs proved admitted.
				c.Evidence += "; " + ProvedMeshSide(ms)
				c.Fix = MeshSideFix(&WorkloadState{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}, ms, v.Fix)
			}
		} else if kind := injection.RefusalOf(v.Summary()); kind != "" {
			c.Code = blockedCode(kind)
		} else if c.Code == "" || c.Code == CodeSidecarMissing {
			c.Code = CodeWebhookUnreachable
		}
		if c.Fix == "" {
			c.Fix = "see what refuses it: " + c.Detail + " --verify"
		}
	case v.Agrees == nil && r.Injected != nil:
		// The prediction could not be made: the proof answers, compared
		// with what the pod has (sidecar or not, revision, kind).
		rev := r.InjectedRevision
		if rev == "" {
			rev = r.Revision
		}
		same := *r.Injected == v.Injected
		switch {
		case !same || v.Injected && v.Revision != "" && rev != "" && v.Revision != rev:
			has := "the pod has no sidecar"
			c.Code = CodeSidecarMissing
			if *r.Injected {
				has = "the pod has a sidecar of revision " + dashed(rev)
				c.Code = CodeInjectedDifferent
			}
			c.Status, c.Needs = Fail, nil
			c.Evidence = has + ", but a dry-run create now: " + v.Summary() + ": re-created, it would get that"
			c.Fix = "re-create the pod so that admission decides again: kubectl rollout restart its Deployment, StatefulSet or DaemonSet, or delete the pod when a controller creates it again"
		case v.Injected && v.Sidecar != "" && r.Sidecar != "" && v.Sidecar != r.Sidecar:
			c.Status, c.Needs, c.Code = Warning, nil, CodeInjectedDifferent
			c.Evidence = "the pod has a " + r.Sidecar + " sidecar; a dry-run create now: " + v.Summary()
		default:
			c.Status, c.Evidence, c.Needs, c.Code = Pass, "a dry-run create now gives what the pod has: "+v.Summary(), nil, ""
		}
	case v.Agrees == nil:
		c.Evidence += "; a dry-run create: " + v.Summary()
	default:
		c.Status, c.Code = Unknown, CodeSidecarMissing
		c.Evidence = "the prediction and a dry-run create disagree (" + v.Disagreement + "): a bug in kubectl-mesh's model of the mesh; the dry run's answer: " + v.Summary()
	}
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// warningFix is the fix of an injection warning: why-injected's, else what
// the warning's cause calls for.
func warningFix(r *injection.InjectionReport, code, target string) string {
	if r.Fix != "" {
		return r.Fix
	}
	switch code {
	case CodeConflictingLabels:
		return "kubectl label namespace " + r.Namespace + " istio-injection-   # istio.io/rev then selects its revision (or remove istio.io/rev to keep istio-injection); then re-create the pods"
	case CodeOverlapping:
		return "istioctl tag list; kubectl get mutatingwebhookconfigurations   # remove the duplicate tag or webhook configuration"
	}
	return "kubectl mesh why-injected " + target + "   # the factor that decides it, and what to change"
}

// hostNetworkFix gives a hostNetwork pod that asks for a sidecar both ways
// out, each a command: off the node's network (it is then injected), or
// labelled as meant to be outside the mesh. A pod whose own label asks for
// the sidecar fails: it runs without what it asked for.
func hostNetworkFix(in *Input, f *Finding) {
	p := in.Pod
	if p == nil || !p.Spec.HostNetwork {
		return
	}
	owner := templateOwner(p)
	if strings.HasPrefix(owner, "replicaset/") {
		return
	}
	if p.Labels[istio.KeyInject] == "true" || p.Labels[istio.LabelRev] != "" {
		f.Status = Fail
		f.Evidence += "; the pod's own label asks for the sidecar, and it runs without it"
	}
	drop := overridePatch(in, owner, fmt.Sprintf(`[{"op":"remove","path":"/spec/%shostNetwork"}]`, jobPath(owner)), "the pod leaves the node's network and gets the sidecar")
	optOut := specFixLabel(p, owner, istio.KeyInject, "false")
	if f.Status == Fail {
		f.Fix = drop + "\n# or, if it is meant to be outside the mesh (a node agent), say so: " + optOut
		return
	}
	// Only its namespace asks: most such pods are node agents.
	f.Fix = optOut + "   # it is meant to be outside the mesh (a node agent): say so\n# or, if it is to be in the mesh: " + drop
}

// specFixLabel sets a label on the pod's template.
func specFixLabel(p *corev1.Pod, owner, key, value string) string {
	return specFixLabels(p, owner, key, &value)
}

// specFixLabels sets a label on the pod's template, or removes it (nil).
func specFixLabels(p *corev1.Pod, owner, key string, value *string) string {
	v, said := "null", "remove the label "+key
	if value != nil {
		v, said = strconv.Quote(*value), fmt.Sprintf("set the label %s: %q", key, *value)
	}
	labels := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, v)
	switch {
	case owner == "":
		if cmd := recreateBarePod(p, "", "merge", labels); cmd != "" {
			return cmd
		}
		return "in the pod's manifest, " + said + ", then re-create the pod"
	case strings.HasPrefix(owner, "job/"):
		return injection.RecreateJob(strings.TrimPrefix(owner, "job/"), p.Namespace, nil, map[string]*string{key: value})
	}
	return fmt.Sprintf(`kubectl patch %s -n %s --type=merge -p '{"spec":{"template":%s}}'`, owner, p.Namespace, labels) + replacePod(p, owner)
}

// ambientSidecarFix answers a pod with a sidecar that ambient mode also
// selects, by where that comes from: the pod's own istio.io/dataplane-mode
// label is taken off its template (it keeps its sidecar), or, the other
// way, the sidecar is opted out; selected by its namespace, the sidecar is
// the pod's own choice, which ambient leaves alone.
func ambientSidecarFix(in *Input, r *injection.InjectionReport) string {
	p := in.Pod
	if p == nil {
		return "kubectl mesh why-injected " + in.Target + "   # which label asks for ambient mode and which for the sidecar: keep one"
	}
	owner := templateOwner(p)
	optOut := specFixLabel(p, owner, istio.KeyInject, "false")
	if v, ok := p.Labels[istio.LabelDataplaneMode]; ok {
		return specFixLabels(p, owner, istio.LabelDataplaneMode, nil) + "   # a choice: its label " + istio.LabelDataplaneMode + "=" + v + " off its template; it keeps its sidecar, which is what serves it now (ambient does not capture a pod with one)" +
			"\n# or, for ambient mode instead of the sidecar: " + optOut
	}
	return "# nothing to change if the sidecar is meant: ambient mode, which its namespace selects, leaves a pod with a sidecar to it\n# for ambient mode instead: " + optOut
}
