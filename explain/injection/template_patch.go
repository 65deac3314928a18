package injection

import "fmt"

// SeccompRuntimeDefault is a pod template's spec with a pod-level
// RuntimeDefault seccomp profile, which every container inherits, the
// injected ones too.
const SeccompRuntimeDefault = `{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}`

// TemplatePatch is the merge patch command that applies template (a pod
// template's JSON) to the template of workload kind/name (lower case
// kind: "deployment", "cronjob", …): a CronJob's sits under its
// jobTemplate.
func TemplatePatch(kind, name, namespace, template string) string {
	path := `{"spec":{"template":` + template + `}}`
	if kind == "cronjob" {
		path = `{"spec":{"jobTemplate":{"spec":{"template":` + template + `}}}}`
	}
	return fmt.Sprintf("kubectl patch %s/%s -n %s --type=merge -p '%s'", kind, name, namespace, path)
}
