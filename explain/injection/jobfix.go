package injection

import (
	"encoding/json"
	"fmt"
	"strings"
)

// RecreateJob is the command that re-creates Job name with its pod
// template changed: a Job's template is immutable, so kubectl patch is
// refused. It reads the Job, applies a merge patch locally (no jq), and
// replaces it (delete, then create). The patch also clears what the
// apiserver generated for the old Job: its selector (and manualSelector,
// so that a new one is generated), the controller-uid labels on the Job
// and its template, and the old object's identity; a merge patch's null
// for a key that is not there changes nothing, so it holds for Jobs of any
// apiserver version. annotations and labels map a key to its new value, or
// to nil to remove it.
func RecreateJob(name, ns string, annotations, labels map[string]*string) string {
	return recreateJob(name, ns, annotations, labels, nil, "with the change")
}

// RecreateJobSpec is RecreateJob for a change of the Job's own spec (its
// fields by key, nil to remove one): one a Job cannot be patched for
// either. Its comment ends with "re-creates it", for the caller's words.
func RecreateJobSpec(name, ns string, spec map[string]any) string {
	return recreateJob(name, ns, nil, nil, spec, "")
}

func recreateJob(name, ns string, annotations, labels map[string]*string, spec map[string]any, with string) string {
	uid := map[string]any{"controller-uid": nil, "batch.kubernetes.io/controller-uid": nil}
	tmplLabels := map[string]any{"controller-uid": nil, "batch.kubernetes.io/controller-uid": nil}
	for k, v := range labels {
		// The Job's own labels too: a Job made without labels of its own
		// got its template's, and kept there, a changed one would say
		// the old (sidecar.istio.io/inject on a Job's own labels is read
		// as an opt-out meant for its pods: KM-INJ-023).
		tmplLabels[k], uid[k] = v, v
	}
	tmplMeta := map[string]any{"labels": tmplLabels}
	if len(annotations) > 0 {
		a := map[string]any{}
		for k, v := range annotations {
			a[k] = v
		}
		tmplMeta["annotations"] = a
	}
	jobSpec := map[string]any{"selector": nil, "manualSelector": nil, "template": map[string]any{"metadata": tmplMeta}}
	for k, v := range spec {
		jobSpec[k] = v
	}
	patch := map[string]any{
		"metadata": map[string]any{"uid": nil, "resourceVersion": nil, "creationTimestamp": nil, "managedFields": nil, "labels": uid},
		"status":   nil,
		"spec":     jobSpec,
	}
	b, err := json.Marshal(patch)
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	if spec != nil {
		return fmt.Sprintf("kubectl get job %s -n %s -o json | kubectl patch --local -f - --type=merge -p '%s' -o json | kubectl replace --force -f -   # this deletes job/%s and creates it again",
			name, ns, b, name)
	}
	return fmt.Sprintf("kubectl get job %s -n %s -o json | kubectl patch --local -f - --type=merge -p '%s' -o json | kubectl replace --force -f -   # a Job's pod template cannot be patched: this deletes job/%s and creates it again %s",
		name, ns, b, name, with)
}

// templateOwnerOf is the kind and name of the object whose pod template
// makes w's pods, "Pod" for a pod no controller re-creates.
func templateOwnerOf(w *Workload) (kind, name string) {
	kind, name = w.Kind, w.Name
	if kind == "Pod" {
		if w.Owner == nil {
			return "Pod", name
		}
		kind, name = w.Owner.Kind, w.Owner.Name
	}
	if kind == "ReplicaSet" {
		// A Deployment's ReplicaSet is named <deployment>-<pod-template-hash>
		// and its pods carry that label; a ReplicaSet of its own does not.
		if h := w.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(name, "-"+h) {
			kind, name = "Deployment", strings.TrimSuffix(name, "-"+h)
		}
	}
	return kind, name
}

// removeTemplateAnnotations is the command that removes annotations from
// the pod template that makes w's pods (comment says why, after "# "); ""
// for a pod no controller re-creates.
func removeTemplateAnnotations(w *Workload, keys []string, comment string) string {
	kind, name := templateOwnerOf(w)
	switch kind {
	case "Pod":
		return ""
	case "Job":
		gone := map[string]*string{}
		for _, k := range keys {
			gone[k] = nil
		}
		return RecreateJob(name, w.Namespace, gone, nil) + "; " + comment
	}
	path := "/spec/template/metadata/annotations/"
	if kind == "CronJob" {
		path = "/spec/jobTemplate/spec/template/metadata/annotations/"
	}
	var ops []string
	for _, k := range keys {
		ops = append(ops, `{"op":"remove","path":"`+path+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")+`"}`)
	}
	return "kubectl patch " + strings.ToLower(kind) + "/" + name + " -n " + w.Namespace + " --type=json -p '[" + strings.Join(ops, ",") + "]'   # " + comment
}

// SetTemplateAnnotations is the command that sets annotations (a value, or
// nil to remove) on the pod template of kind/name: a merge patch of its
// spec.template (a CronJob's spec.jobTemplate.spec.template); a Job is
// re-created (RecreateJob). It ends with "   # " and no comment, for the
// caller's, when the command is a patch.
func SetTemplateAnnotations(kind, name, ns string, set map[string]*string) string {
	return SetTemplateMeta(kind, name, ns, set, nil)
}

// SetTemplateMeta is SetTemplateAnnotations with the template's labels set
// the same way.
func SetTemplateMeta(kind, name, ns string, set, labels map[string]*string) string {
	if kind == "Job" {
		return RecreateJob(name, ns, set, labels) + "; "
	}
	meta := map[string]any{}
	for key, m := range map[string]map[string]*string{"annotations": set, "labels": labels} {
		if len(m) == 0 {
			continue
		}
		a := map[string]any{}
		for k, v := range m {
			a[k] = v
		}
		meta[key] = a
	}
	tmpl := map[string]any{"metadata": meta}
	spec := map[string]any{"template": tmpl}
	if kind == "CronJob" {
		spec = map[string]any{"jobTemplate": map[string]any{"spec": spec}}
	}
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf("kubectl patch %s/%s -n %s --type=merge -p '%s'   # ", strings.ToLower(kind), name, ns, b)
}
