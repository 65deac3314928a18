// Package nsexec runs a fixed dump of the packet-filter rules in a pod's
// network namespace and returns its output. Two ways in: an ephemeral
// container added to the pod (pods/ephemeralcontainers), or a short-lived
// privileged pod on the pod's node that enters the pod's network namespace
// with nsenter. No user-supplied text ever reaches the command that runs.
package nsexec

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Ways into the pod's network namespace.
const (
	ViaEphemeral = "ephemeral"
	ViaNode      = "node"
)

// NodePodLabel marks the pods the node way creates, so that they can be
// found (and are always deleted).
const NodePodLabel = "kubectl-mesh.io/nsexec"

// Request is one dump.
type Request struct {
	Pod   *corev1.Pod
	Via   string
	Image string
	// NodeNamespace is where the node way creates its pod.
	NodeNamespace string
	// Interval, when set, takes a second dump that long after the first.
	Interval time.Duration
	Timeout  time.Duration
	// AllowNotRunning adds an ephemeral container to a pod that is not Running.
	AllowNotRunning bool
}

// Section is one part of the dump's output.
type Section struct {
	Round int
	Name  string // iptables-nft-save, ip6tables-legacy-save, resolv.conf
	Text  string
}

// Result is what came back.
type Result struct {
	Via       string
	Container string // the ephemeral container, or the node pod
	Sections  []Section
}

// Runner runs dumps with a client.
type Runner struct {
	Client kubernetes.Interface
	// Announce, when set, is told what is about to be created, just before
	// the request that creates it (as kubectl debug says it on stderr).
	Announce func(string)
	// DryRun, when set, is given each object a dump would create (the node
	// pod, or the pod with the ephemeral container it would be patched
	// with), exactly as it would be sent, instead of creating it; the dump
	// then ends with ErrDryRun. No permission is asked for.
	DryRun func(obj any) error
}

// ErrDryRun ends a dump that was only printed (Runner.DryRun): nothing was
// created, so nothing was read.
var ErrDryRun = errors.New("dry run: nothing was created")

func (r *Runner) announce(format string, args ...any) {
	if r.Announce != nil {
		r.Announce(fmt.Sprintf(format, args...))
	}
}

const marker = "### kubectl-mesh "

// endMarker is the last line of every dump, with its exit status: the
// dump's log is followed, and read as soon as this line is in it, without
// waiting for the kubelet to notice that the container ended (its relist
// runs once a second) and for the next look at the pod's status.
const endMarker = "### kubectl-mesh-end "

// withEnd is cmd, then the end marker with cmd's exit status, which stays
// the exit status.
func withEnd(cmd string) string {
	return cmd + "rc=$?; echo \"" + endMarker + "$rc\"; exit $rc\n"
}

// beforeEnd is the log up to the end marker's line, and the status on it
// ("" without one). Only a whole line is the marker: nothing a pod holds
// can print one (rules print no line of their own making; resolv.conf's
// comment lines are not dumped).
func beforeEnd(log string) (string, string) {
	i := 0
	if !strings.HasPrefix(log, endMarker) {
		i = strings.Index(log, "\n"+endMarker)
		if i < 0 {
			return log, ""
		}
		i++
	}
	status, _, _ := strings.Cut(log[i+len(endMarker):], "\n")
	return log[:i], strings.TrimSpace(status)
}

// dumpOf is a dump's output given its exit status: a dump that failed
// before printing any section is an error, with what it printed.
func dumpOf(out, status string) (string, error) {
	if status != "0" && !strings.Contains(out, marker) {
		return "", fmt.Errorf("the dump failed (exit %s): %s", status, strings.TrimSpace(out))
	}
	return out, nil
}

// NftMissing is what the nft section holds when the image has no nft: Istio's
// native nftables tables, if the pod has any, could not be read.
const NftMissing = "kubectl-mesh: nft is not in this image"

// ConntrackMissing is what the conntrack section holds when neither
// /proc/net/nf_conntrack nor the conntrack tool could be read.
const ConntrackMissing = "kubectl-mesh: no connection tracking table readable"

// script is the fixed command: the save tools of the backends that hold
// tables, with counters, nft's ruleset when Istio's native nftables tables
// are there, the DNS servers, and when asked the connection-tracking table
// (conntrack) and the socket tables (sockets). With rounds 2 it sleeps and
// dumps again; interval is a number of seconds formatted here. It runs as
// few programs as it can (small files are read with the shell's own read):
// at a fleet's scale, each program started costs more than what it reads.
func script(rounds int, interval int, root string, conntrack, sockets bool) string {
	var b strings.Builder
	// catf prints a file with the shell's builtins; has finds a table in
	// nft's list; legacy says whether the namespace has legacy tables.
	b.WriteString("catf() { while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done < \"$1\"; }\n")
	b.WriteString("has() { case \"$tables\" in *\"$1\"*) return 0 ;; esac; return 1; }\n")
	b.WriteString("legacy() { [ -r \"$1\" ] && read -r x < \"$1\"; }\n")
	// resolv.conf without its comment lines: the one file dumped whose lines
	// a pod writes as it likes, it could otherwise print a marker.
	b.WriteString("resolv() { while IFS= read -r l || [ -n \"$l\" ]; do case $l in '#'*|';'*) ;; *) printf '%s\\n' \"$l\" ;; esac; done < \"$1\"; }\n")
	// The kernel's tables under /proc/net are read with cat where there is
	// one: the shell's read takes a byte per system call, and each
	// /proc/net/tcp read walks the node's whole connection hash table
	// (about 20 ms a pod with catf, against 5 with cat, on this project's
	// machine).
	if conntrack || sockets {
		b.WriteString("C=catf; if command -v cat >/dev/null 2>&1; then C=cat; fi\n")
	}
	b.WriteString("for round in")
	for i := 1; i <= rounds; i++ {
		fmt.Fprintf(&b, " %d", i)
	}
	b.WriteString("; do\n")
	if rounds > 1 {
		fmt.Fprintf(&b, "  [ \"$round\" = 1 ] || sleep %d\n", interval)
	}
	// Only the backends that hold tables are dumped (a tool run for nothing
	// prints nothing anyway): nft's own list of tables says which of the
	// nft tools have something to read; the legacy tables of the namespace
	// are listed in /proc/net/ip{,6}_tables_names. Without nft, every tool runs.
	// nft's list failing (busy, no nf_tables) says nothing: every tool runs.
	b.WriteString("  tables=; nft=; if command -v nft >/dev/null 2>&1; then nft=1; tables=$(nft list tables 2>/dev/null) || nft=; fi\n")
	for _, t := range []struct{ tool, when string }{
		{"iptables-nft-save", `[ -z "$nft" ] || has 'table ip '`},
		{"ip6tables-nft-save", `[ -z "$nft" ] || has 'table ip6 '`},
		{"iptables-legacy-save", `legacy /proc/net/ip_tables_names`},
		{"ip6tables-legacy-save", `legacy /proc/net/ip6_tables_names`},
	} {
		fmt.Fprintf(&b, "  echo \"%s$round %s\"; if %s; then %s -c 2>&1; fi\n", marker, t.tool, t.when, t.tool)
	}
	// Istio's native nftables mode writes tables of its own (istio-*), which
	// only nft lists.
	fmt.Fprintf(&b, "  echo \"%s$round nft\"; if ! command -v nft >/dev/null 2>&1; then echo \"%s\"; elif [ -z \"$nft\" ] || has ' istio'; then nft list ruleset 2>&1; fi\n", marker, NftMissing)
	fmt.Fprintf(&b, "  echo \"%s$round resolv.conf\"; resolv %s/etc/resolv.conf 2>&1\n", marker, root)
	// The connection-tracking table (--connections) and the sockets with
	// their owners' uids (for the connections, and the listeners), read
	// from /proc/net, which is the namespace's own.
	if conntrack {
		fmt.Fprintf(&b, "  echo \"%s$round conntrack\"; if [ -r /proc/net/nf_conntrack ]; then $C /proc/net/nf_conntrack; else conntrack -L 2>/dev/null || echo \"%s\"; fi\n", marker, ConntrackMissing)
	}
	if sockets {
		fmt.Fprintf(&b, "  echo \"%s$round sockets\"; for t in tcp tcp6 udp udp6; do echo \"# $t\"; if [ -r /proc/net/$t ]; then $C /proc/net/$t; fi; done\n", marker)
	}
	b.WriteString("done\n")
	return b.String()
}

// parse splits the output at the markers.
func parse(out string) []Section {
	var secs []Section
	var cur *Section
	for _, line := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(line, marker) {
			f := strings.Fields(strings.TrimPrefix(line, marker))
			if len(f) == 2 {
				round, _ := strconv.Atoi(f[0])
				secs = append(secs, Section{Round: round, Name: f[1]})
				cur = &secs[len(secs)-1]
				continue
			}
		}
		if cur != nil {
			cur.Text += line
		}
	}
	return secs
}

// PermissionError names the permission a way needs and the user lacks:
// Need is it alone ("patch pods/ephemeralcontainers in namespace shop").
type PermissionError struct{ Msg, Need string }

func (e *PermissionError) Error() string { return e.Msg }

// check asks the apiserver whether the user may do each thing, before
// anything is changed.
func (r *Runner) check(ctx context.Context, attrs ...authorizationv1.ResourceAttributes) error {
	for _, a := range attrs {
		a := a
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
		res, err := r.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("checking permissions: %w", err)
		}
		if !res.Status.Allowed {
			return &PermissionError{Msg: fmt.Sprintf("not allowed to %s in namespace %q: that permission is needed to read the rules this way; nothing was changed", describe(a), a.Namespace),
				Need: fmt.Sprintf("%s in namespace %s", describe(a), a.Namespace)}
		}
	}
	return nil
}

var containerIDRE = regexp.MustCompile(`^[0-9a-f]{12,128}$`)

// Dump runs the dump the requested way.
func (r *Runner) Dump(ctx context.Context, req Request) (*Result, error) {
	if req.Timeout == 0 {
		req.Timeout = 60 * time.Second
	}
	rounds, seconds := 1, 0
	if req.Interval > 0 {
		rounds, seconds = 2, int(req.Interval.Round(time.Second)/time.Second)
		if seconds < 1 {
			seconds = 1
		}
	}
	switch req.Via {
	case ViaEphemeral, "":
		return r.ephemeral(ctx, req, rounds, seconds)
	case ViaNode:
		return r.node(ctx, req, rounds, seconds)
	}
	return nil, fmt.Errorf("unknown way %q: ephemeral or node", req.Via)
}

func (r *Runner) ephemeral(ctx context.Context, req Request, rounds, seconds int) (*Result, error) {
	p := req.Pod
	if p.Status.Phase != corev1.PodRunning && !req.AllowNotRunning {
		return nil, fmt.Errorf("pod %s/%s is %s, not Running: an ephemeral container cannot be removed once added; give --force to add one anyway, or --via node", p.Namespace, p.Name, p.Status.Phase)
	}
	name := "mesh-dump-" + rand.String(5)
	ec := EphemeralContainer(name, req.Image, script(rounds, seconds, "", true, true))
	if r.DryRun != nil {
		if err := r.DryRun(EphemeralPatchObject(p, ec)); err != nil {
			return nil, err
		}
		return nil, ErrDryRun
	}
	if err := r.check(ctx, EphemeralPermissions(p.Namespace)...); err != nil {
		return nil, err
	}
	// A strategic-merge patch of the pods/ephemeralcontainers subresource,
	// as kubectl debug sends: the permission checked above is the one used,
	// and whoever may run kubectl debug may run this.
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"ephemeralContainers": []corev1.EphemeralContainer{ec}}})
	if err != nil {
		return nil, err
	}
	r.announce("adding ephemeral container %s (image %s, NET_ADMIN and NET_RAW) to pod %s/%s: it cannot be removed and stays in the pod's spec until the pod is deleted", name, req.Image, p.Namespace, p.Name)
	if _, err := r.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "ephemeralcontainers"); err != nil {
		switch {
		case apierrors.IsNotFound(err) && strings.Contains(err.Error(), "ephemeralcontainers"):
			return nil, fmt.Errorf("this cluster does not serve pods/ephemeralcontainers (ephemeral containers disabled?): use --via node")
		case strings.Contains(err.Error(), "PodSecurity"):
			return nil, fmt.Errorf("the namespace's PodSecurity policy refuses a debug container with NET_ADMIN and NET_RAW: %v\nuse --via node (a privileged pod on the node, created in --node-namespace)", err)
		case apierrors.IsForbidden(err):
			return nil, &PermissionError{Msg: fmt.Sprintf("not allowed to patch pods/ephemeralcontainers in namespace %q: adding the debug container was refused: %v", p.Namespace, err),
				Need: "patch pods/ephemeralcontainers in namespace " + p.Namespace}
		}
		return nil, fmt.Errorf("adding the debug container: %w", err)
	}
	out, err := r.waitAndRead(ctx, p.Namespace, p.Name, name, true, req.Timeout+time.Duration(seconds)*time.Second)
	if err != nil {
		return nil, err
	}
	return &Result{Via: ViaEphemeral, Container: name, Sections: parse(out)}, nil
}

// EphemeralContainer is the debug container that runs dump (a script) in
// a pod's network namespace: root, NET_ADMIN and NET_RAW only, not
// privileged.
func EphemeralContainer(name, image, dump string) corev1.EphemeralContainer {
	var root int64
	no := false
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command:                  []string{"/bin/sh", "-c", withEnd(dump)},
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsNonRoot: &no, Privileged: &no, AllowPrivilegeEscalation: &no,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}}},
	}}
}

// EphemeralPatchObject is what a dry run prints for an ephemeral
// container: the pod, by name, with the one container its
// pods/ephemeralcontainers subresource would be patched with.
func EphemeralPatchObject(p *corev1.Pod, ec corev1.EphemeralContainer) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.Name, "namespace": p.Namespace},
		"spec":     map[string]any{"ephemeralContainers": []corev1.EphemeralContainer{ec}},
	}
}

// waitAndRead waits for the container to start, follows its log until the
// dump's end marker, and returns the dump. When the log ends without it
// (the dump failed, or following was refused), the container's end state
// says what happened.
func (r *Runner) waitAndRead(ctx context.Context, ns, pod, container string, ephemeral bool, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	followed := false
	for {
		p, err := r.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		statuses := p.Status.ContainerStatuses
		if ephemeral {
			statuses = p.Status.EphemeralContainerStatuses
		}
		for _, s := range statuses {
			if s.Name != container {
				continue
			}
			if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff" || w.Reason == "ErrImageNeverPull" || w.Reason == "InvalidImageName") {
				return "", fmt.Errorf("the debug image %s cannot be pulled (%s: %s); give another with --image", s.Image, w.Reason, w.Message)
			}
			if s.State.Terminated != nil {
				b, err := r.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
				if err != nil {
					return "", fmt.Errorf("reading the dump: %w", err)
				}
				out, status := beforeEnd(string(b))
				if status == "" {
					status = fmt.Sprint(s.State.Terminated.ExitCode)
				}
				return dumpOf(out, status)
			}
			if s.State.Running != nil && !followed {
				followed = true
				if out, ok, err := r.follow(ctx, ns, pod, container, deadline); ok || err != nil {
					return out, err
				}
			}
		}
		if p.Status.Phase == corev1.PodFailed {
			return "", fmt.Errorf("pod %s failed while the debug container ran", pod)
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("timed out after %s waiting for the debug container %s to finish", timeout, container)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// follow reads the container's log as it is written, until the end marker
// (ok) or until the log ends without it, or the deadline passes (not ok:
// the caller looks at the container's state).
func (r *Runner) follow(ctx context.Context, ns, pod, container string, deadline time.Time) (out string, ok bool, err error) {
	fctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	rc, err := r.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: true}).Stream(fctx)
	if err != nil {
		return "", false, ctx.Err()
	}
	defer rc.Close()
	var b strings.Builder
	br := bufio.NewReaderSize(rc, 64<<10)
	for {
		line, rerr := br.ReadString('\n')
		if code, found := strings.CutPrefix(line, endMarker); found && strings.HasSuffix(code, "\n") {
			out, err := dumpOf(b.String(), strings.TrimSpace(code))
			return out, true, err
		}
		b.WriteString(line)
		if rerr != nil {
			return "", false, ctx.Err()
		}
	}
}

func (r *Runner) node(ctx context.Context, req Request, rounds, seconds int) (*Result, error) {
	p := req.Pod
	if p.Spec.NodeName == "" {
		return nil, fmt.Errorf("pod %s/%s is not scheduled on a node yet", p.Namespace, p.Name)
	}
	cid := containerID(p)
	if cid == "" {
		return nil, fmt.Errorf("pod %s/%s has no running container to find its network namespace by", p.Namespace, p.Name)
	}
	if err := r.checkNode(ctx, req.NodeNamespace); err != nil {
		return nil, err
	}
	// Find a process of the pod by its container ID in the cgroup paths,
	// then run the dump in its network namespace, reading its resolv.conf.
	cmd := fmt.Sprintf("pid=; for d in /proc/[0-9]*; do if grep -q %s \"$d/cgroup\" 2>/dev/null; then pid=${d#/proc/}; break; fi; done\n"+
		"[ -n \"$pid\" ] || { echo 'no process of container %s on this node' >&2; exit 3; }\n"+
		"dump=$(cat <<'KMESH_DUMP'\n%sKMESH_DUMP\n)\n%s", cid, cid, script(rounds, seconds, "/proc/$PID/root", true, true), withEnd("PID=$pid nsenter -t \"$pid\" -n /bin/sh -c \"$dump\" 2>&1\n"))
	out, where, err := r.runNodePod(ctx, p.Spec.NodeName, req.NodeNamespace, req.Image, cmd, req.Timeout+time.Duration(seconds)*time.Second)
	if err != nil {
		return nil, err
	}
	return &Result{Via: ViaNode, Container: where, Sections: parse(out)}, nil
}

// containerID is the ID of a running container of p (any will do: they share
// the pod's network namespace), "" when none runs.
func containerID(p *corev1.Pod) string {
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...) {
		if s.State.Running != nil && s.ContainerID != "" {
			_, id, _ := strings.Cut(s.ContainerID, "://")
			if containerIDRE.MatchString(id) {
				return id
			}
		}
	}
	return ""
}

// checkNode asks whether the user may run a node pod in namespace ns.
func (r *Runner) checkNode(ctx context.Context, ns string) error {
	if r.DryRun != nil {
		return nil // nothing is created: nothing to be allowed
	}
	return r.check(ctx, NodePodPermissions(ns)...)
}

// NodePodPermissions are what running a node pod in namespace ns takes
// (checked before it is created).
func NodePodPermissions(ns string) []authorizationv1.ResourceAttributes {
	return []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Resource: "pods"},
		{Namespace: ns, Verb: "delete", Resource: "pods"},
		{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "log"},
	}
}

// EphemeralPermissions are what adding a debug container to a pod of
// namespace ns and reading its output take (checked before it is added).
func EphemeralPermissions(ns string) []authorizationv1.ResourceAttributes {
	return []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "patch", Resource: "pods", Subresource: "ephemeralcontainers"},
		{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "log"},
	}
}

// Describe says a list of permissions as RBAC rules read: "patch
// pods/ephemeralcontainers, get pods/log".
func Describe(attrs []authorizationv1.ResourceAttributes) string {
	var out []string
	for _, a := range attrs {
		out = append(out, describe(a))
	}
	return strings.Join(out, ", ")
}

// describe says one permission: "patch pods/ephemeralcontainers".
func describe(a authorizationv1.ResourceAttributes) string {
	if a.Subresource != "" {
		return a.Verb + " " + a.Resource + "/" + a.Subresource
	}
	return a.Verb + " " + a.Resource
}

// NodePod is the short-lived privileged pod that runs cmd on node (host
// PID and network, every taint tolerated, no service account token).
func NodePod(name, node, ns, image, cmd string) *corev1.Pod {
	yes := true
	var zero int64
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{NodePodLabel: "node"}},
		Spec: corev1.PodSpec{
			NodeName: node, HostPID: true, HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero, AutomountServiceAccountToken: new(bool),
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "dump", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{"/bin/sh", "-c", cmd}, SecurityContext: &corev1.SecurityContext{Privileged: &yes, RunAsUser: &zero}}},
		},
	}
}

// runNodePod runs cmd in a short-lived privileged pod on node (host PID and
// network, in namespace ns), waits for it to finish and returns its output
// and "<ns>/<pod>". The pod is deleted on success, on error and when ctx ends.
func (r *Runner) runNodePod(ctx context.Context, node, ns, image, cmd string, timeout time.Duration) (string, string, error) {
	var zero int64
	name := "mesh-dump-" + rand.String(5)
	pod := NodePod(name, node, ns, image, cmd)
	if r.DryRun != nil {
		if err := r.DryRun(pod); err != nil {
			return "", "", err
		}
		return "", "", ErrDryRun
	}
	// Always delete it, by name: on success, on error, and when interrupted
	// even while its creation is in flight (registered before the create).
	// When the create's outcome is unknown (the request was cut off), the
	// pod may still appear: look for it a little longer before giving up.
	var createErr error
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		pods := r.Client.CoreV1().Pods(ns)
		// A refusal (forbidden, invalid, PodSecurity, …) created nothing; a
		// cut-off request, a timeout or a server error may have.
		uncertain := createErr != nil && !apierrors.IsAlreadyExists(createErr) && !apierrors.IsForbidden(createErr) &&
			!apierrors.IsInvalid(createErr) && !apierrors.IsBadRequest(createErr) && !apierrors.IsNotFound(createErr)
		if createErr != nil && !uncertain {
			return // refused by the apiserver: nothing was created
		}
		err := pods.Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if !uncertain || !apierrors.IsNotFound(err) {
			return
		}
		_ = wait.PollUntilContextTimeout(dctx, 200*time.Millisecond, 3*time.Second, false, func(ctx context.Context) (bool, error) {
			if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err == nil {
				return true, nil
			}
			return false, nil
		})
	}()
	r.announce("creating pod %s/%s on node %s (privileged, hostPID, hostNetwork, tolerates every taint): it is deleted when the read ends, also on error or Ctrl-C", ns, name, node)
	if _, createErr = r.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); createErr != nil {
		if strings.Contains(createErr.Error(), "PodSecurity") {
			return "", "", fmt.Errorf("namespace %q refuses the privileged node pod (%v): give a namespace that allows it with --node-namespace", ns, createErr)
		}
		return "", "", fmt.Errorf("creating the node pod: %w", createErr)
	}
	out, err := r.waitAndRead(ctx, ns, name, "dump", false, timeout)
	if err != nil {
		return "", "", err
	}
	return out, ns + "/" + name, nil
}

// podMarker starts one pod's part of a node dump; errMarker says why a pod
// has no dump.
const (
	podMarker = "### kubectl-mesh-pod "
	errMarker = "### kubectl-mesh-error "
)

// PodDump is one pod's part of a node's dump: its sections, or why there are none.
type PodDump struct {
	Sections []Section
	Err      string
}

// NodeRequest is one node's dump: the pods (all on Node), the node pod's
// namespace and image, how many pods are read at once (0: the node's
// CPUs), whether their connection-tracking tables are read too (with
// their socket tables), whether their socket tables are (for their
// listeners), and the node pod's timeout. Rules and resolv.conf are
// always read.
type NodeRequest struct {
	Node, Namespace, Image string
	Pods                   []*corev1.Pod
	Parallel               int
	Conntrack, Sockets     bool
	Timeout                time.Duration
}

// PodTimeout is how long one pod's dump may take in a node dump: past it,
// that pod is unreadable ("timed out"), and the others go on.
const PodTimeout = 20 * time.Second

// DumpNode reads the rules of every pod given — all on node — with a single
// short-lived node pod (in nodeNS, with image). It finds every pod's
// network namespace in one pass over the node's processes (their cgroups
// name their container IDs), then runs the fixed dump in each, parallel at
// a time (0: the node's CPUs), each pod within PodTimeout. It returns each
// pod's dump by "namespace/name", and the node pod's name. The node pod is
// deleted on success, on error and when ctx ends.
func (r *Runner) DumpNode(ctx context.Context, req NodeRequest) (map[string]PodDump, string, error) {
	node, nodeNS, image, pods, parallel, timeout := req.Node, req.Namespace, req.Image, req.Pods, req.Parallel, req.Timeout
	if err := r.checkNode(ctx, nodeNS); err != nil {
		return nil, "", err
	}
	out := map[string]PodDump{}
	var list strings.Builder
	n := 0
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		cid := containerID(p)
		if cid == "" || p.Spec.NodeName != node {
			out[key] = PodDump{Err: "no running container on node " + node + " to find its network namespace by"}
			continue
		}
		n++
		// Names and IDs are checked (DNS labels, hex): safe in the script.
		fmt.Fprintf(&list, "%s %s\n", key, cid)
	}
	if n == 0 {
		return out, "", nil
	}
	if parallel < 0 {
		parallel = 0
	}
	cmd := NodeScript(list.String(), parallel, PodTimeout, req.Conntrack, req.Conntrack || req.Sockets)
	// The whole node pod's time: the timeout given, and each round of
	// reads at worst (two at a time, when the node's CPUs are not known).
	lanes := max(parallel, 2)
	timeout += time.Duration((n+lanes-1)/lanes) * PodTimeout / 4
	text, where, err := r.runNodePod(ctx, node, nodeNS, image, cmd, timeout)
	if err != nil {
		return nil, where, err
	}
	for key, d := range ParseNodeOutput(text) {
		out[key] = d
	}
	for _, p := range pods {
		if _, ok := out[p.Namespace+"/"+p.Name]; !ok {
			out[p.Namespace+"/"+p.Name] = PodDump{Err: "the node pod's output has no part for it"}
		}
	}
	return out, where, nil
}

// ParseNodeOutput splits a node pod's output (NodeScript's) into each
// pod's dump, by "namespace/name".
func ParseNodeOutput(text string) map[string]PodDump {
	out := map[string]PodDump{}
	var key string
	var part strings.Builder
	flush := func() {
		if key == "" {
			return
		}
		d := PodDump{Sections: parse(part.String())}
		if i := strings.Index(part.String(), errMarker); i >= 0 {
			d.Err = strings.TrimSpace(strings.SplitN(part.String()[i+len(errMarker):], "\n", 2)[0])
		}
		out[key] = d
	}
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, podMarker) {
			flush()
			key = strings.TrimSpace(strings.TrimPrefix(line, podMarker))
			part.Reset()
			continue
		}
		part.WriteString(line)
	}
	flush()
	return out
}

// NodeScript is the node pod's command for the pods listed ("namespace/name
// containerID" lines): one pass over /proc maps container IDs to
// processes; the pods are dealt into parallel lanes (0: the node's CPUs),
// each lane reads its pods one after another into a file of its own; the
// files are printed once every lane is done.
//
// Each pod is read within podTimeout (whole seconds): a watchdog per lane,
// a subshell of the script, kills a dump that runs longer (with the
// programs it started) and the pod is unreadable, "timed out". No process
// the script starts outlives it: the watchdog is waited for, and nothing
// daemonizes. That is why no timeout(1) is used: busybox's leaves a
// watcher process behind for up to a second, and orphans reparented to
// containerd's shim, as a host-PID pod's are, made it report the node pod
// finished up to 30 s late (containerd 1.6: "get state … context deadline
// exceeded", then "shim disconnected").
func NodeScript(pods string, parallel int, podTimeout time.Duration, conntrack, sockets bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "dump=$(cat <<'KMESH_DUMP'\n%sKMESH_DUMP\n)\n", script(1, 0, "/proc/$PID/root", conntrack, sockets))
	fmt.Fprintf(&b, "P=%d; T=%d\n", parallel, max(1, int(podTimeout.Round(time.Second).Seconds())))
	b.WriteString(`[ "$P" -gt 0 ] || P=$(nproc 2>/dev/null || echo 2)
if sleep 0.01 2>/dev/null; then TICK=0.2; N=$((T * 5)); else TICK=1; N=$T; fi
W=$(mktemp -d)
grep -H -o -E '[0-9a-f]{64}' /proc/[0-9]*/cgroup 2>/dev/null > "$W/ids"
cat > "$W/pods" <<'KMESH_PODS'
`)
	b.WriteString(pods)
	b.WriteString("KMESH_PODS\n")
	// One awk joins the pods with the processes; each lane then reads "key
	// containerID pid" lines. For its j-th pod, a lane writes the dump's
	// pid and a "." to $l.run.<j> (a new file each, so never read half
	// rewritten), then $l.done.<j> once the dump has ended. Its watchdog
	// follows j: a dump running N ticks is ended with everything it
	// started, and marked in $l.killed.<j> (only when it was still
	// running: a dump that ended meanwhile is not); the lane then says
	// "timed out".
	fmt.Fprintf(&b, `awk 'NR == FNR { n = index($0, ":"); p = substr($0, 7, n - 14); c = substr($0, n + 1); if (!(c in pid)) pid[c] = p; next }
  { print $1, $2, (($2 in pid) ? pid[$2] : "-") }' "$W/ids" "$W/pods" > "$W/join"
i=0; while read key cid pid; do echo "$key $cid $pid" >> "$W/lane.$((i %% P))"; i=$((i+1)); done < "$W/join"
# kids: every process under $1, in $all, and their parents, in $parents.
kids() {
  all=" "; parents=" "; set=" $1 "; more=1
  while [ -n "$more" ]; do
    more=
    for f in /proc/[0-9]*/stat; do
      p=; pp=; read -r p s s pp s 2>/dev/null < "$f" || continue
      case $set in *" $pp "*) ;; *) continue ;; esac
      case $set in *" $p "*) continue ;; esac
      set="$set$p "; all="$all$p "; parents="$parents$pp "; more=1
    done
  done
}
# stop ends $1, a dump this lane started and that has not ended, marking
# it in $2. The programs under it are killed first, leaves first, while
# their parents run (and reap them): a process killed before its children
# would leave them to the shim. The dump is stopped while it is looked at,
# and killed once nothing is under it.
stop() {
  i=0
  while [ "$i" -lt 50 ]; do
    i=$((i + 1))
    kill -STOP "$1" 2>/dev/null || return 0
    p=; st=; pp=; read -r p s st pp s 2>/dev/null < "/proc/$1/stat"
    if [ "$pp" != "$lane" ] || [ "$st" = Z ]; then kill -CONT "$1" 2>/dev/null; return 0; fi
    [ -e "$2" ] || : > "$2"
    kids "$1"
    if [ "$all" = " " ]; then kill -9 "$1" 2>/dev/null; return 0; fi
    kill -CONT "$1" 2>/dev/null
    for p in $all; do case $parents in *" $p "*) ;; *) kill -9 "$p" 2>/dev/null ;; esac; done
    sleep $TICK
  done
  kill -9 "$1" 2>/dev/null
}
for l in "$W"/lane.*; do
  ( read -r lane x < /proc/self/stat
    ( k=1; n=0
      while [ ! -e "$l.end" ]; do
        sleep $TICK
        while [ -e "$l.done.$k" ]; do k=$((k + 1)); n=0; done
        c=; dot=; [ ! -e "$l.run.$k" ] || read -r c dot < "$l.run.$k"
        [ "$dot" = . ] || continue
        n=$((n + 1)); [ "$n" -eq "$N" ] || continue
        stop "$c" "$l.killed.$k"
      done ) &
    wd=$!; j=0
    while read key cid pid; do
      j=$((j + 1))
      echo '%s'"$key"
      if [ "$pid" = - ]; then echo '%s'"no process of container $cid on this node"; : > "$l.done.$j"; continue; fi
      PID=$pid nsenter -t "$pid" -n /bin/sh -c "$dump" &
      echo "$! ." > "$l.run.$j"; wait $!; : > "$l.done.$j"
      [ ! -e "$l.killed.$j" ] || echo '%s'"timed out after ${T}s reading its rules"
    done < "$l" > "$l.out" 2>&1
    : > "$l.end"; wait $wd ) &
done
wait
cat "$W"/lane.*.out
echo '%s0'
rm -rf "$W"
`, podMarker, errMarker, errMarker, endMarker)
	return b.String()
}
