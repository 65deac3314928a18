package injection

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// policyRefusal is an admission refusal, by something other than the
// mesh's own webhooks, of what the injector added to the pod: another
// webhook, or a ValidatingAdmissionPolicy. It is the mesh's cause: without
// the injection the pod would have been admitted.
type policyRefusal struct {
	by     string // what acted, as kubectl names it
	what   string // what of the injection it refuses
	exempt string // the command that exempts the namespace from it ("" when none can be written)
	mesh   string // the way out on the mesh's side
	// down: the webhook could not be called (problem says why), rather than
	// denying the pod.
	down    bool
	problem string
	// fix, when set, is the fix as it is (not an exemption); condition:
	// a webhook's matchCondition failed on the pod.
	fix       string
	condition bool
}

// Refusal is a refusal of the pod by something other than the mesh, put
// down to what acted on it: a webhook (by its configuration whose rules
// and selectors match the pod) or a ValidatingAdmissionPolicy (by the
// binding the apiserver names), and the fix.
type Refusal struct {
	By  string `json:"by"`
	Fix string `json:"fix,omitempty"`
	// Message is the refusal's own words (the controller's FailedCreate).
	Message string `json:"message,omitempty"`
	// Condition: a webhook's matchCondition that cannot be evaluated on
	// the pod refused it (By names the webhook and the condition), not
	// anything in the pod.
	Condition bool `json:"condition,omitempty"`
	// OwnerKind and OwnerName name the object whose template makes the
	// refused pods (a ReplicaSet's Deployment, a Job's CronJob is not: the
	// Job's own).
	OwnerKind string `json:"ownerKind,omitempty"`
	OwnerName string `json:"ownerName,omitempty"`
	// WithoutSidecar is what admission made of the same template without
	// its sidecar (a dry-run create, labelled sidecar.istio.io/inject=false):
	// "admitted" (then what the injector adds is what is refused), "refused:
	// …", or "" when it could not be asked.
	WithoutSidecar string `json:"withoutSidecar,omitempty"`
	// MeshSide is the change of the template's annotations that admission
	// admitted with the sidecar (a dry-run create of each candidate), when
	// the one without the sidecar was admitted: the fix that keeps both
	// the policy and the mesh.
	MeshSide *MeshSide `json:"meshSide,omitempty"`
}

// MeshSide is a change of a template's sidecar.istio.io/… annotations
// that admission was shown to admit, sidecar and all: Set are the
// annotations to set (a value "" removes it), What what of the injection
// it changes.
type MeshSide struct {
	Set map[string]string `json:"set"`
	// Labels are the template's labels to set the same way (the opt-out
	// taken off).
	Labels map[string]string `json:"labels,omitempty"`
	What   string            `json:"what"`
}

// platformFix is the fix for a refusal of the pod's own (not of what the
// injector added): exempt the namespace, or make the webhook answer.
func platformFix(pr policyRefusal, w *Workload) string {
	switch {
	case pr.fix != "":
		return pr.fix
	case pr.exempt != "" && pr.down:
		return pr.exempt + "   # exempts namespace " + w.Namespace + " from " + pr.by + ", which does not answer (" + truncate(pr.problem, 120) + "); or bring its backend back"
	case pr.exempt != "":
		return pr.exempt + "   # exempts namespace " + w.Namespace + " from " + pr.by + "; or change the template to what it admits"
	}
	return ""
}

var vapDenied = regexp.MustCompile(`ValidatingAdmissionPolicy '([^']+)' with binding '([^']+)' denied request: ?(.*)`)

// injectedPart says what of the injection a refusal's message is about:
// a container the injector adds, named; istio-init's capabilities, when
// no container of the pod's own asks for them; the proxy's image. "" when
// the message is about nothing the injector added.
func injectedPart(msg string, w *Workload) string {
	if part := proxyPrivilegePart(msg, w); part != "" {
		return part
	}
	for _, c := range []string{istio.InitContainer, istio.ProxyContainer, istio.ValidationContainer} {
		if strings.Contains(msg, c) {
			return "container " + c + ", which the injector adds"
		}
	}
	for _, cap := range []string{"NET_ADMIN", "NET_RAW"} {
		if !strings.Contains(msg, cap) {
			continue
		}
		for _, c := range append(append([]string(nil), containerCaps(w.Spec.InitContainers)...), containerCaps(w.Spec.Containers)...) {
			if c == cap {
				return ""
			}
		}
		return "the capability " + cap + " of istio-init, which the injector adds (no container of the pod's own asks for it)"
	}
	if strings.Contains(msg, "proxyv2") {
		return "the proxy's image (proxyv2), which the injector sets"
	}
	if rootRefusal.MatchString(msg) && !ownMayRunAsRoot(w) {
		return "istio-init's user, root (uid 0), which the injector sets (every container of the pod's own runs as a non-root user)"
	}
	if strings.Contains(strings.ToLower(msg), "readonlyrootfilesystem") && ownReadOnlyRoots(w) {
		return "istio-init's writable root filesystem (readOnlyRootFilesystem false), which the injector sets (every container of the pod's own has a read-only one)"
	}
	return ""
}

// ownReadOnlyRoots: every container of the pod's own sets
// readOnlyRootFilesystem.
func ownReadOnlyRoots(w *Workload) bool {
	n := 0
	for _, c := range append(append([]corev1.Container(nil), w.Spec.InitContainers...), w.Spec.Containers...) {
		if istio.IsIstioContainer(c.Name) {
			continue
		}
		if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			return false
		}
		n++
	}
	return n > 0
}

// rootRefusal: a refusal's message about running as root.
var rootRefusal = regexp.MustCompile(`(?i)\broot\b|runAsUser|runAsNonRoot|non-?root`)

// ownMayRunAsRoot says a container of the pod's own may run as root: none
// is kept from it by runAsNonRoot or a non-zero runAsUser (the container's
// own, else the pod's).
func ownMayRunAsRoot(w *Workload) bool {
	pod := w.Spec.SecurityContext
	for _, c := range append(append([]corev1.Container(nil), w.Spec.InitContainers...), w.Spec.Containers...) {
		if istio.IsIstioContainer(c.Name) {
			continue
		}
		var uid *int64
		var nonRoot *bool
		if pod != nil {
			uid, nonRoot = pod.RunAsUser, pod.RunAsNonRoot
		}
		if sc := c.SecurityContext; sc != nil {
			if sc.RunAsUser != nil {
				uid = sc.RunAsUser
			}
			if sc.RunAsNonRoot != nil {
				nonRoot = sc.RunAsNonRoot
			}
		}
		if uid != nil && *uid == 0 || uid == nil && (nonRoot == nil || !*nonRoot) {
			return true
		}
	}
	return false
}

// meshWayOut is the way out on the mesh's side for what a policy refuses.
func meshWayOut(what string) string {
	switch {
	case strings.Contains(what, "capability"), strings.Contains(what, istio.InitContainer):
		return "on the mesh's side: a revision installed with Istio's CNI plugin, whose pods have no istio-init"
	case strings.Contains(what, istio.ProxyContainer):
		return "on the mesh's side: the sidecar.istio.io/proxy* annotations (resources) or proxy.istio.io/config on the template, to what the policy admits"
	}
	return "on the mesh's side: a template the policy admits"
}

// MayRefuseInjected says a FailedCreate message is a refusal by another
// admission webhook or policy, which may be of what the injector added:
// Explain, with the template, says whether it is.
func MayRefuseInjected(msg string) bool {
	if vapDenied.MatchString(strings.Join(strings.Fields(msg), " ")) {
		return true
	}
	ref, ok := parseWebhookRefusal(msg)
	return ok && !isIstioWebhook(ref.webhook)
}

// thirdPartyRefusal reads a refusal that is not the mesh's own webhook's:
// a ValidatingAdmissionPolicy the message names, or a webhook whose name
// it quotes, put down to the configuration whose rules and selectors
// match this pod.
func thirdPartyRefusal(f *ClusterFacts, w *Workload, nsLabels map[string]string, msg string) (policyRefusal, bool) {
	pr, ok := refusalBy(f, w, nsLabels, msg)
	return pr, ok && pr.what != ""
}

// refusalBy puts a refusal by something other than the mesh's own webhooks
// down to what acted (what: "" when it is about nothing the injector
// added: the platform's own refusal, still named).
func refusalBy(f *ClusterFacts, w *Workload, nsLabels map[string]string, msg string) (policyRefusal, bool) {
	msg = strings.Join(strings.Fields(msg), " ")
	what := injectedPart(msg, w)
	pr := policyRefusal{what: what, mesh: meshWayOut(what)}
	if m := vapDenied.FindStringSubmatch(msg); m != nil {
		pr.by = fmt.Sprintf("ValidatingAdmissionPolicy %s (binding %s)", m[1], m[2])
		for i := range f.PolicyBindings {
			if b := &f.PolicyBindings[i]; b.Name == m[2] {
				var sel *metav1.LabelSelector
				if b.Spec.MatchResources != nil {
					sel = b.Spec.MatchResources.NamespaceSelector
				}
				pr.exempt = exemptCommand("validatingadmissionpolicybinding "+b.Name, "/spec/matchResources", b.Spec.MatchResources == nil, sel, w.Namespace)
			}
		}
		return pr, true
	}
	if pr, ok := conditionRefusal(f, w, nsLabels, msg); ok {
		return pr, true
	}
	ref, ok := parseWebhookRefusal(msg)
	if !ok || isIstioWebhook(ref.webhook) {
		return policyRefusal{}, false
	}
	pr.down = !ref.denied
	if pr.down {
		pr.problem = ref.problem
	}
	var by []string
	check := func(kind, config string, i int, name string, rules []admissionregistrationv1.RuleWithOperations, nsSel, objSel *metav1.LabelSelector) {
		if name != ref.webhook || !rulesCoverPodCreate(rules) || !selects(nsSel, nsLabels) || !selects(objSel, w.Labels) {
			return
		}
		by = append(by, kind+" "+config+" (webhook "+name+")")
		if pr.exempt == "" {
			pr.exempt = exemptCommand(strings.ToLower(kind)+" "+config, fmt.Sprintf("/webhooks/%d", i), false, nsSel, w.Namespace)
		}
	}
	for _, c := range f.ValidatingWebhooks {
		for i, h := range c.Webhooks {
			check("ValidatingWebhookConfiguration", c.Name, i, h.Name, h.Rules, h.NamespaceSelector, h.ObjectSelector)
		}
	}
	for _, c := range f.Webhooks {
		for i, h := range c.Webhooks {
			check("MutatingWebhookConfiguration", c.Name, i, h.Name, h.Rules, h.NamespaceSelector, h.ObjectSelector)
		}
	}
	switch {
	case len(by) > 1:
		pr.by, pr.exempt = "one of "+strings.Join(by, " or "), ""
	case len(by) == 1:
		pr.by = by[0]
	default:
		pr.by = "webhook " + ref.webhook
		if f.ValidatingWebhooksUnknown != "" {
			pr.by += " (its configuration could not be read: " + f.ValidatingWebhooksUnknown + ")"
		} else {
			pr.by += " (no configuration whose selectors match this pod has it now)"
		}
	}
	return pr, true
}

func selects(s *metav1.LabelSelector, l map[string]string) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}

// exemptCommand is the JSON patch that takes a namespace out of an
// object's namespaceSelector (at base+"/namespaceSelector"): one more
// expression, kubernetes.io/metadata.name NotIn [ns]. noBase: the object
// has nothing at base yet.
func exemptCommand(object, base string, noBase bool, sel *metav1.LabelSelector, ns string) string {
	expr := map[string]any{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": []string{ns}}
	var op map[string]any
	switch {
	case noBase:
		op = map[string]any{"op": "add", "path": base, "value": map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{expr}}}}
	case sel == nil:
		op = map[string]any{"op": "add", "path": base + "/namespaceSelector", "value": map[string]any{"matchExpressions": []any{expr}}}
	case len(sel.MatchExpressions) == 0:
		op = map[string]any{"op": "add", "path": base + "/namespaceSelector/matchExpressions", "value": []any{expr}}
	default:
		op = map[string]any{"op": "add", "path": base + "/namespaceSelector/matchExpressions/-", "value": expr}
	}
	b, _ := json.Marshal([]any{op})
	return fmt.Sprintf("kubectl patch %s --type=json -p '%s'", object, b)
}

// policyFix is the fix for pods a policy refuses because of what the
// injector added: both ways out.
func policyFix(pr policyRefusal, w *Workload) string {
	if pr.exempt != "" {
		return pr.exempt + "   # exempts namespace " + w.Namespace + " from " + pr.by + "; or, " + pr.mesh
	}
	return "exempt namespace " + w.Namespace + " from " + pr.by + " (an exception in that policy), or, " + pr.mesh
}

// containerCaps are the capabilities the pod's own containers add.
func containerCaps(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		if istio.IsIstioContainer(c.Name) {
			continue
		}
		if c.SecurityContext != nil && c.SecurityContext.Capabilities != nil {
			for _, a := range c.SecurityContext.Capabilities.Add {
				out = append(out, string(a))
			}
		}
	}
	return out
}

// optOutRefused is, for a refusal whose words name the injection key on a
// template that opts out of the mesh with it (sidecar.istio.io/inject
// "false"), the change that drops the opt-out; "" otherwise.
func optOutRefused(w *Workload, msg string) string {
	if !strings.Contains(msg, istio.KeyInject) && !strings.Contains(msg, "injection") {
		return ""
	}
	switch {
	case w.Labels[istio.KeyInject] == "false":
		return setTemplateLabel(w, istio.KeyInject, "") + "   # the policy refuses pods that opt out of the mesh: the template's opt-out goes, and its pods get the sidecar"
	case w.Annotations[istio.KeyInject] == "false":
		if fix := removeTemplateAnnotations(w, []string{istio.KeyInject}, "the policy refuses pods that opt out of the mesh: the template's opt-out goes, and its pods get the sidecar"); fix != "" {
			return fix
		}
	}
	return ""
}

// PolicyExemption names what refused a pod (a ValidatingAdmissionPolicy
// and binding the message names, or a validating webhook whose rules and
// selectors match the pod) and the patch that exempts the pod's namespace
// from it; fix is "" when no single object can be patched.
func PolicyExemption(f *ClusterFacts, w *Workload, nsLabels map[string]string, msg string) (by, fix string) {
	labels := map[string]string{"kubernetes.io/metadata.name": w.Namespace}
	for k, v := range nsLabels {
		labels[k] = v
	}
	pr, ok := refusalBy(f, w, labels, msg)
	if !ok {
		return "", ""
	}
	if pr.exempt == "" {
		return pr.by, ""
	}
	return pr.by, pr.exempt + "   # exempts namespace " + w.Namespace + " from " + pr.by
}
