package injection

import (
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Effects a factor can have on injection.
const (
	EffectInject   = "inject"    // this factor makes the pod injected
	EffectSkip     = "skip"      // this factor makes the injector skip the pod
	EffectNone     = "no effect" // present, but it does not change the outcome
	EffectBlocks   = "blocks"    // this factor prevents injection (or pod creation) whatever else says
	EffectUnknown  = "unknown"   // the fact could not be read
	EffectWarning  = "warning"   // does not decide, but is likely a mistake
	EffectInfoOnly = "info"      // context for the verdict
)

// Factor is one row of the factor table: something that was found, what it
// does to injection, and where it was found.
type Factor struct {
	Factor string `json:"factor"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
	Source string `json:"source"`
}

// ClusterFacts is what inspect/ reads once for a whole run: the mesh's
// control-plane objects and the namespaces. Maps are keyed by name, or by
// "namespace/name".
type ClusterFacts struct {
	Webhooks []admissionregistrationv1.MutatingWebhookConfiguration
	// ValidatingWebhooks are the cluster's validating webhook
	// configurations, read to say which one refused a pod;
	// ValidatingWebhooksUnknown says why they could not be read.
	ValidatingWebhooks        []admissionregistrationv1.ValidatingWebhookConfiguration
	ValidatingWebhooksUnknown string
	// PolicyBindings are the ValidatingAdmissionPolicyBindings, read to
	// exempt a namespace from the one a refusal names.
	PolicyBindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// FileAdmission names the manifest (-f) each of PolicyBindings and
	// ValidatingPolicies comes from, by kind/name, when the manifest
	// declares it and the cluster does not have it yet: a dry run cannot
	// evaluate it before it is applied.
	FileAdmission map[string]string
	// ValidatingPolicies are the ValidatingAdmissionPolicies, read (for a
	// manifest, when a binding exists) to tell which bindings act on its
	// pods; nil when not read, ValidatingPoliciesUnknown says why they
	// could not be.
	ValidatingPolicies        []admissionregistrationv1.ValidatingAdmissionPolicy
	ValidatingPoliciesUnknown string
	// MutatingPolicyBindings are the MutatingAdmissionPolicyBindings, read
	// to name what else rewrites an injected pod at admission;
	// MutatingPolicyBindingsUnknown says why they could not be read (then
	// no verdict changes: they are only not named).
	MutatingPolicyBindings        []admissionregistrationv1.MutatingAdmissionPolicyBinding
	MutatingPolicyBindingsUnknown string
	// Namespaces present in the cluster, by name.
	Namespaces map[string]*corev1.Namespace
	// NamespacesAbsent are namespaces a GET found missing, when listing
	// namespaces was forbidden and only the ones needed were read one by one.
	NamespacesAbsent map[string]bool
	// NamespacesByGet is set when the namespaces were read one by one (the
	// list was forbidden): only the namespaces a command needed are known.
	NamespacesByGet bool
	// ConfigMaps that may be mesh injector configurations, or istio-cni's
	// (ambient mode's), by "namespace/name".
	ConfigMaps map[string]*corev1.ConfigMap
	// AmbientAgents are the pods of ambient mode's node agents (istio-cni's
	// and ztunnel's: AmbientCNISelector, AmbientZtunnelSelector), read when
	// istio-cni's ambient mode is on.
	AmbientAgents []corev1.Pod
	// Services that webhooks call, by "namespace/name".
	Services map[string]*corev1.Service
	// EndpointSlices by "namespace/service".
	EndpointSlices map[string][]discoveryv1.EndpointSlice
	// ControlPlanes are the mesh's control-plane Deployments (istiod), whose
	// images tell the mesh version.
	ControlPlanes []appsv1.Deployment
	// KubeletVersions of the cluster's nodes.
	KubeletVersions map[string]string
	// NodeAllocatable is what each node can give its pods (read with the
	// kubelet versions, from the same list).
	NodeAllocatable map[string]corev1.ResourceList
	// LimitRanges are the LimitRanges of the namespaces whose refusals
	// cite one (read then, once per namespace: CitesLimitRange);
	// LimitRangesUnknown says, by namespace, why they could not be read.
	LimitRanges        map[string][]corev1.LimitRange
	LimitRangesUnknown map[string]string
	// Unknown names the facts that could not be read and why, e.g.
	// "webhooks" → "forbidden: list mutatingwebhookconfigurations.admissionregistration.k8s.io".
	Unknown map[string]string

	// istio caches what the Istio model derives from these facts; facts
	// must not change once Explain has seen them.
	istio *istioModel
}

// Fact kinds, the keys of ClusterFacts.Unknown.
const (
	FactWebhooks       = "webhooks"
	FactNamespaces     = "namespaces"
	FactConfigMaps     = "configmaps"
	FactServices       = "services"
	FactEndpointSlices = "endpointslices"
	FactControlPlanes  = "deployments"
	FactNodes          = "nodes"
	FactEvents         = "events"
	FactAmbientAgents  = "ambient node agents"
)

// NamespaceSource tells where a workload's namespace labels came from.
const (
	NamespaceFromCluster = "cluster"
	NamespaceFromFile    = "file"
	NamespaceMissing     = "missing"
)

// Workload is one thing to explain: a live pod, or a pod template (of a
// workload in the cluster or in a manifest).
type Workload struct {
	// Kind is "Pod" or the kind owning the template (Deployment, …).
	Kind      string
	Namespace string
	Name      string
	// Labels, Annotations and Spec are the pod's, or the template's.
	Labels      map[string]string
	Annotations map[string]string
	Spec        corev1.PodSpec
	// Pod is set for a live pod: what happened to it is read from it.
	Pod *corev1.Pod
	// NamespaceSource is one of NamespaceFromCluster, NamespaceFromFile, NamespaceMissing.
	NamespaceSource string
	// Manifest is set for a pod or template read from a file, not created
	// yet: what admission will do to it is only modelled.
	Manifest bool
	// NamespaceLabels, when NamespaceSource is "file", are the labels the
	// manifest gives the namespace.
	NamespaceLabels map[string]string
	// Owner is the workload that re-creates the pod (Deployment, StatefulSet,
	// …), used for the fix ("kubectl rollout restart").
	Owner *Owner
	// Events are FailedCreate events on the owner, newest first.
	Events []corev1.Event
}

// Mutator is an admission mutator other than Istio's injector that acts
// on a pod's creation.
type Mutator struct {
	// By names it as kubectl does: "MutatingWebhookConfiguration NAME
	// (webhook WEBHOOK)", "MutatingAdmissionPolicyBinding NAME (policy
	// POLICY)".
	By string `json:"by"`
	// Exempt is the command that takes the pod's namespace out of its
	// namespaceSelector.
	Exempt string `json:"exempt,omitempty"`
}

// Owner is the controller that creates a pod.
type Owner struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// InjectionReport is the answer for one workload.
type InjectionReport struct {
	// Kind is the workload's kind: Pod, or the kind owning a template.
	Kind      string `json:"workloadKind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Mesh      string `json:"mesh"`
	// Injected is what happened (a live pod); null for a template.
	Injected *bool `json:"injected"`
	// Expected is whether it would be injected if created now; null when a
	// fact it depends on could not be read (see Needs).
	Expected *bool `json:"expected"`
	// Revision is the mesh revision that would inject it (or did, when not expected).
	Revision string `json:"revision"`
	// InjectedRevision is the revision that injected the live pod.
	InjectedRevision string `json:"injectedRevision,omitempty"`
	// Webhook is "<configuration>/<webhook>" that would inject it, or "".
	Webhook string `json:"webhook"`
	// Sidecar is "native", "classic" or "" (how the proxy is, or would be, added).
	Sidecar string `json:"sidecar,omitempty"`
	// Ambient is set when ambient mode enrolls the pod (or would enroll
	// pods of the template) instead of giving it a sidecar.
	Ambient bool `json:"ambient,omitempty"`
	// AmbientCapture is what became of an enrolled pod: "captured",
	// "pending" (ztunnel has not taken it), "not set up"; "will be
	// captured" for a template; "unknown" when what decides it could not be
	// read.
	AmbientCapture string `json:"ambientCapture,omitempty"`
	// WorkloadOnlyLabels are, for a manifest's workload, the injection
	// labels (sidecar.istio.io/inject, istio.io/rev) on its own metadata
	// that its pod template lacks: no webhook reads them there.
	WorkloadOnlyLabels map[string]string `json:"-"`
	// FileNamespaceLabels are the labels a manifest (-f) gives the
	// namespace it declares for the report's object (nil when it declares
	// none): a fix that relabels the namespace must not be undone by
	// applying the file.
	FileNamespaceLabels map[string]string `json:"-"`
	// Nodes is what each node can give its pods (ClusterFacts'
	// NodeAllocatable), nil when the nodes could not be read.
	Nodes map[string]corev1.ResourceList `json:"-"`
	// OverlapExtra are, when more than one Istio webhook matches, the
	// configurations of those not of the revision the labels select.
	OverlapExtra []string `json:"-"`
	// Template is, for a manifest's pod or workload (-f), the pod template
	// it was explained from.
	Template *corev1.PodTemplateSpec `json:"-"`
	// CreationBlocked is set when the pod cannot be created at all (a webhook
	// with failurePolicy Fail cannot be reached, or rejects it).
	CreationBlocked bool `json:"creationBlocked,omitempty"`
	// BlockedBy says what refuses it (Blocked* constants) when CreationBlocked.
	BlockedBy string   `json:"blockedBy,omitempty"`
	Factors   []Factor `json:"factors"`
	Verdict   string   `json:"verdict"`
	// Reason is the verdict in a few words, for one-row-per-pod tables.
	Reason string `json:"reason"`
	Fix    string `json:"fix"`
	// Mismatch is set when a live pod's state differs from what it would get
	// now; null when that is unknown.
	Mismatch *bool    `json:"mismatch"`
	Warnings []string `json:"warnings,omitempty"`
	// WarningKinds are the Warnings' kinds (Warn* constants), one each.
	WarningKinds []string `json:"-"`
	// Needs, when the verdict is unknown, names each permission (verb,
	// resource, scope) that would settle it, e.g.
	// "list mutatingwebhookconfigurations.admissionregistration.k8s.io (cluster-wide)".
	Needs []string `json:"needs,omitempty"`
	// Incomplete names the facts that could not be read; the verdict may be wrong.
	Incomplete []string `json:"incomplete,omitempty"`
	// Verified is admission's answer for the pod created now (--verify).
	Verified *Verification `json:"verified,omitempty"`
	// InitFailure says how istio-init will fail on what istiod admits (an
	// annotation it does not check), when it will.
	InitFailure string `json:"initFailure,omitempty"`
	// FailOpenWebhook names the Istio webhook that injects the pod when it
	// has failurePolicy Ignore (a pod is then created without a sidecar when
	// it does not answer), and FailOpenFix what makes injection work again
	// while it does not.
	FailOpenWebhook string `json:"failOpenWebhook,omitempty"`
	FailOpenFix     string `json:"failOpenFix,omitempty"`
	// FailedOpen: the live pod has no sidecar because that webhook did not
	// answer when it was created (it selected the pod already).
	FailedOpen bool `json:"failedOpen,omitempty"`
	// RefusedBy is what refuses the pods when it is not the mesh (another
	// webhook, an admission policy), named by what acted on them.
	RefusedBy *Refusal `json:"refusedBy,omitempty"`
	// NotVerified says why --verify has no proof for this report.
	NotVerified string `json:"notVerified,omitempty"`
	// OtherMutators are the admission mutators other than Istio's
	// injector whose rules and selectors match a live injected pod: what
	// may have rewritten what the injector added (OtherMutatorsUnknown
	// names what of them could not be read).
	OtherMutators        []Mutator `json:"otherMutators,omitempty"`
	OtherMutatorsUnknown string    `json:"-"`
	// InjectorImage is the proxy image the injector sets in istio-proxy
	// and istio-init of a live injected pod (its revision's values, or the
	// pod's sidecar.istio.io/proxyImage), "" when it is not known.
	InjectorImage string `json:"injectorImage,omitempty"`
	// UnverifiedAdmission is, for a manifest, the validating admission
	// (webhooks other than Istio's, ValidatingAdmissionPolicy bindings
	// that deny) whose rules and selectors match its pods: the model does
	// not evaluate what they decide, a dry run (--verify) does.
	// UnverifiedAdmissionUnknown names what of them could not be read.
	UnverifiedAdmission        []Mutator `json:"unverifiedAdmission,omitempty"`
	UnverifiedAdmissionUnknown string    `json:"-"`

	// memo is the answer (Memo) this report was made from, for the pod
	// called Name owned by memoOwner.
	memo      *InjectionReport
	memoOwner string
}

// MemoAnswer returns the shared answer a Memo made this report from, with
// the names it stands in for (MemoName, MemoOwner) put in: the pod's and
// its owner's. ok is false for a report not made by a Memo.
func (r *InjectionReport) MemoAnswer() (shared *InjectionReport, name, owner string, ok bool) {
	return r.memo, r.Name, r.memoOwner, r.memo != nil
}

// What refuses a pod's creation (BlockedBy).
const (
	BlockedWebhook     = "webhook"      // an Istio webhook cannot be called, or refuses it
	BlockedAnnotation  = "annotation"   // istiod refuses an annotation's value
	BlockedTemplate    = "template"     // istiod cannot render the templates asked for
	BlockedQuota       = "quota"        // a ResourceQuota refuses the pod with its sidecar
	BlockedPodSecurity = "pod-security" // PodSecurity admission refuses istio-init's capabilities
	BlockedPolicy      = "policy"       // another webhook or an admission policy refuses what the injector added
)

// Warning kinds (WarningKinds).
const (
	WarnConflictingLabels = "conflicting-labels"   // istio-injection and istio.io/rev on one namespace
	WarnOverlapping       = "overlapping-webhooks" // more than one Istio webhook matches
	WarnAmbientAndSidecar = "ambient-and-sidecar"  // selected for ambient mode and a sidecar
	WarnAmbientExcluded   = "ambient-excluded"     // ambient asked for, but it cannot be
	WarnInitFailure       = "init-failure"         // istio-init will refuse what istiod admits
	WarnAskedNotDone      = "asked-not-done"       // injection asked for, but it does not happen
	WarnInjectorSkips     = "injector-skips"       // a sidecar asked for where istiod never injects
)

// Warn adds a warning of a kind.
func (r *InjectionReport) Warn(kind, text string) {
	r.Warnings = append(r.Warnings, text)
	r.WarningKinds = append(r.WarningKinds, kind)
}

// WarningsOf are the warnings of a kind.
func (r *InjectionReport) WarningsOf(kind string) []string {
	var out []string
	for i, w := range r.Warnings {
		if i < len(r.WarningKinds) && r.WarningKinds[i] == kind {
			out = append(out, w)
		}
	}
	return out
}

// IsMismatch reports a known mismatch (false when there is none or it is unknown).
func (r *InjectionReport) IsMismatch() bool { return r.Mismatch != nil && *r.Mismatch }

// IsExpected reports a known expectation of injection (false when not expected or unknown).
func (r *InjectionReport) IsExpected() bool { return r.Expected != nil && *r.Expected }

// Mesh is one service mesh's injection model. Istio implements it; another
// mesh fits by implementing it too.
type Mesh interface {
	// Name is the mesh's name in reports ("istio").
	Name() string
	// Installed reports whether the facts show this mesh's injector.
	Installed(f *ClusterFacts) bool
	// ProxyContainer is the name of the injected proxy container.
	ProxyContainer() string
	// Explain says whether w was and would be injected, and why.
	Explain(f *ClusterFacts, w *Workload) *InjectionReport
}

// NamespaceSummary counts a namespace's pods for the many-pods view.
type NamespaceSummary struct {
	Namespace  string `json:"namespace"`
	Pods       int    `json:"pods"`
	Injected   int    `json:"injected"`
	Expected   int    `json:"expected"`
	Mismatched int    `json:"mismatched"`
	// Unknown counts pods whose expected state could not be decided; they
	// count in neither Expected nor Mismatched.
	Unknown int `json:"unknown"`
	// Ambient counts the pods ambient mode enrolls; AmbientCaptured, those
	// ztunnel has taken.
	Ambient         int `json:"ambient,omitempty"`
	AmbientCaptured int `json:"ambientCaptured,omitempty"`
	// AmbientNotCaptured counts the enrolled pods istio-cni or ztunnel has
	// not set up ("pending", "not set up"); they count in Mismatched too.
	AmbientNotCaptured int `json:"ambientNotCaptured,omitempty"`
	// Refused counts the workloads whose pods admission refuses: they
	// have no pod, so they count in none of the above.
	Refused     int    `json:"refused,omitempty"`
	Labels      string `json:"labels"`
	Revision    string `json:"revision,omitempty"`
	Description string `json:"description"`
}

// Rank is where a report goes in a list of many (SortReports): 0 for a
// mismatch or a pod that cannot be created, 1 for an unknown expectation, 2
// for a pod that is not injected, 3 for the rest.
func Rank(r *InjectionReport) int {
	switch {
	case r.IsMismatch() || r.CreationBlocked:
		return 0
	case r.Expected == nil:
		return 1
	case r.Injected != nil && !*r.Injected && !r.Ambient:
		return 2
	default:
		return 3
	}
}

// Ranks is the number of ranks Rank gives.
const Ranks = 4

// SortReports puts mismatches first, then pods that are not injected, then
// the rest (Rank), each by namespace and name.
func SortReports(rs []*InjectionReport) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if ra, rb := Rank(a), Rank(b); ra != rb {
			return ra < rb
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// Summarize counts reports per namespace, in namespace order.
func Summarize(f *ClusterFacts, rs []*InjectionReport) []NamespaceSummary {
	s := Summaries{}
	for _, r := range rs {
		s.Add(r)
	}
	return s.List(f)
}

// Summaries counts reports per namespace as they come (Add), and lists
// the counts (List) as Summarize does.
type Summaries struct {
	by    map[string]*NamespaceSummary
	names []string
}

// Add counts r.
func (ss *Summaries) Add(r *InjectionReport) {
	if ss.by == nil {
		ss.by = map[string]*NamespaceSummary{}
	}
	s, ok := ss.by[r.Namespace]
	if !ok {
		s = &NamespaceSummary{Namespace: r.Namespace}
		ss.by[r.Namespace] = s
		ss.names = append(ss.names, r.Namespace)
	}
	if r.Kind != "Pod" && (r.CreationBlocked || r.RefusedBy != nil) {
		// Its pods are refused, for the mesh or not: none to count.
		s.Refused++
		return
	}
	s.Pods++
	if r.Injected != nil && *r.Injected {
		s.Injected++
	}
	switch {
	case r.Expected == nil:
		s.Unknown++
	case *r.Expected:
		s.Expected++
	}
	if r.IsMismatch() {
		s.Mismatched++
	}
	if r.Ambient {
		s.Ambient++
		switch r.AmbientCapture {
		case AmbientCaptured:
			s.AmbientCaptured++
		case AmbientPending, AmbientNotSetUp:
			s.AmbientNotCaptured++
		}
	}
}

// List is the namespaces' counts, in namespace order, described.
func (ss *Summaries) List(f *ClusterFacts) []NamespaceSummary {
	by, names := ss.by, append([]string(nil), ss.names...)
	sort.Strings(names)
	out := make([]NamespaceSummary, 0, len(names))
	for _, n := range names {
		s := by[n]
		if ns := f.Namespaces[n]; ns != nil {
			s.Labels = injectionLabels(ns.Labels)
		}
		var wrong []string
		if n := s.Mismatched - s.AmbientNotCaptured; n > 0 {
			wrong = append(wrong, pluralize(n, "pod differs", "pods differ")+" from what it would get if re-created")
		}
		if s.AmbientNotCaptured > 0 {
			wrong = append(wrong, pluralize(s.AmbientNotCaptured, "pod", "pods")+" in ambient mode not captured by ztunnel")
		}
		if s.Refused > 0 {
			wrong = append(wrong, pluralize(s.Refused, "workload's pods", "workloads' pods")+" refused at admission")
		}
		if len(wrong) > 0 && s.Unknown > 0 {
			wrong = append(wrong, pluralize(s.Unknown, "pod", "pods")+" unknown")
		}
		switch {
		case len(wrong) > 0:
			s.Description = strings.Join(wrong, "; ")
		case s.Unknown > 0:
			s.Description = "unknown whether " + pluralize(s.Unknown, "pod", "pods") + " would be injected if re-created"
		case s.Ambient == s.Pods && s.AmbientCaptured == s.Pods:
			s.Description = "ambient mode: all captured by ztunnel"
		case s.Ambient > 0 && s.Injected+s.Ambient == s.Pods && s.AmbientCaptured == s.Ambient:
			s.Description = pluralize(s.Injected, "pod", "pods") + " injected, the rest captured by ztunnel (ambient mode)"
		case s.Injected == s.Pods:
			s.Description = "all injected"
		case s.Injected == 0 && s.Expected == 0:
			s.Description = "not injected"
		default:
			s.Description = "partly injected, as expected"
		}
		out = append(out, *s)
	}
	return out
}
