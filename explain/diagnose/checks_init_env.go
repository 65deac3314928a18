package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeInitEnv: istio-init's environment sets an istio-iptables flag its
// arguments do not, and so changes the capture rules.
const CodeInitEnv = "KM-CAP-016"

// initSetting is an istio-iptables flag it also reads from its environment
// (the variable env: the flag's name upper-cased, "-" as "_"), used when
// the flag itself is not among its arguments.
type initSetting struct {
	env   string
	flags []string // the flag's forms; one among the arguments wins
	from  int      // the first minor release that reads it
	// status is what it does to the pod: Fail when it lets traffic
	// bypass the proxy or leaves the pod without rules, Warning when the
	// rules differ from what the pod's annotations ask.
	status string
	// applies says whether value v changes the rules of pod p; does says
	// what it does then.
	applies func(p *corev1.Pod, v string) bool
	does    func(p *corev1.Pod, v string) string
}

func anyValue(_ *corev1.Pod, v string) bool { return v != "" }

func trueValue(_ *corev1.Pod, v string) bool {
	on, err := strconv.ParseBool(v)
	return err == nil && on
}

// initSettings are the ones that change the rules, as istio-iptables
// reads them from 1.20 (viper's environment) through 1.31 (flag.BindEnv).
// DRY_RUN (KM-CAP-015) and the owner groups (KM-CAP-014) have their own
// checks; the flags the injector always passes (-u, -m, -i, -x, -b, -d,
// -z) override their variables and are left out.
var initSettings = []initSetting{
	{env: "PROXY_GID", flags: []string{"-g", "--proxy-gid"}, from: 20, status: Fail,
		applies: func(p *corev1.Pod, v string) bool { return v != "" && v != proxyGroup(p) },
		does: func(p *corev1.Pod, v string) string {
			return fmt.Sprintf("its rules let the traffic of group %s out uncaptured, instead of the proxy's own group %s: every process of group %s (%s) bypasses the proxy", v, proxyGroup(p), v, groupHolders(p, v))
		}},
	{env: "SKIP_RULE_APPLY", flags: []string{"--skip-rule-apply"}, from: 20, status: Fail, applies: trueValue,
		does: func(*corev1.Pod, string) string {
			return "istio-iptables writes no rules at all: nothing of the pod's traffic goes through the proxy, though the pod is ready"
		}},
	{env: "CLEANUP_ONLY", flags: []string{"--cleanup-only"}, from: 24, status: Fail, applies: trueValue,
		does: func(*corev1.Pod, string) string {
			return "istio-iptables only removes rules and writes none: nothing of the pod's traffic goes through the proxy, though the pod is ready"
		}},
	{env: "ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE", flags: []string{"-o", "--istio-local-outbound-ports-exclude"}, from: 20, status: Warning, applies: anyValue,
		does: func(_ *corev1.Pod, v string) string {
			return "outbound traffic to ports " + v + " bypasses the proxy, though no annotation of the pod says so"
		}},
	{env: "ISTIO_OUTBOUND_PORTS", flags: []string{"-q", "--istio-outbound-ports"}, from: 20, status: Warning, applies: anyValue,
		does: func(_ *corev1.Pod, v string) string {
			return "outbound traffic to ports " + v + " is captured besides the ranges, though no annotation of the pod says so"
		}},
	{env: "ISTIO_EXCLUDE_INTERFACES", flags: []string{"-c", "--istio-exclude-interfaces"}, from: 20, status: Warning, applies: anyValue,
		does: func(_ *corev1.Pod, v string) string {
			return "traffic through interfaces " + v + " bypasses the proxy, though no annotation of the pod says so"
		}},
}

func init() {
	register(&Spec{Code: CodeInitEnv, Title: "istio-init's environment changes its rules", Stage: CheckCapture, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "istio-iptables reads each of its flags from its environment too (PROXY_GID for -g, SKIP_RULE_APPLY, CLEANUP_ONLY, ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE for -o, …), where the flag is not among its arguments. The injector copies proxyMetadata (the pod's proxy.istio.io/config, the mesh's defaultConfig) into istio-init's environment, so a variable there changes the rules while the arguments, and the pod's annotations, look right: PROXY_GID other than the proxy's group lets that group's traffic out uncaptured (gid 0: most apps); SKIP_RULE_APPLY or CLEANUP_ONLY leave the pod with no rules.",
		Detects: "On a pod with a sidecar and istio-init: the variables above in istio-init's env whose flag its arguments do not give, with a value that changes the rules (PROXY_GID other than istio-proxy's runAsGroup, else 1337; SKIP_RULE_APPLY or CLEANUP_ONLY true, CLEANUP_ONLY from 1.24; the port and interface lists set).",
		Fixes:   "The pod's proxy.istio.io/config without those variables (a patch of the template, the rest of it kept; the rollout re-creates the pods); when the mesh's defaultConfig sets them, remove them there, then re-create the pods.",
		Source:  "istio-iptables (tools/istio-iptables: its flags bound to the environment, 1.20 through 1.31; PROXY_GID checked on the 1.31 binary: --gid-owner 0); Istio's injection template (proxyMetadata into istio-init's env)",
		Planted: "a Deployment whose proxy.istio.io/config sets proxyMetadata PROXY_GID=\"0\"",
		run:     initEnvSettings})
}

// proxyGroup is the group istio-proxy runs as: its runAsGroup, else the
// proxy's uid (istio-iptables' default for -g).
func proxyGroup(p *corev1.Pod) string {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name == istio.ProxyContainer {
				if g, _ := runAsGroup(p, c); g != "" {
					return g
				}
			}
		}
	}
	return istio.ProxyGID
}

// groupHolders says which of the pod's app containers run as group gid.
func groupHolders(p *corev1.Pod, gid string) string {
	var in, maybe []string
	for _, c := range appContainers(p) {
		switch g, _ := runAsGroup(p, c); g {
		case gid:
			in = append(in, c.Name)
		case "":
			maybe = append(maybe, c.Name)
		}
	}
	switch {
	case len(in) > 0:
		return "here: container " + strings.Join(in, ", ")
	case len(maybe) > 0 && gid == "0":
		return "here: container " + strings.Join(maybe, ", ") + ", unless its image sets another group: no runAsGroup is set, and root's group is an image's default"
	case len(maybe) > 0:
		return "container " + strings.Join(maybe, ", ") + " if its image runs as that group"
	}
	return "none of the pod's own containers sets it"
}

// initArgs are istio-init's arguments.
func initArgs(p *corev1.Pod) []string {
	for _, c := range p.Spec.InitContainers {
		if c.Name == istio.InitContainer {
			return append(append([]string{}, c.Command...), c.Args...)
		}
	}
	return nil
}

// givesFlag says whether args give one of flags (-g 0, -g=0, --proxy-gid 0).
func givesFlag(args, flags []string) bool {
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if slices.Contains(flags, name) {
			return true
		}
	}
	return false
}

func initEnvSettings(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	args := initArgs(p)
	if args == nil {
		return nil // no istio-init: the CNI plugin writes the rules
	}
	minor := 0
	for _, c := range p.Spec.InitContainers {
		if v, ok := istio.ImageVersion(c.Image); ok && c.Name == istio.InitContainer {
			minor = v.Minor
		}
	}
	var said, does, vars []string
	status := Warning
	unknownRelease := false
	for _, s := range initSettings {
		v, set := initEnv(p, s.env)
		if !set || givesFlag(args, s.flags) || !s.applies(p, v) || minor != 0 && minor < s.from {
			continue
		}
		said = append(said, s.env+"="+strconv.Quote(v))
		d := s.does(p, v)
		if minor == 0 && s.from > 20 {
			d += fmt.Sprintf(" (if its release is 1.%d or later, which reads it; istio-init's image does not say its release)", s.from)
			unknownRelease = true
		}
		does = append(does, s.env+": "+d)
		vars = append(vars, s.env)
		if s.status == Fail {
			status = Fail
		}
	}
	if len(said) == 0 {
		return nil
	}
	if status == Fail && unknownRelease && len(vars) == 1 {
		status = Unknown
	}
	head := "istio-init's environment sets " + strings.Join(said, ", ")
	fd := Finding{Status: status, Mesh: head, explains: []string{CodeRulesDrift, CodeBypassing},
		Evidence: head + " (from proxyMetadata), flags its arguments do not give, so istio-iptables takes them from there: " + strings.Join(does, "; ")}
	fd.Fix = proxyMetadataFix(p, vars, "istio-init's rules follow its arguments and the pod's annotations again")
	return []Finding{fd}
}

// proxyMetadataFix takes vars out of the proxyMetadata of the pod's
// proxy.istio.io/config, by a patch of its template (the rest of it kept),
// or says where else they are set; then means what that gives.
func proxyMetadataFix(p *corev1.Pod, vars []string, then string) string {
	conf := p.Annotations[istio.AnnotationProxyConfig]
	value, found := withoutProxyMetadata(conf, vars)
	list := strings.Join(vars, ", ")
	if found && conf != "" {
		if fix := setTemplateAnnotations(p, map[string]string{istio.AnnotationProxyConfig: value}); !strings.HasPrefix(fix, "in the pod's manifest") {
			return fix + "   # the pod's proxy.istio.io/config without " + list + ": " + then + " (the rollout re-creates the pods)"
		}
		return "in the pod's manifest, remove " + list + " from the proxyMetadata of its proxy.istio.io/config annotation, then create it again"
	}
	return "kubectl get configmap istio -n istio-system -o yaml   # the mesh's defaultConfig.proxyMetadata (or a revision's istio-REV) sets " + list + ": remove it there, then re-create the pod"
}

// withoutProxyMetadata is a proxy.istio.io/config value without vars in its
// proxyMetadata (the rest kept), and whether it had any of them.
func withoutProxyMetadata(conf string, vars []string) (string, bool) {
	return injection.EditProxyMetadata(conf, func(md map[string]any) bool {
		found := false
		for _, v := range vars {
			_, ok := md[v]
			found = found || ok
			delete(md, v)
		}
		return found
	})
}
