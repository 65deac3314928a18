package diagnose

import (
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeRevisionOptedOut: the pod asks for a revision (istio.io/rev) and
// opts out (sidecar.istio.io/inject=false) at once; the opt-out wins.
const CodeRevisionOptedOut = "KM-INJ-022"

func init() {
	register(&Spec{Code: CodeRevisionOptedOut, Title: "istio.io/rev and inject=false on one pod", Stage: CheckInjection, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod, FactMesh},
		Means:   "The pod's labels ask for a revision (istio.io/rev) and opt out of injection (sidecar.istio.io/inject=\"false\") at once: every Istio webhook's objectSelector excludes a pod labelled inject=false, so the revision asked for is never applied and the pod runs without a sidecar, silently. Often a chart's default opt-out left beside a later revision label. A warning: which label is meant is the owner's choice.",
		Detects: "The labels of a pod without a sidecar, or of a manifest's pod template (-f): both istio.io/rev (not empty) and sidecar.istio.io/inject=\"false\".",
		Fixes:   "A choice: remove sidecar.istio.io/inject from the pod template (the pod joins the revision; the command given), or remove istio.io/rev (it stays out of the mesh, and says so once).",
		Source:  "Istio docs, installing the sidecar (controlling the injection policy: the sidecar.istio.io/inject label wins); istio/istio issues on revision labels ignored",
		Planted: "a DaemonSet whose pod template is labelled istio.io/rev=canary and sidecar.istio.io/inject=\"false\"",
		run:     revisionOptedOut})
}

func revisionOptedOut(in *Input) []Finding {
	p, r := in.Pod, in.Injection
	manifest := p == nil && len(in.Files) > 0
	if (p == nil && !manifest) || in.injected() || r != nil && r.Ambient {
		return nil
	}
	var inject, rev string
	if p != nil {
		inject, rev = p.Labels[istio.KeyInject], p.Labels[istio.LabelRev]
	} else if r != nil {
		for _, f := range r.Factors {
			v, err := strconv.Unquote(f.Value)
			if err != nil {
				continue
			}
			switch f.Factor {
			case "pod label " + istio.KeyInject:
				inject = v
			case "pod label " + istio.LabelRev:
				rev = v
			}
		}
	}
	if inject != "false" || strings.TrimSpace(rev) == "" {
		return nil
	}
	why := "a choice: the pod joins revision " + rev + "; to keep it out of the mesh, remove istio.io/rev instead"
	var fix string
	switch {
	case manifest:
		fix = manifestEditFix(in.Files, "remove the label "+istio.KeyInject+`: "false" from the pod template (`+why+")", r)
	default:
		owner := templateOwner(p)
		if _, o := in.podTemplate(); o != "" {
			owner = o // a CronJob's Job: its template is the CronJob's
		}
		fix = labelRemoval(p.Namespace, owner, istio.KeyInject, func() string {
			return recreateBarePod(p, "", "json", `[{"op":"remove","path":"/metadata/labels/`+jsonPointer(istio.KeyInject)+`"}]`)
		})
		if fix == "" {
			fix = "in the pod's manifest, remove the label " + istio.KeyInject + ", then re-create the pod"
		} else {
			fix = firstLineNote(fix, why)
		}
		if strings.HasPrefix(templateOwner(p), "replicaset/") {
			fix += replacePod(p, templateOwner(p))
		}
	}
	return []Finding{{Status: Warning,
		Evidence: "the pod is labelled " + istio.LabelRev + "=" + strconv.Quote(rev) + " and " + istio.KeyInject + `="false"` + ": every Istio webhook's objectSelector excludes a pod labelled inject=false, so revision " + rev + " is never applied and the pod runs without a sidecar",
		Mesh:     "label " + istio.KeyInject + `="false" beside ` + istio.LabelRev + "=" + strconv.Quote(rev),
		Fix:      fix}}
}

// labelRemoval is the command that removes a label from the pod template
// of owner ("" for a bare pod: bare, which may give "").
func labelRemoval(ns, owner, key string, bare func() string) string {
	switch {
	case owner == "":
		return bare()
	case strings.HasPrefix(owner, "job/"):
		return injection.RecreateJob(strings.TrimPrefix(owner, "job/"), ns, nil, map[string]*string{key: nil})
	}
	template := "/spec/template/"
	if strings.HasPrefix(owner, "cronjob/") {
		template = "/spec/jobTemplate/spec/template/"
	}
	return "kubectl patch " + owner + " -n " + ns + ` --type=json -p '[{"op":"remove","path":"` + template + `metadata/labels/` + jsonPointer(key) + `"}]'`
}
