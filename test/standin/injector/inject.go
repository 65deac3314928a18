package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// injectorConfig is the `config` key of the istio-sidecar-injector ConfigMap
// (the part of it this stand-in honours).
type injectorConfig struct {
	Policy               string                 `json:"policy"`
	NeverInjectSelector  []metav1.LabelSelector `json:"neverInjectSelector"`
	AlwaysInjectSelector []metav1.LabelSelector `json:"alwaysInjectSelector"`
	InjectedAnnotations  map[string]string      `json:"injectedAnnotations"`
}

// injectorValues is the `values` key of the same ConfigMap (the part used here).
type injectorValues struct {
	Revision string `json:"revision"`
	Global   struct {
		Hub   string `json:"hub"`
		Tag   string `json:"tag"`
		Proxy struct {
			HoldApplicationUntilProxyStarts bool   `json:"holdApplicationUntilProxyStarts"`
			IncludeIPRanges                 string `json:"includeIPRanges"`
			ExcludeIPRanges                 string `json:"excludeIPRanges"`
			IncludeInboundPorts             string `json:"includeInboundPorts"`
			ExcludeInboundPorts             string `json:"excludeInboundPorts"`
			ExcludeOutboundPorts            string `json:"excludeOutboundPorts"`
			StatusPort                      int    `json:"statusPort"`
		} `json:"proxy"`
	} `json:"global"`
	Pilot struct {
		CNI struct {
			Enabled bool `json:"enabled"`
		} `json:"cni"`
		Env map[string]string `json:"env"`
	} `json:"pilot"`
}

// meshRevision is one revision's injector settings, read from its ConfigMap.
type meshRevision struct {
	name   string
	config injectorConfig
	values injectorValues
}

func parseRevision(name string, data map[string]string) (*meshRevision, error) {
	r := &meshRevision{name: name}
	if err := yaml.Unmarshal([]byte(data["config"]), &r.config); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if v := data["values"]; v != "" {
		if err := json.Unmarshal([]byte(v), &r.values); err != nil {
			return nil, fmt.Errorf("values: %w", err)
		}
	}
	p := &r.values.Global.Proxy
	if p.IncludeIPRanges == "" {
		p.IncludeIPRanges = "*"
	}
	if p.IncludeInboundPorts == "" {
		p.IncludeInboundPorts = "*"
	}
	if p.StatusPort == 0 {
		p.StatusPort = 15020
	}
	if r.config.Policy == "" {
		r.config.Policy = "enabled"
	}
	return r, nil
}

// minor returns the Istio minor version of the revision's proxy tag (1.26.3 → 26), 0 if unknown.
func (r *meshRevision) minor() int {
	parts := strings.Split(strings.TrimPrefix(r.values.Global.Tag, "v"), ".")
	if len(parts) < 2 || parts[0] != "1" {
		return 0
	}
	m, _ := strconv.Atoi(parts[1])
	return m
}

var ignoredNamespaces = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true, "local-path-storage": true}

// injectRequired decides, as istiod does after its webhook was called,
// whether the pod gets a sidecar. The reason is logged.
func injectRequired(r *meshRevision, namespace string, pod *corev1.Pod) (bool, string) {
	if pod.Spec.HostNetwork {
		return false, "hostNetwork pod"
	}
	if ignoredNamespaces[namespace] {
		return false, "ignored namespace " + namespace
	}
	value, from := pod.Annotations["sidecar.istio.io/inject"], "annotation"
	if v, ok := pod.Labels["sidecar.istio.io/inject"]; ok {
		value, from = v, "label"
	}
	useDefault := false
	inject := false
	if r.minor() >= 27 || r.minor() == 0 {
		switch value {
		case "true":
			inject = true
		case "false":
		default: // "" or an invalid value: the default policy decides
			useDefault = true
		}
	} else {
		switch strings.ToLower(value) {
		case "y", "yes", "true", "on":
			inject = true
		case "":
			useDefault = true
		}
	}
	if !useDefault {
		return inject, fmt.Sprintf("%s sidecar.istio.io/inject=%q", from, value)
	}
	podLabels := labels.Set(pod.Labels)
	for _, s := range r.config.NeverInjectSelector {
		if sel, err := metav1.LabelSelectorAsSelector(&s); err == nil && !sel.Empty() && sel.Matches(podLabels) {
			return false, "neverInjectSelector " + sel.String()
		}
	}
	for _, s := range r.config.AlwaysInjectSelector {
		if sel, err := metav1.LabelSelectorAsSelector(&s); err == nil && !sel.Empty() && sel.Matches(podLabels) {
			return true, "alwaysInjectSelector " + sel.String()
		}
	}
	switch r.config.Policy {
	case "enabled":
		return true, "policy enabled"
	case "disabled":
		return false, "policy disabled"
	default:
		return false, fmt.Sprintf("illegal policy %q", r.config.Policy)
	}
}

// injectionStatus is the sidecar.istio.io/status annotation.
type injectionStatus struct {
	InitContainers   []string `json:"initContainers"`
	Containers       []string `json:"containers"`
	Volumes          []string `json:"volumes"`
	ImagePullSecrets []string `json:"imagePullSecrets"`
	Revision         string   `json:"revision"`
}

// stripInjected removes what an earlier injection added, so that a second
// call (two matching webhooks) re-injects instead of doubling the sidecar.
func stripInjected(pod *corev1.Pod) {
	raw, ok := pod.Annotations["sidecar.istio.io/status"]
	if !ok {
		return
	}
	var st injectionStatus
	if json.Unmarshal([]byte(raw), &st) != nil {
		return
	}
	drop := map[string]bool{}
	for _, n := range append(append(st.InitContainers, st.Containers...), st.Volumes...) {
		drop[n] = true
	}
	keep := func(cs []corev1.Container) []corev1.Container {
		var out []corev1.Container
		for _, c := range cs {
			if !drop[c.Name] {
				out = append(out, c)
			}
		}
		return out
	}
	pod.Spec.InitContainers = keep(pod.Spec.InitContainers)
	pod.Spec.Containers = keep(pod.Spec.Containers)
	var vols []corev1.Volume
	for _, v := range pod.Spec.Volumes {
		if !drop[v.Name] {
			vols = append(vols, v)
		}
	}
	pod.Spec.Volumes = vols
}

// proxyConfigAnnotation is the part of proxy.istio.io/config used here.
type proxyConfigAnnotation struct {
	HoldApplicationUntilProxyStarts *bool             `json:"holdApplicationUntilProxyStarts"`
	ProxyMetadata                   map[string]string `json:"proxyMetadata"`
}

func annotationOr(pod *corev1.Pod, key, def string) string {
	if v, ok := pod.Annotations[key]; ok {
		return v
	}
	return def
}

// captureArgs builds the istio-iptables arguments the injection template
// derives from the revision's values and the pod's traffic annotations.
func captureArgs(r *meshRevision, pod *corev1.Pod, mode string) []string {
	p := r.values.Global.Proxy
	exclude := []string{"15090", "15021"}
	exclude = append(exclude, annotationOr(pod, "status.sidecar.istio.io/port", strconv.Itoa(p.StatusPort)))
	if v := annotationOr(pod, "traffic.sidecar.istio.io/excludeInboundPorts", p.ExcludeInboundPorts); v != "" {
		exclude = append(exclude, v)
	}
	args := []string{"istio-iptables",
		"-p", "15001", "-z", "15006", "-u", "1337", "-m", mode,
		"-i", annotationOr(pod, "traffic.sidecar.istio.io/includeOutboundIPRanges", p.IncludeIPRanges),
		"-x", annotationOr(pod, "traffic.sidecar.istio.io/excludeOutboundIPRanges", p.ExcludeIPRanges),
		"-b", annotationOr(pod, "traffic.sidecar.istio.io/includeInboundPorts", p.IncludeInboundPorts),
		"-d", strings.Join(exclude, ","),
	}
	if v := pod.Annotations["traffic.sidecar.istio.io/includeOutboundPorts"]; v != "" {
		args = append(args, "-q", v)
	}
	if v := annotationOr(pod, "traffic.sidecar.istio.io/excludeOutboundPorts", p.ExcludeOutboundPorts); v != "" {
		args = append(args, "-o", v)
	}
	if v := annotationOr(pod, "istio.io/reroute-virtual-interfaces", pod.Annotations["traffic.sidecar.istio.io/kubevirtInterfaces"]); v != "" {
		args = append(args, "-k", v)
	}
	if v := pod.Annotations["traffic.sidecar.istio.io/excludeInterfaces"]; v != "" {
		args = append(args, "-c", v)
	}
	args = append(args, "--log_output_level=default:info")
	if r.values.Pilot.CNI.Enabled {
		args = append(args, "--run-validation", "--skip-rule-apply")
	}
	return args
}

// injectPod adds Istio's sidecar to pod, shaped as Istio's `sidecar` template
// shapes it, as a native sidecar when native is set.
func injectPod(pod *corev1.Pod, r *meshRevision, native bool) {
	stripInjected(pod)
	image := r.values.Global.Hub + "/proxyv2:" + r.values.Global.Tag
	mode := annotationOr(pod, "sidecar.istio.io/interceptionMode", "REDIRECT")

	var pc proxyConfigAnnotation
	_ = yaml.Unmarshal([]byte(pod.Annotations["proxy.istio.io/config"]), &pc)
	hold := r.values.Global.Proxy.HoldApplicationUntilProxyStarts
	if pc.HoldApplicationUntilProxyStarts != nil {
		hold = *pc.HoldApplicationUntilProxyStarts
	}
	hold = hold && !native
	var metaEnv []corev1.EnvVar
	for k, v := range pc.ProxyMetadata {
		metaEnv = append(metaEnv, corev1.EnvVar{Name: k, Value: v})
	}
	slices.SortFunc(metaEnv, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) })

	no, yes := false, true
	var root, proxyUID int64 = 0, 1337
	status := injectionStatus{Revision: r.name, Volumes: []string{"istio-envoy", "istio-data", "istio-podinfo"}}

	var initC []corev1.Container
	if mode != "NONE" {
		name := "istio-init"
		sc := &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, Privileged: &no, RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: &no,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}},
		}
		if r.values.Pilot.CNI.Enabled {
			name = "istio-validation"
			sc = &corev1.SecurityContext{
				AllowPrivilegeEscalation: &no, Privileged: &no, RunAsUser: &proxyUID, RunAsGroup: &proxyUID, RunAsNonRoot: &yes,
				ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}
		}
		initC = append(initC, corev1.Container{
			Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Args: captureArgs(r, pod, mode), Env: metaEnv, SecurityContext: sc,
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		})
		status.InitContainers = append(status.InitContainers, name)
	}

	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "INSTANCE_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "ISTIO_META_INTERCEPTION_MODE", Value: mode},
	}
	env = append(env, metaEnv...)
	// Test hook of the stand-in: a proxy that takes this long to become ready.
	if d := pod.Annotations["kmesh.test/proxy-ready-delay"]; d != "" {
		env = append(env, corev1.EnvVar{Name: "STANDIN_READY_DELAY", Value: d})
	}
	readyProbe := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}}
	proxy := corev1.Container{
		Name: "istio-proxy", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Args: []string{"proxy", "sidecar", "--domain", "$(POD_NAMESPACE).svc.cluster.local",
			"--proxyLogLevel=warning", "--proxyComponentLogLevel=misc:error", "--log_output_level=default:info"},
		Env:            env,
		Ports:          []corev1.ContainerPort{{Name: "http-envoy-prom", ContainerPort: 15090, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: readyProbe, PeriodSeconds: 15, TimeoutSeconds: 3, FailureThreshold: 4},
		StartupProbe:   &corev1.Probe{ProbeHandler: readyProbe, PeriodSeconds: 1, TimeoutSeconds: 3, FailureThreshold: 600},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, Privileged: &no, ReadOnlyRootFilesystem: &yes,
			RunAsUser: &proxyUID, RunAsGroup: &proxyUID, RunAsNonRoot: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "istio-envoy", MountPath: "/etc/istio/proxy"},
			{Name: "istio-data", MountPath: "/var/lib/istio/data"},
			{Name: "istio-podinfo", MountPath: "/etc/istio/pod"},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if hold {
		proxy.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"pilot-agent", "wait"}}}}
	}

	if native {
		always := corev1.ContainerRestartPolicyAlways
		proxy.RestartPolicy = &always
		proxy.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
			Command: []string{"pilot-agent", "request", "--debug-port=15020", "POST", "drain"}}}}
		status.InitContainers = append(status.InitContainers, "istio-proxy")
		pod.Spec.InitContainers = append(append(initC, proxy), pod.Spec.InitContainers...)
	} else {
		// Classic: istio-init runs after the user's init containers; the
		// proxy is the last container, or the first when the app is held.
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, initC...)
		status.Containers = []string{"istio-proxy"}
		if hold {
			pod.Spec.Containers = append([]corev1.Container{proxy}, pod.Spec.Containers...)
		} else {
			pod.Spec.Containers = append(pod.Spec.Containers, proxy)
		}
	}

	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "istio-envoy", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		corev1.Volume{Name: "istio-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "istio-podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}},
		}}}},
	)

	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	st, _ := json.Marshal(status)
	pod.Annotations["sidecar.istio.io/status"] = string(st)
	pod.Annotations["istio.io/rev"] = r.name
	for _, c := range pod.Spec.Containers {
		if c.Name != "istio-proxy" {
			pod.Annotations["kubectl.kubernetes.io/default-container"] = c.Name
			pod.Annotations["kubectl.kubernetes.io/default-logs-container"] = c.Name
			break
		}
	}
	if r.values.Pilot.CNI.Enabled {
		// In CNI mode the node agent reads these to program the rules.
		pod.Annotations["sidecar.istio.io/interceptionMode"] = mode
		pod.Annotations["traffic.sidecar.istio.io/includeOutboundIPRanges"] = annotationOr(pod, "traffic.sidecar.istio.io/includeOutboundIPRanges", r.values.Global.Proxy.IncludeIPRanges)
		pod.Annotations["traffic.sidecar.istio.io/includeInboundPorts"] = annotationOr(pod, "traffic.sidecar.istio.io/includeInboundPorts", r.values.Global.Proxy.IncludeInboundPorts)
	}
	for k, v := range r.config.InjectedAnnotations {
		pod.Annotations[k] = v
	}
	pod.Labels["security.istio.io/tlsMode"] = "istio"
	pod.Labels["service.istio.io/canonical-name"] = canonicalName(pod)
	if v, ok := pod.Labels["app.kubernetes.io/version"]; ok {
		pod.Labels["service.istio.io/canonical-revision"] = v
	} else if v, ok := pod.Labels["version"]; ok {
		pod.Labels["service.istio.io/canonical-revision"] = v
	} else {
		pod.Labels["service.istio.io/canonical-revision"] = "latest"
	}
}

func canonicalName(pod *corev1.Pod) string {
	for _, k := range []string{"service.istio.io/canonical-name", "app.kubernetes.io/name", "app"} {
		if v := pod.Labels[k]; v != "" {
			return v
		}
	}
	if pod.Name != "" {
		return pod.Name
	}
	return strings.TrimSuffix(pod.GenerateName, "-")
}
