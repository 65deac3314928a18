package injection

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Verification is what admission actually did with a pod created now — a
// server-side dry run through the real admission chain, the mesh's webhooks
// included — beside the prediction: the proof of the answer.
type Verification struct {
	// Injected, Revision and Sidecar ("native" or "classic") are read from the
	// pod admission returned (its sidecar.istio.io/status and containers).
	Injected bool   `json:"injected"`
	Revision string `json:"revision,omitempty"`
	Sidecar  string `json:"sidecar,omitempty"`
	// Refused: admission rejected the pod; Message says how.
	Refused bool   `json:"refused"`
	Message string `json:"message,omitempty"`
	// BlockedBy is what refused it (Blocked* constants), and Fix the fix,
	// when the refusal was put down to what acted on the pod.
	BlockedBy string `json:"blockedBy,omitempty"`
	// RefusedBy names what refused it when that is not the mesh.
	RefusedBy string `json:"refusedBy,omitempty"`
	// Condition: RefusedBy is a webhook's matchCondition that failed on
	// the pod.
	Condition bool   `json:"condition,omitempty"`
	Fix       string `json:"fix,omitempty"`
	// WithoutSidecar is what admission made of the same pod without its
	// sidecar, when RefusedBy refused it ("admitted": what the injector
	// adds is what it refuses).
	WithoutSidecar string `json:"withoutSidecar,omitempty"`
	// MeshSide is the change of the pod's annotations admission admitted
	// with the sidecar, when WithoutSidecar is "admitted" (Refusal's).
	MeshSide *MeshSide `json:"meshSide,omitempty"`
	// Agrees compares the proof with the prediction; null when the
	// prediction was unknown (the proof then answers alone).
	Agrees *bool `json:"agrees"`
	// FailedOpen names the webhook that was to inject the pod when the dry
	// run got no sidecar from it: its failurePolicy Ignore let the pod
	// through when it did not answer (not a disagreement of the model).
	FailedOpen string `json:"failedOpen,omitempty"`
	// Disagreement says what differs, when Agrees is false.
	Disagreement string `json:"disagreement,omitempty"`
	// SharedFrom names the namespace the dry run was made in, when it is
	// not the pod's: one whose labels, annotations and admission cannot be
	// told apart from its namespace's (the dry run of the same template
	// there has the same outcome).
	SharedFrom string `json:"sharedFrom,omitempty"`
	// Pod is the pod admission returned, when it admitted one: what the
	// catalogue's static checks read for a manifest not created yet.
	Pod *corev1.Pod `json:"-"`
}

// AdmittedPod reads what admission made of a pod it accepted.
func AdmittedPod(p *corev1.Pod) *Verification {
	st := readIstioStatus(p)
	v := &Verification{Injected: st.injected, Revision: st.revision, Pod: p}
	if st.injected && !istio.OmitsSidecarTemplate(p.Annotations) {
		// (A gateway's or an agent's template: a proxy, not a sidecar.)
		v.Sidecar = kindOf(st.native)
	}
	return v
}

// RefusedPod is admission's rejection of the pod.
func RefusedPod(message string) *Verification {
	return &Verification{Refused: true, Message: message}
}

// Compare sets whether the proof agrees with r's prediction, and if not, how
// they differ.
func (v *Verification) Compare(r *InjectionReport) {
	if r.Expected == nil {
		v.Agrees, v.Disagreement = nil, ""
		return
	}
	if r.FailOpenWebhook != "" && *r.Expected && !r.CreationBlocked && !v.Refused && !v.Injected {
		v.Agrees, v.Disagreement, v.FailedOpen = nil, "", r.FailOpenWebhook
		return
	}
	differ := ""
	switch {
	case r.CreationBlocked && !v.Refused:
		differ = "predicted: pods cannot be created; admission accepted the pod"
	case r.CreationBlocked:
	case v.Refused && RefusalOf(v.Message) == "" && !strings.Contains(v.Message, "istio"):
		// Refused by the platform for a reason of its own: the prediction
		// is of the mesh's admission, and says nothing against it.
		v.Agrees, v.Disagreement = nil, ""
		return
	case v.Refused:
		differ = "predicted: the pod is admitted; admission refused it: " + v.Message
	case *r.Expected != v.Injected:
		differ = fmt.Sprintf("predicted: injected %v; admission: injected %v", *r.Expected, v.Injected)
	case v.Injected && r.Revision != "" && v.Revision != "" && r.Revision != v.Revision:
		differ = fmt.Sprintf("predicted: revision %s; admission: revision %s", r.Revision, v.Revision)
	case v.Injected && r.Sidecar != "" && r.Sidecar != v.Sidecar:
		differ = fmt.Sprintf("predicted: a %s sidecar; admission: a %s sidecar", r.Sidecar, v.Sidecar)
	}
	agrees := differ == ""
	v.Agrees, v.Disagreement = &agrees, differ
}

// Summary says the proof in a few words.
func (v *Verification) Summary() string {
	s := v.summary()
	if v.SharedFrom != "" {
		s += " (by a dry run in namespace " + v.SharedFrom + ", whose labels, annotations and admission are the same)"
	}
	return s
}

func (v *Verification) summary() string {
	switch {
	case v.Refused:
		return "admission refuses the pod: " + ShortInvalid(v.Message)
	case v.FailedOpen != "":
		return "admission does not inject it: webhook " + v.FailedOpen + " did not answer, and its failurePolicy Ignore let the pod through without a sidecar"
	case v.Injected:
		s := "admission injects it"
		if v.Revision != "" {
			s += " (revision " + v.Revision
			if v.Sidecar != "" {
				s += ", " + v.Sidecar + " sidecar"
			}
			s += ")"
		}
		return s
	}
	return "admission does not inject it"
}

// ShortInvalid keeps the first three field errors of an apiserver
// validation message ("Pod "x" is invalid: [a, b, c, d, …]") and says how
// many more it lists; any other message is returned as it is.
func ShortInvalid(msg string) string {
	const head = "is invalid: ["
	i := strings.Index(msg, head)
	if i < 0 {
		return msg
	}
	start := i + len(head)
	depth, end := 1, -1
	for j := start; j < len(msg) && end < 0; j++ {
		switch msg[j] {
		case '[':
			depth++
		case ']':
			if depth--; depth == 0 {
				end = j
			}
		}
	}
	if end < 0 {
		return msg
	}
	// Each error starts with its field's path.
	var errs []string
	for _, part := range strings.Split(msg[start:end], ", ") {
		if len(errs) > 0 && !strings.HasPrefix(part, "spec.") && !strings.HasPrefix(part, "metadata.") {
			errs[len(errs)-1] += ", " + part
			continue
		}
		errs = append(errs, part)
	}
	if len(errs) <= 3 {
		return msg
	}
	return msg[:start] + strings.Join(errs[:3], ", ") + fmt.Sprintf(", and %d more like them", len(errs)-3) + msg[end:]
}
