package diagnose

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's words for a volume whose items name a key the ConfigMap
// or Secret does not have.
var missingKey = regexp.MustCompile(`references non-existent (config|secret) key: (\S+)`)

// missingKeyFix is the command that adds the key a volume's items name to
// the ConfigMap or Secret the pod's volume reads (the pod's own volume, or
// one the injector added for an annotation), "" when the message is not
// of a missing key or the volume is not the pod's.
func missingKeyFix(p *corev1.Pod, msg string) string {
	m := missingKey.FindStringSubmatch(msg)
	v := failedVolume.FindStringSubmatch(msg)
	if m == nil || v == nil || p == nil {
		return ""
	}
	kind, key := m[1], m[2]
	name := volumeObject(p, v[1], kind)
	if name == "" || !plainName.MatchString(key) {
		return ""
	}
	what, field := "configmap", "data"
	if kind == "secret" {
		what, field = "secret", "stringData"
	}
	return "kubectl patch " + what + " " + name + " -n " + p.Namespace + ` --type=merge -p '{"` + field + `":{"` + key + `":"VALUE"}}'` +
		"   # a choice: " + name + " has no key " + key + ", which volume " + v[1] + " mounts: add it with the content the app reads (VALUE is yours), or correct the volume's items"
}

// plainName is a key or name safe inside the patch's quotes.
var plainName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// volumeObject is the ConfigMap ("config") or Secret ("secret") volume of
// the pod reads, directly or projected ("" when it reads neither).
func volumeObject(p *corev1.Pod, volume, kind string) string {
	for _, v := range p.Spec.Volumes {
		if v.Name != volume {
			continue
		}
		switch {
		case kind == "config" && v.ConfigMap != nil:
			return v.ConfigMap.Name
		case kind == "secret" && v.Secret != nil:
			return v.Secret.SecretName
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if kind == "config" && s.ConfigMap != nil {
					return s.ConfigMap.Name
				}
				if kind == "secret" && s.Secret != nil {
					return s.Secret.Name
				}
			}
		}
	}
	return ""
}
