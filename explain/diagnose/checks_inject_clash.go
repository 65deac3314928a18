package diagnose

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeInjectClash: the pod template has a volume, or asks for a proxy
// mount, that collides with one Istio's injector adds: the apiserver
// refuses the injected pod.
const CodeInjectClash = "KM-INJ-016"

func init() {
	register(&Spec{Code: CodeInjectClash, Title: "the template collides with what the injector adds", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads: []Fact{FactPod, FactOwner, FactMesh},
		Means: "Istio's injector merges its volumes into the pod's by name, and mounts its own paths into istio-proxy. A volume of the template named as one the injector adds, with another source " +
			"(\"may not specify more than 1 volume type\"), or a sidecar.istio.io/userVolumeMount (or userVolume) on a path (or name) the proxy already uses (\"must be unique\"), makes the injected pod invalid: " +
			"the apiserver refuses every pod of the workload, and the app's own template is admitted without the sidecar.",
		Detects: "The pod template's volumes against the volumes every release 1.20–1.31 of the injection template adds (istio-envoy, istio-data, istio-podinfo, istio-token, istiod-ca-cert, workload-socket, credential-socket, workload-certs) and their sources; " +
			"the template's sidecar.istio.io/userVolumeMount paths and userVolume names against the proxy's own mounts and volumes; on a pod that is, or will be, injected.",
		Fixes:   "A JSON patch of the workload's template: the app's volume renamed (its mounts with it), or the userVolumeMount moved to a path of its own (a choice: the path the proxy's configuration reads).",
		Source:  "Istio docs, resource annotations (sidecar.istio.io/userVolume, userVolumeMount); Istio's injection template (its volumes and the proxy's mounts); the injector merges the template's containers and volumes by name",
		Planted: "a Deployment with a ConfigMap volume named istio-envoy; a Deployment whose userVolumeMount mounts onto /etc/istio/proxy",
		run:     injectClash})
}

// injectedVolumes are the volumes every release's injection template
// adds, with the sources each can have.
var injectedVolumes = map[string][]string{
	"istio-envoy":       {"emptyDir"},
	"istio-data":        {"emptyDir"},
	"istio-podinfo":     {"downwardAPI"},
	"istio-token":       {"projected"},
	"istiod-ca-cert":    {"configMap", "projected"},
	"workload-socket":   {"emptyDir"},
	"credential-socket": {"emptyDir"},
	"workload-certs":    {"emptyDir", "csi"},
}

// proxyMounts are the paths istio-proxy mounts in every release, and the
// volume mounted there.
var proxyMounts = map[string]string{
	"/etc/istio/proxy":                             "istio-envoy",
	"/var/lib/istio/data":                          "istio-data",
	"/etc/istio/pod":                               "istio-podinfo",
	"/var/run/secrets/tokens":                      "istio-token",
	"/var/run/secrets/istio":                       "istiod-ca-cert",
	"/var/run/secrets/workload-spiffe-uds":         "workload-socket",
	"/var/run/secrets/credential-uds":              "credential-socket",
	"/var/run/secrets/workload-spiffe-credentials": "workload-certs",
}

// volumeSource is the kind of a volume's source ("" when none is set).
func volumeSource(v corev1.Volume) string {
	b, err := json.Marshal(v.VolumeSource)
	if err != nil {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return ""
	}
	var kinds []string
	for k := range m {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	return strings.Join(kinds, "+")
}

// willInject: the pod is injected, or its template will be.
func (in *Input) willInject() bool {
	if in.Pod != nil && (in.injected() || in.Pod.Annotations[istio.AnnotationStatus] != "") {
		return true
	}
	r := in.Injection
	return r != nil && r.Expected != nil && *r.Expected
}

func injectClash(in *Input) []Finding {
	t, owner, ns := in.template()
	if t == nil || !in.willInject() {
		return nil
	}
	var out []Finding
	for i, v := range t.Spec.Volumes {
		kinds, ok := injectedVolumes[v.Name]
		src := volumeSource(v)
		if !ok || src == "" || slices.Contains(kinds, src) {
			continue
		}
		renamed := "app-" + v.Name
		ops := append([]string{fmt.Sprintf(`{"op":"replace","path":"/spec/%svolumes/%d/name","value":"%s"}`, jobPath(owner), i, renamed)},
			renameMounts(t, "/spec/"+jobPath(owner), v.Name, renamed)...)
		out = append(out, Finding{
			Evidence: fmt.Sprintf("the pod template's volume %s (%s) has the name of a volume Istio's injector adds (%s): the injector merges the two into one volume with two sources, which the apiserver refuses (\"may not specify more than 1 volume type\"), so no pod of %s is created", v.Name, src, strings.Join(kinds, " or "), what(owner, ns)),
			Mesh:     "the injector's volume " + v.Name + ", merged with the template's",
			Fix:      overridePatch(in, owner, "["+strings.Join(ops, ",")+"]", "the app's volume renamed "+renamed+" (its mounts with it): the injector then adds its own beside it"),
			explains: []string{CodeWorkloadShort},
		})
	}
	out = append(out, claimClash(in, t, owner, ns)...)
	out = append(out, userMountClash(in, t, owner, ns)...)
	return out
}

// renameMounts are the JSON patch operations that rename the template's
// mounts of volume name (its containers under the pod spec at spec, a
// path ending in "/").
func renameMounts(t *corev1.PodTemplateSpec, spec, name, renamed string) []string {
	var ops []string
	for _, list := range []struct {
		field string
		cs    []corev1.Container
	}{{"initContainers", t.Spec.InitContainers}, {"containers", t.Spec.Containers}} {
		for ci, c := range list.cs {
			for mi, m := range c.VolumeMounts {
				if m.Name == name {
					ops = append(ops, fmt.Sprintf(`{"op":"replace","path":"%s%s/%d/volumeMounts/%d/name","value":"%s"}`, spec, list.field, ci, mi, renamed))
				}
			}
		}
	}
	return ops
}

// claimClash: a StatefulSet's volumeClaimTemplate named as a volume the
// injector adds (round 24's 07): the controller's volume of the claim and
// the injector's are merged into one with two sources, which the apiserver
// refuses. The claim templates cannot change: the fix makes the StatefulSet
// again with the claim renamed (its pods, if any, kept meanwhile).
func claimClash(in *Input, t *corev1.PodTemplateSpec, owner, ns string) []Finding {
	w := in.Workload
	if w == nil || w.Kind != "StatefulSet" {
		w = in.Owner
	}
	if w == nil || w.Kind != "StatefulSet" || owner != "statefulset/"+w.Name {
		return nil
	}
	var out []Finding
	for i, name := range w.ClaimTemplates {
		kinds, ok := injectedVolumes[name]
		if !ok {
			continue
		}
		renamed := "app-" + name
		ops := append([]string{fmt.Sprintf(`{"op":"replace","path":"/spec/volumeClaimTemplates/%d/metadata/name","value":"%s"}`, i, renamed)},
			renameMounts(t, "/spec/template/spec/", name, renamed)...)
		out = append(out, Finding{
			Evidence: fmt.Sprintf("the StatefulSet's volumeClaimTemplate %s has the name of a volume Istio's injector adds (%s): the pod's volume of the claim and the injector's are merged into one with two sources, which the apiserver refuses (\"may not specify more than 1 volume type\"), so no pod of %s is created", name, strings.Join(kinds, " or "), what(owner, ns)),
			Mesh:     "the injector's volume " + name + ", merged with the claim's",
			Fix: fmt.Sprintf("kubectl get statefulset/%s -n %s -o json | kubectl patch --local -f - --type=json -p '[%s]' -o json | kubectl replace --force --cascade=orphan -f -   # a StatefulSet's claim templates cannot change: this makes statefulset/%s again with the claim renamed %s (its mounts with it), its pods kept meanwhile; the old claims (%s-%s-N) stay, with their data, until deleted",
				w.Name, ns, strings.Join(ops, ","), w.Name, renamed, name, w.Name),
			explains: []string{CodeWorkloadShort},
		})
	}
	return out
}

// userMountClash: a userVolumeMount onto a path the proxy mounts already,
// or a userVolume named as a volume the injector adds.
func userMountClash(in *Input, t *corev1.PodTemplateSpec, owner, ns string) []Finding {
	var out []Finding
	vols := userVolumeNames(t.Annotations[annotationUserVolume])
	if mounts, ok := parseUserMounts(t.Annotations[annotationUserVolumeMount]); ok {
		for _, name := range mounts.names {
			if !vols[name] && !templateHasVolume(t, name) && injectedVolumes[name] == nil {
				out = append(out, undeclaredMount(in, owner, ns, name, mounts))
				continue
			}
			path, _ := mounts.by[name]["mountPath"].(string)
			vol, clash := proxyMounts[strings.TrimSuffix(path, "/")]
			if !clash {
				continue
			}
			moved := "/etc/istio/user/" + name
			out = append(out, Finding{
				Evidence: fmt.Sprintf("the pod template's annotation %s mounts %s at %s, where istio-proxy mounts the injector's volume %s: the proxy's mount paths must be unique, so the apiserver refuses the injected pod (\"must be unique\") and no pod of %s is created", annotationUserVolumeMount, name, path, vol, what(owner, ns)),
				Mesh:     annotationUserVolumeMount + " (" + name + " at " + path + ")",
				Fix:      annotationSet(in, owner, ns, annotationUserVolumeMount, mounts.encode("", name, moved), "a choice: "+name+" mounted at "+moved+" instead; use the path the proxy's configuration reads it from"),
				explains: []string{CodeWorkloadShort},
			})
		}
	}
	names := make([]string, 0, len(vols))
	for name := range vols {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, clash := injectedVolumes[name]; clash {
			out = append(out, Finding{
				Evidence: fmt.Sprintf("the pod template's annotation %s adds a volume named %s, a name Istio's injector gives its own volume: the pod gets two volumes of that name, which the apiserver refuses, and no pod of %s is created", annotationUserVolume, name, what(owner, ns)),
				Mesh:     annotationUserVolume + " (" + name + ")",
				Fix:      "rename the volume " + name + " in the template's annotations " + annotationUserVolume + " and " + annotationUserVolumeMount + " (any name the injector does not use), e.g. user-" + name,
				explains: []string{CodeWorkloadShort},
			})
		}
	}
	return out
}

// userMounts is sidecar.istio.io/userVolumeMount read: a JSON object by
// volume name, or (as Istio reads it too) a list of mounts with names.
type userMounts struct {
	list  bool
	names []string
	by    map[string]map[string]any
}

func parseUserMounts(raw string) (*userMounts, bool) {
	if raw == "" {
		return nil, false
	}
	u := &userMounts{by: map[string]map[string]any{}}
	var m map[string]map[string]any
	var l []map[string]any
	switch {
	case json.Unmarshal([]byte(raw), &m) == nil:
		for n, v := range m {
			u.names, u.by[n] = append(u.names, n), v
		}
		sort.Strings(u.names)
	case json.Unmarshal([]byte(raw), &l) == nil:
		u.list = true
		for _, v := range l {
			n, _ := v["name"].(string)
			u.names, u.by[n] = append(u.names, n), v
		}
	default:
		return nil, false
	}
	return u, true
}

// encode writes the mounts back as they were written, without skip, the
// mount of moved (if any) at path.
func (u *userMounts) encode(skip, moved, path string) string {
	var l []map[string]any
	m := map[string]map[string]any{}
	for _, n := range u.names {
		if n == skip {
			continue
		}
		v := map[string]any{}
		for k, x := range u.by[n] {
			v[k] = x
		}
		if n == moved {
			v["mountPath"] = path
		}
		l, m[n] = append(l, v), v
	}
	var b []byte
	if u.list {
		b, _ = json.Marshal(l)
	} else {
		b, _ = json.Marshal(m)
	}
	return string(b)
}

// userVolumeNames are the volume names sidecar.istio.io/userVolume
// declares (an object by name, or a list with names).
func userVolumeNames(raw string) map[string]bool {
	out := map[string]bool{}
	var m map[string]json.RawMessage
	var l []map[string]any
	switch {
	case json.Unmarshal([]byte(raw), &m) == nil:
		for n := range m {
			out[n] = true
		}
	case json.Unmarshal([]byte(raw), &l) == nil:
		for _, v := range l {
			if n, ok := v["name"].(string); ok {
				out[n] = true
			}
		}
	}
	return out
}

// annotationSet sets an annotation on what makes the pod: the workload's
// template (a Job re-created), or a bare pod re-created.
func annotationSet(in *Input, owner, ns, key, value, comment string) string {
	if owner == "" && in.Pod != nil {
		return specFixAnnotation(in.Pod, key, value) + "   # " + comment
	}
	kind, name, _ := strings.Cut(owner, "/")
	kinds := map[string]string{"deployment": "Deployment", "statefulset": "StatefulSet", "daemonset": "DaemonSet", "job": "Job", "cronjob": "CronJob", "replicaset": "ReplicaSet"}
	return injection.SetTemplateAnnotations(kinds[kind], name, ns, map[string]*string{key: &value}) + comment
}

// what names the workload, or "the pod".
func what(owner, ns string) string {
	if owner == "" {
		return "the pod"
	}
	return owner + " -n " + ns
}

// templateHasVolume: the template declares a volume of that name.
func templateHasVolume(t *corev1.PodTemplateSpec, name string) bool {
	for _, v := range t.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// undeclaredMount: a userVolumeMount of a volume that neither the template
// nor sidecar.istio.io/userVolume declares: istio-proxy mounts a volume
// the pod does not have, and the apiserver refuses it ("Not found").
func undeclaredMount(in *Input, owner, ns, name string, mounts *userMounts) Finding {
	var fix string
	choice := "a choice: or declare the volume " + name + " in " + annotationUserVolume
	if len(mounts.names) == 1 {
		fix = templatePatch(owner, ns, []string{annotationUserVolumeMount}) + "   # " + choice
		if owner == "" && in.Pod != nil {
			fix = removeAnnotations(in.Pod, []string{annotationUserVolumeMount}) + "   # " + choice
		}
	} else {
		fix = annotationSet(in, owner, ns, annotationUserVolumeMount, mounts.encode(name, "", ""), choice)
	}
	return Finding{
		Evidence: fmt.Sprintf("the pod template's annotation %s mounts the volume %s into istio-proxy, but neither the template nor %s declares a volume of that name: the apiserver refuses the injected pod (\"Not found\"), and no pod of %s is created", annotationUserVolumeMount, name, annotationUserVolume, what(owner, ns)),
		Mesh:     annotationUserVolumeMount + " (" + name + ", not declared)",
		Fix:      fix,
		explains: []string{CodeWorkloadShort},
	}
}
