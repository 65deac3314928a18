// Package rules reads pods' capture rules from their network namespaces —
// one pod through an ephemeral container or a node pod (ReadPod), every pod
// of a node with one node pod (Audit) — and builds what explain/capture
// explains: the dumps, the pod's addresses, ports, proxy uid and DNS
// servers, and what the rules are compared with.
package rules

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// Request is what ReadPod reads, and how.
type Request struct {
	Pod *corev1.Pod
	// Container names the container whose image the reader runs; Image
	// overrides it (default: the proxy's image).
	Container, Image string
	// Via is nsexec.ViaEphemeral or nsexec.ViaNode; NodeNamespace is
	// where a node pod runs.
	Via, NodeNamespace string
	// Interval, when set, dumps twice that far apart (counter deltas).
	Interval, Timeout time.Duration
	// Force reads a pod that is not Running (an ephemeral container).
	Force bool
	// Connections keeps the connection-tracking table and sockets.
	Connections bool
	// Announce, when set, is told what is about to be created (the
	// ephemeral container or the node pod), just before it is.
	Announce func(string)
	// DryRun, when set, is given what would be created instead of creating
	// it (nsexec.Runner.DryRun); ReadPod then returns nsexec.ErrDryRun.
	DryRun func(obj any) error
}

// Read is a pod's rules as read: the explanation's input, the dumps as
// read (raw), which backends held rules, and the reader's own result.
type Read struct {
	Input   capture.CaptureInput
	Raw     [][]byte
	Backend string
	Result  *nsexec.Result
}

// ReadPod dumps the rules of a running pod and takes the pod's own context:
// addresses, container ports, proxy uid, DNS servers, and the arguments its
// rules were written from (for an ambient pod, istio-cni's ConfigMap).
func ReadPod(ctx context.Context, ic *inspect.Client, req Request) (*Read, error) {
	pod := req.Pod
	image := req.Image
	if image == "" {
		image = ImageOf(pod, req.Container)
	}
	_, ambient := pod.Annotations[istio.AnnotationRedirection]
	agentImage := "" // the istio-cni agent's, when looked up here
	if image == "" && ambient && req.Container == "" {
		// An ambient pod has no proxy container: the istio-cni agent on its
		// node has the tools, and its image is on the node already.
		var err error
		if image, err = AgentImage(ctx, ic, pod.Spec.NodeName); err != nil {
			return nil, &engine.InputError{Err: fmt.Errorf("pod %s is in ambient mode and has no istio-proxy container; the istio-cni agent's image on node %s could not be looked up (%v): give an image with iptables with --image", pod.Name, pod.Spec.NodeName, inspect.ExplainAPIError(err, "list pods -l "+injection.AmbientCNISelector))}
		}
		agentImage = image
	}
	if image == "" {
		if req.Container != "" {
			return nil, &engine.InputError{Err: fmt.Errorf("pod %s has no container %q", pod.Name, req.Container)}
		}
		return nil, &engine.InputError{Err: fmt.Errorf("pod %s has no istio-proxy or istio-init container whose image has iptables: give one with --image", pod.Name)}
	}
	res, err := (&nsexec.Runner{Client: ic.Kube, Announce: req.Announce, DryRun: req.DryRun}).Dump(ctx, nsexec.Request{Pod: pod, Via: req.Via, Image: image,
		NodeNamespace: req.NodeNamespace, Interval: req.Interval, Timeout: req.Timeout, AllowNotRunning: req.Force})
	if err != nil {
		return nil, err
	}
	in, raw, backend, err := LiveInput(pod, res)
	if errors.Is(err, ErrNoRules) {
		// Read, and empty: compared with what the pod calls for, every rule is missing.
		in.Dumps, backend, err = []*capture.Ruleset{{Family: "ipv4"}}, "no rules in any table", nil
	}
	if err != nil {
		return nil, err
	}
	notes := in.Notes[:0]
	for _, n := range in.Notes {
		if req.Connections || !strings.HasPrefix(n, "the connection tracking table") {
			notes = append(notes, n)
		}
	}
	in.Notes = notes
	if !req.Connections {
		in.Conntrack, in.Sockets, in.ConntrackRead = "", "", false
	} else if !in.ConntrackRead {
		in.Notes = append(in.Notes, "--connections: the pod's connection tracking table could not be read")
	}
	r := &Read{Input: in, Raw: raw, Backend: backend, Result: res}
	if err := expectAmbient(ctx, ic, pod, &r.Input, agentImage); err != nil {
		return nil, err
	}
	return r, nil
}

// expectAmbient sets what a pod's ambient in-pod rules are compared with:
// istio-cni's ConfigMap and the pod's annotations. Unread, nothing is
// compared, and the note says why.
func expectAmbient(ctx context.Context, ic *inspect.Client, pod *corev1.Pod, in *capture.CaptureInput, agentImage string) error {
	ambient := false
	for _, d := range in.Dumps {
		ambient = ambient || capture.IsAmbientInPod(d)
	}
	if !ambient || in.ExpectArgs != nil {
		return nil
	}
	cm, unread, err := CNIConfig(ctx, ic)
	switch {
	case err != nil:
		return err
	case cm == nil:
		in.Notes = append(in.Notes, unread+": the in-pod rules are not compared")
	default:
		in.Ambient = AmbientExpectation(cm, pod)
		in.Ambient.Release, in.Ambient.ReleaseFrom = AgentRelease(ctx, ic, pod.Spec.NodeName, cm, agentImage)
	}
	return nil
}

// NoRules is the capture report of a pod whose network namespace holds no
// rule at all (in: what was read of it): as it should be for a pod outside
// the mesh; else every rule its arguments call for is missing. Its flows,
// when read, are classified all the same.
func NoRules(p *corev1.Pod, in capture.CaptureInput) *capture.CaptureReport {
	in.Dumps = []*capture.Ruleset{{Family: "ipv4"}}
	in.Traces = nil
	if in.Context == nil {
		in.Context = &capture.PodContext{ProxyUID: istio.ProxyUID}
	}
	if args, env, src, ok := capture.CaptureArgsFromPod(p); ok {
		in.ExpectArgs, in.ExpectEnv, in.ExpectFrom = args, env, src
		in.IstioVersion, in.IstioVersionFrom = capture.IstioVersionFromPod(p)
	}
	rep, err := capture.ExplainCapture(in)
	if err != nil {
		return nil
	}
	return rep
}

// truncate cuts s to n bytes and an ellipsis (as render.Truncate).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// AgentImage is the image of the istio-cni agent on node ("" when none
// runs there): it has the iptables tools, and it is on the node already.
func AgentImage(ctx context.Context, ic *inspect.Client, node string) (string, error) {
	agent, err := ic.AmbientAgent(ctx, node)
	if err != nil || agent == nil || len(agent.Spec.Containers) == 0 {
		return "", err
	}
	return agent.Spec.Containers[0].Image, nil
}

// AgentRelease is the release of the istio-cni agent that writes a node's
// in-pod rules: its image tag, else the ConfigMap's CURRENT_AGENT_VERSION;
// "" and why when neither is a version. image is the agent's image when
// already read ("": it is looked up).
func AgentRelease(ctx context.Context, ic *inspect.Client, node string, cm *corev1.ConfigMap, image string) (release, from string) {
	var err error
	if image == "" {
		image, err = AgentImage(ctx, ic, node)
	}
	var tried []string
	switch {
	case err != nil:
		tried = append(tried, "the istio-cni agent on node "+node+" could not be read: "+inspect.ExplainAPIError(err, "list pods -l "+injection.AmbientCNISelector).Error())
	case image == "":
		tried = append(tried, "no istio-cni agent pod on node "+node)
	default:
		tag := istio.ImageTag(image)
		if _, ok := istio.ParseVersion(tag); ok {
			return tag, "the istio-cni agent's image " + image + " on node " + node
		}
		tried = append(tried, "the istio-cni agent's image "+image+" names no version")
	}
	if cm != nil {
		v := cm.Data["CURRENT_AGENT_VERSION"]
		if _, ok := istio.ParseVersion(v); ok {
			return v, "CURRENT_AGENT_VERSION of ConfigMap " + cm.Namespace + "/" + cm.Name
		}
		tried = append(tried, fmt.Sprintf("CURRENT_AGENT_VERSION %q is not a version", v))
	}
	return "", strings.Join(tried, "; ")
}

// CNIConfig reads istio-cni's ConfigMap, what ambient pods' in-pod
// rules are compared with; without it, unread says why.
func CNIConfig(ctx context.Context, ic *inspect.Client) (cm *corev1.ConfigMap, unread string, err error) {
	cm, err = ic.IstioCNIConfig(ctx)
	switch {
	case apierrors.IsForbidden(err):
		return nil, "istio-cni's ConfigMap could not be read (" + inspect.ExplainAPIError(err, "list configmaps -l istio.io/rev (all namespaces)").Error() + ")", nil
	case err != nil:
		return nil, "", err
	case cm == nil:
		return nil, "no istio-cni ConfigMap (with AMBIENT_ENABLED) was found", nil
	}
	return cm, "", nil
}

// AmbientExpectation is what istio-cni's ConfigMap cm and the pod's
// annotations call for, saying which ConfigMap.
func AmbientExpectation(cm *corev1.ConfigMap, pod *corev1.Pod) *capture.AmbientConfig {
	a := capture.AmbientConfigFor(cm.Data, pod.Annotations)
	a.Source = strings.Replace(a.Source, "istio-cni's ConfigMap", "istio-cni's ConfigMap "+cm.Namespace+"/"+cm.Name, 1)
	return a
}

// ImageOf is the image to read a pod's rules with: that of container, else
// its proxy's, istio-init's or istio-validation's ("" when none).
func ImageOf(p *corev1.Pod, container string) string {
	all := append(append([]corev1.Container{}, p.Spec.Containers...), p.Spec.InitContainers...)
	for _, want := range []string{container, istio.ProxyContainer, istio.InitContainer, istio.ValidationContainer} {
		if want == "" {
			continue
		}
		for _, c := range all {
			if c.Name == want {
				return c.Image
			}
		}
		if container != "" {
			return ""
		}
	}
	return ""
}

// LiveInput picks, per family, the backend that holds a live pod's rules,
// and builds the explanation's input from the dump and the pod: its
// addresses, ports, proxy uid, DNS servers and the arguments its rules were
// written from. backend says which backends held rules.
func LiveInput(pod *corev1.Pod, res *nsexec.Result) (in capture.CaptureInput, raw [][]byte, backend string, err error) {
	last := 1
	for _, s := range res.Sections {
		last = max(last, s.Round)
	}
	section := func(round int, tool string) string {
		for _, s := range res.Sections {
			if s.Round == round && s.Name == tool {
				return s.Text
			}
		}
		return ""
	}
	parse := func(text string) *capture.Ruleset {
		if strings.TrimSpace(text) == "" {
			return nil
		}
		rs, err := capture.ParseSave([]byte(text))
		if err != nil {
			return nil
		}
		return rs
	}
	backends := []string{}
	for _, fam := range []string{"iptables", "ip6tables"} {
		nft, legacy := parse(section(last, fam+"-nft-save")), parse(section(last, fam+"-legacy-save"))
		chosen, backend := nft, "nft"
		switch {
		case nft != nil && nft.RuleCount() > 0 && legacy != nil && legacy.RuleCount() > 0:
			in.Notes = append(in.Notes, fmt.Sprintf("%s: both the nft and the legacy backend hold rules (%d and %d); the nft rules are shown — a mix of backends is a known cause of broken capture", fam, nft.RuleCount(), legacy.RuleCount()))
		case (nft == nil || nft.RuleCount() == 0) && legacy != nil && legacy.RuleCount() > 0:
			chosen, backend = legacy, "legacy"
		}
		if chosen == nil || chosen.RuleCount() == 0 && fam == "ip6tables" {
			continue
		}
		if backend == "nft" && (legacy == nil || legacy.RuleCount() == 0) {
			// The legacy dump was read too and holds no rules: its "legacy
			// tables present" warning says nothing about this pod's capture.
			kept := chosen.Warnings[:0]
			for _, w := range chosen.Warnings {
				if !strings.Contains(w, "iptables-legacy tables present") {
					kept = append(kept, w)
				}
			}
			chosen.Warnings = kept
		}
		if last > 1 {
			if before := parse(section(1, fam+"-"+backend+"-save")); before != nil {
				chosen.SetDeltas(before)
			}
		}
		raw = append(raw, []byte(section(last, fam+"-"+backend+"-save")))
		in.Dumps = append(in.Dumps, chosen)
		backends = append(backends, fam+": "+backend)
	}
	// The arguments the pod's rules were written from: they say whether it uses
	// the native nftables mode, and what its rules are compared with.
	podArgs, podEnv, podSource, podHasArgs := capture.CaptureArgsFromPod(pod)
	native := false
	for _, a := range podArgs {
		native = native || a == "--native-nftables" || a == "--native-nftables=true"
	}
	nftText := section(last, "nft")
	if strings.Contains(nftText, nsexec.NftMissing) && native {
		in.Notes = append(in.Notes, "the pod's rules are written in Istio's native nftables mode, and the image they were read with has no nft: its inet istio-proxy-* tables could not be read (give --image with nft)")
	}
	if v4, v6, ok, err := capture.ParseNftRuleset([]byte(nftText)); err != nil && !strings.Contains(nftText, nsexec.NftMissing) {
		in.Notes = append(in.Notes, "nft list ruleset could not be read: "+err.Error())
	} else if err == nil && ok {
		before4, before6, okBefore, _ := capture.ParseNftRuleset([]byte(section(1, "nft")))
		for i, rs := range []*capture.Ruleset{v4, v6} {
			if rs.RuleCount() == 0 {
				continue
			}
			if last > 1 && okBefore {
				rs.SetDeltas([]*capture.Ruleset{before4, before6}[i])
			}
			in.Dumps = append(in.Dumps, rs)
		}
		raw = append(raw, []byte(section(last, "nft")))
		backends = append(backends, "inet istio-proxy-* tables: native nftables")
	}
	// No table holds a rule: so it is, when the IPv4 rules were read (by
	// either backend's tool: a tool an image lacks prints "not found");
	// otherwise nothing is known of them.
	noRules := false
	if len(in.Dumps) == 0 {
		readable := func(text string) bool {
			if strings.TrimSpace(text) == "" {
				return true
			}
			_, err := capture.ParseSave([]byte(text))
			return err == nil
		}
		if !readable(section(last, "iptables-nft-save")) && !readable(section(last, "iptables-legacy-save")) {
			return in, nil, "", fmt.Errorf("the dump returned no iptables-save output: %q", truncate(section(last, "iptables-nft-save"), 200))
		}
		noRules = true
	}
	backend = strings.Join(backends, ", ")

	ctx := &capture.PodContext{ProxyUID: istio.ProxyUID, Ports: map[int]string{}}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...) {
		for _, port := range c.Ports {
			label := fmt.Sprintf("containerPort of %s", c.Name)
			if port.Name != "" {
				label = fmt.Sprintf("%s on %s", port.Name, c.Name)
			}
			ctx.Ports[int(port.ContainerPort)] = label
		}
		if c.Name == istio.ProxyContainer && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			ctx.ProxyUID = fmt.Sprint(*c.SecurityContext.RunAsUser)
		}
	}
	in.Context = ctx
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			in.PodIPs = append(in.PodIPs, a)
		}
	}
	for _, line := range strings.Split(section(1, "resolv.conf"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			if _, err := netip.ParseAddr(f[1]); err == nil {
				in.Nameservers = append(in.Nameservers, f[1])
			}
		}
	}
	if podHasArgs {
		in.ExpectArgs, in.ExpectEnv, in.ExpectFrom = podArgs, podEnv, podSource
		in.IstioVersion, in.IstioVersionFrom = capture.IstioVersionFromPod(pod)
	}
	in.Listening = section(last, "sockets")
	if ct := section(last, "conntrack"); strings.Contains(ct, nsexec.ConntrackMissing) {
		in.Notes = append(in.Notes, "the connection tracking table could not be read (no /proc/net/nf_conntrack in the pod's network namespace, no conntrack tool in the image)")
	} else {
		in.Conntrack, in.Sockets = ct, section(last, "sockets")
		for _, s := range res.Sections {
			in.ConntrackRead = in.ConntrackRead || s.Round == last && s.Name == "conntrack"
		}
	}
	if noRules {
		return in, raw, "", ErrNoRules
	}
	return in, raw, backend, nil
}

// ErrNoRules: the rules were read, and no table holds one.
var ErrNoRules = errors.New("no table of the pod's network namespace holds a rule (both backends, both families and nft read)")
