package diagnose

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// initRunsOnAfter is how long a user's init container may run, not
// failing, before it is taken for one that never ends.
const initRunsOnAfter = time.Minute

// waitsForSomething: a command that waits until something answers (a
// loop until a port opens, a name resolves, a database is ready): meant to
// end, so not a helper that runs on.
var waitsForSomething = regexp.MustCompile(`(?i)\buntil\b|\bwait|nc -z|\bping\b|getent|nslookup|\bdig\b|curl|wget|_isready|mysqladmin|healthz|/ready`)

// initRunsOn: the init container the pod is stuck on is the user's own, a
// regular one (it must end before the next starts), and has run for over
// a minute without failing, and its command is not a wait for something
// (until a port answers…): a helper meant to run beside the app (a log
// shipper, an agent) declared as an init container, as happens when
// sidecars move to initContainers without restartPolicy Always. The fix is
// that field (a native sidecar, Kubernetes 1.29+), a choice: a container
// meant to end waits for something its log names.
func (in *Input) initRunsOn(s *startup.StartupReport, name string) (ev, fix string, ok bool) {
	p := in.Pod
	spec, cs := in.container(name)
	if p == nil || s == nil || spec == nil || cs == nil || cs.Role != startup.RoleInit || cs.State != "running" || cs.Failing || cs.StartedAt == nil {
		return "", "", false
	}
	ran := s.Now.Sub(*cs.StartedAt).Round(time.Second)
	if ran < initRunsOnAfter {
		return "", "", false
	}
	if spec.RestartPolicy != nil || waitsForSomething.MatchString(strings.Join(append(append([]string(nil), spec.Command...), spec.Args...), " ")) {
		return "", "", false
	}
	ev = fmt.Sprintf("%s has run for %s without ending, and a regular init container must end before the next one, and the app, start: a helper meant to run beside the app (a log shipper, an agent) declared as an init container never ends; as a native sidecar (restartPolicy: Always) it would run beside the app", name, ran)
	fix = in.templateSpecFix(fmt.Sprintf(`{"spec":{"initContainers":[{"name":%q,"restartPolicy":"Always"}]}}`, name))
	if fix == "" {
		return "", "", false
	}
	note := "a choice: " + name + " as a native sidecar (Kubernetes 1.29+), when it is meant to run beside the app; when it is meant to end (a wait, a migration), what it waits for is the cause: kubectl logs " + p.Name + " -n " + p.Namespace + " -c " + name
	return ev, firstLineNote(fix, note), true
}
