package injection

import "testing"

// A validation message keeps its first three field errors (an index in a
// path is not a bracket's end); a short one, or another, is kept whole.
func TestShortInvalid(t *testing.T) {
	long := `Pod "w-1" is invalid: [spec.initContainers[0].securityContext.capabilities: Forbidden: cannot be set for a windows pod, spec.initContainers[0].securityContext.privileged: Forbidden: x, y, spec.initContainers[1].securityContext.runAsUser: Forbidden: z, spec.containers[1].securityContext.runAsGroup: Forbidden: z] (tail)`
	want := `Pod "w-1" is invalid: [spec.initContainers[0].securityContext.capabilities: Forbidden: cannot be set for a windows pod, spec.initContainers[0].securityContext.privileged: Forbidden: x, y, spec.initContainers[1].securityContext.runAsUser: Forbidden: z, and 1 more like them] (tail)`
	checks := 0
	for in, out := range map[string]string{
		long: want,
		`Pod "w" is invalid: [spec.a: x, spec.b: y]`:           `Pod "w" is invalid: [spec.a: x, spec.b: y]`,
		`admission webhook "x" denied the request: a, b, c, d`: `admission webhook "x" denied the request: a, b, c, d`,
	} {
		checks++
		if got := ShortInvalid(in); got != out {
			t.Errorf("ShortInvalid(%q)\n = %q\nwant %q", in, got, out)
		}
	}
	t.Logf("%d checks", checks)
}
