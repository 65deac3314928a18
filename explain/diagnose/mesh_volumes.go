package diagnose

import (
	"encoding/json"
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// The annotations through which a pod asks Istio's injector for volumes of
// its own: the proxy's bootstrap override (a ConfigMap mounted as
// custom-bootstrap-volume) and user volumes (JSON, by volume name).
const (
	annotationBootstrapOverride = "sidecar.istio.io/bootstrapOverride"
	annotationUserVolume        = "sidecar.istio.io/userVolume"
	annotationUserVolumeMount   = "sidecar.istio.io/userVolumeMount"
	bootstrapVolume             = "custom-bootstrap-volume"
)

var failedVolume = regexp.MustCompile(`for volume "([^"]+)"`)

// meshVolume says which of the pod's annotations made the injector add the
// volume a kubelet message names ("" when none did: the pod's own).
func meshVolume(p *corev1.Pod, msg string) (volume, annotation string) {
	m := failedVolume.FindStringSubmatch(msg)
	if m == nil || p == nil {
		return "", ""
	}
	volume = m[1]
	if volume == bootstrapVolume && p.Annotations[annotationBootstrapOverride] != "" {
		return volume, annotationBootstrapOverride
	}
	var user map[string]json.RawMessage
	if json.Unmarshal([]byte(p.Annotations[annotationUserVolume]), &user) == nil {
		if _, ok := user[volume]; ok {
			return volume, annotationUserVolume
		}
	}
	return volume, ""
}

// meshVolumeFinding puts a setup failure down to the annotation that
// added the volume: the mesh's cause, with the annotation's removal as the
// fix beside creating what is missing (a choice: the volume was asked for).
func meshVolumeFinding(in *Input, f *Finding, msg string) {
	volume, annotation := meshVolume(in.Pod, msg)
	if annotation == "" {
		return
	}
	p := in.Pod
	f.Mesh = "volume " + volume + " was added by Istio's injector for the pod's annotation " + annotation + "=" + quoteValue(p.Annotations[annotation])
	f.Evidence += "; " + f.Mesh
	create := missingFix(in, msg, "")
	switch annotation {
	case annotationBootstrapOverride:
		// The ConfigMap holds the proxy's bootstrap (key
		// custom_bootstrap.json): a placeholder would not do.
		f.Fix = annotationPatch(p, annotation, "") + "   # a choice: the proxy then starts with the mesh's own bootstrap; or create the ConfigMap the annotation names, with the key custom_bootstrap.json holding the Envoy bootstrap to merge"
	case annotationUserVolume:
		remove := annotationPatch(p, annotation, "")
		if _, ok := p.Annotations[annotationUserVolumeMount]; ok {
			remove += "   # and " + annotationUserVolumeMount + " with it"
		}
		if create != "" {
			f.Fix = create + "\n# or, if the volume is not wanted: " + remove
		}
	}
}

func quoteValue(v string) string {
	b, _ := json.Marshal(oneLine(v, 80))
	return string(b)
}
