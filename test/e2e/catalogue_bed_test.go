package e2e

import (
	"context"
	"maps"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// catBed is TestCheckCatalogue's test bed: its namespaces, each holding
// the faults its labels are part of, the webhooks and stand-ins they
// need, and the helpers the faults are planted with.
type catBed struct {
	t                                                                             *testing.T
	c                                                                             *testcluster.Cluster
	inj, live, plain, late, rev, conflict, broken, dup, quota, psa, vap, cni, amb string
	// ambAgents holds the node agents' stand-ins: no fault of its own.
	ambAgents string
	// mapNS holds a MutatingAdmissionPolicy's fault ("" on a lane that
	// serves none); notPlanted are the codes not planted, and why.
	mapNS      string
	notPlanted map[string]string
	// namespaces are those that hold faults.
	namespaces []string
	netAdmin   *corev1.SecurityContext
	// backendDone is closed once the backend runs (backendIP set) or
	// failed.
	backendDone chan struct{}
	backendIP   string
}

// newCatBed makes the namespaces, the webhook faults and ambient mode's
// stand-ins.
func newCatBed(t *testing.T, c *testcluster.Cluster) *catBed {
	root := int64(0)
	b := &catBed{t: t, c: c, notPlanted: maps.Clone(catNotPlanted), backendDone: make(chan struct{}),
		netAdmin: &corev1.SecurityContext{RunAsUser: &root, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}
	b.inj = c.Namespace(t, "cat-inj", map[string]string{"istio-injection": "enabled"})
	b.live = c.Namespace(t, "cat-live", map[string]string{"istio-injection": "enabled"})
	b.plain = c.Namespace(t, "cat-plain", nil)
	b.late = c.Namespace(t, "cat-late", nil)
	b.rev = c.Namespace(t, "cat-rev", map[string]string{"istio.io/rev": "canary"})
	b.conflict = c.Namespace(t, "cat-conflict", map[string]string{"istio-injection": "enabled", "istio.io/rev": "canary"})
	b.broken = c.Namespace(t, "cat-broken", map[string]string{"kmesh.test/catalogue-down": "yes"})
	b.dup = c.Namespace(t, "cat-dup", map[string]string{"istio-injection": "enabled", "kmesh.test/catalogue-dup": "yes"})
	b.quota = c.Namespace(t, "cat-quota", map[string]string{"istio-injection": "enabled"})
	b.psa = c.Namespace(t, "cat-psa", map[string]string{"istio-injection": "enabled", "pod-security.kubernetes.io/enforce": "baseline"})
	b.vap = c.Namespace(t, "cat-vap", map[string]string{"istio-injection": "enabled"})
	b.cni = c.Namespace(t, "cat-cni", map[string]string{"istio.io/rev": "cni"})
	b.amb = c.Namespace(t, "cat-amb", map[string]string{"istio.io/dataplane-mode": "ambient"})
	b.ambAgents = c.Namespace(t, "cat-amb-cni", nil)
	b.namespaces = []string{b.inj, b.live, b.plain, b.late, b.rev, b.conflict, b.broken, b.dup, b.quota, b.psa, b.vap, b.cni, b.amb}
	// A MutatingAdmissionPolicy (served as v1 from Kubernetes 1.36) labels
	// one namespace's pods sidecar.istio.io/inject=false.
	if catServes(c, "admissionregistration.k8s.io/v1", "mutatingadmissionpolicies") {
		b.mapNS = c.Namespace(t, "cat-map", map[string]string{"istio-injection": "enabled"})
		b.namespaces = append(b.namespaces, b.mapNS)
	} else {
		b.notPlanted["KM-INJ-017"] = "this lane's apiserver serves no MutatingAdmissionPolicy (v1, Kubernetes 1.36 and later)"
		b.notPlanted["KM-CAP-013"] = "this lane's apiserver serves no MutatingAdmissionPolicy (v1, Kubernetes 1.36 and later), which gives istio-proxy another uid after the injector"
	}
	b.webhooks()
	// Ambient mode as TestDiagnose sets it up: istio-cni's ConfigMap of the
	// ambient profile, its node agent's stand-in ready, ztunnel's never.
	_, templates := installAmbientCNI(t, c, b.ambAgents)
	standIn(t, c, b.ambAgents, appPod("istio-cni-node-standin", templates["istio-cni-node"].Labels, nil))
	ztunnel := appPod("ztunnel-standin", templates["ztunnel"].Labels, nil)
	ztunnel.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
	standIn(t, c, b.ambAgents, ztunnel)
	return b
}

// webhooks plants the webhook faults.
func (b *catBed) webhooks() {
	t, c, broken, dup, ctx := b.t, b.c, b.broken, b.dup, context.Background()
	// Webhook faults: copies of the default revision's namespace webhook
	// (the real istiod's CA), each in a configuration of its own whose
	// namespace selector matches one test namespace only, deleted at the
	// end.
	def, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var orig *admissionv1.MutatingWebhook
	for i := range def.Webhooks {
		if def.Webhooks[i].Name == "namespace.sidecar-injector.istio.io" {
			orig = &def.Webhooks[i]
		}
	}
	if orig == nil || orig.NamespaceSelector == nil || orig.ClientConfig.URL == nil {
		t.Fatalf("the default revision has no namespace.sidecar-injector.istio.io webhook with a namespace selector and a URL: %+v", def.Webhooks)
	}
	webhookCopy := func(name string, edit func(w *admissionv1.MutatingWebhook)) {
		t.Helper()
		w := orig.DeepCopy()
		edit(w)
		if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"istio.io/rev": "default", "app": "sidecar-injector"}},
			Webhooks:   []admissionv1.MutatingWebhook{*w},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	// The default revision's webhook as it is once its istiod is gone
	// (failurePolicy Fail, its URL on loopback where nothing listens): the
	// only webhook that matches cat-broken, which has no injection label.
	webhookCopy("istio-sidecar-injector-down-"+broken, func(w *admissionv1.MutatingWebhook) {
		url := "https://127.0.0.1:1/inject"
		w.ClientConfig.URL = &url
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kmesh.test/catalogue-down": "yes", "kubernetes.io/metadata.name": broken}}
	})
	// A second copy of it, the real istiod's URL and failurePolicy Ignore,
	// as a stale second install leaves one, matching cat-dup (labelled
	// istio-injection=enabled) only: two Istio webhooks match its pods.
	webhookCopy("istio-sidecar-injector-dup-"+dup, func(w *admissionv1.MutatingWebhook) {
		ignore := admissionv1.Ignore
		w.FailurePolicy = &ignore
		w.NamespaceSelector.MatchLabels = map[string]string{"kmesh.test/catalogue-dup": "yes", "kubernetes.io/metadata.name": dup}
	})
}

// faults are the catalogue's planted faults, every stage's.
func (b *catBed) faults() []*catFault {
	var out []*catFault
	for _, part := range [][]*catFault{b.faultsInjection(), b.faultsInit(), b.faultsPlatform(), b.faultsRunOnce(), b.faultsProxySettings(), b.faultsRoom(), b.faultsStart(), b.faultsCapture(), b.faultsConnections()} {
		out = append(out, part...)
	}
	if b.mapNS != "" {
		out = append(out, &catFault{code: "KM-INJ-017", ns: b.mapNS, name: "opted-out", how: "a MutatingAdmissionPolicy bound to this namespace labels the pods of Deployment opted-out sidecar.istio.io/inject=false: they run without the sidecar their template and namespace ask for",
			plant: func(ctx context.Context, f *catFault) error {
				return catOptedOut(ctx, b.t, b.c, f, b.mapNS)
			}},
			&catFault{code: "KM-CAP-013", ns: b.mapNS, name: "uid-assigned", how: "a MutatingAdmissionPolicy bound to this namespace, reinvoked after the injector, gives the istio-proxy container of Deployment uid-assigned's pods uid and gid 1000680000: istio-init still exempts 1337",
				plant: func(ctx context.Context, f *catFault) error {
					return catUIDAssigned(ctx, b.t, b.c, f, b.mapNS)
				}})
	}
	return out
}

// controls are the healthy control (one plain injected pod, Istio's
// default resources) and the backend the bypassing pod calls, in the
// namespace without injection.
func (b *catBed) controls() (healthy, backend *catFault) {
	healthy = &catFault{code: "", ns: b.inj, name: "healthy", how: "a plain injected pod",
		plant: func(ctx context.Context, f *catFault) error {
			return b.runningReady(ctx, f, b.inj, appPod("healthy", nil, nil))
		}}
	backend = &catFault{code: "", ns: b.plain, name: "backend", how: "the backend (8080, 9090), not injected",
		plant: func(ctx context.Context, f *catFault) error {
			defer close(b.backendDone)
			p := appPod("backend", nil, nil)
			p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /w && echo hi > /w/index.html && (httpd -f -p 9090 -h /w &) && exec httpd -f -p 8080 -h /w"}
			if err := b.runningReady(ctx, f, b.plain, p); err != nil {
				return err
			}
			got, err := b.c.Client.CoreV1().Pods(b.plain).Get(ctx, "backend", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.backendIP = got.Status.PodIP
			return nil
		}}
	return healthy, backend
}

func (b *catBed) createPod(ctx context.Context, ns string, p *corev1.Pod) error {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	if p.Labels["app"] == "" {
		p.Labels["app"] = p.Name
	}
	_, err := b.c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	return err
}

func (b *catBed) createService(ctx context.Context, ns string, s *corev1.Service) error {
	_, err := b.c.Client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
	return err
}

func (b *catBed) createPolicy(ctx context.Context, ns string, np *networkingv1.NetworkPolicy) error {
	_, err := b.c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{})
	return err
}

// runningReady creates the pod and waits until it runs and is ready.
func (b *catBed) runningReady(ctx context.Context, f *catFault, ns string, p *corev1.Pod) error {
	if err := b.createPod(ctx, ns, p); err != nil {
		return err
	}
	f.pod = p.Name
	f.state = "running and ready"
	_, err := catWaitPod(ctx, b.c, ns, p.Name, "running and ready", testcluster.Running)
	return err
}

// failedAgain creates the pod and waits until container failed and was
// restarted.
func (b *catBed) failedAgain(ctx context.Context, f *catFault, ns string, p *corev1.Pod, container string) error {
	if err := b.createPod(ctx, ns, p); err != nil {
		return err
	}
	f.pod = p.Name
	f.state = container + " failed and was restarted"
	_, err := catWaitPod(ctx, b.c, ns, p.Name, f.state, func(p *corev1.Pod) bool { return catFailedAgain(catStatus(p, container)) })
	return err
}

// refused creates a Deployment of the fault's name and waits for its
// FailedCreate event saying what.
func (b *catBed) refused(ctx context.Context, f *catFault, ns string, annotations map[string]string, edit func(*corev1.PodSpec), what string) error {
	d := appDeployment(ns, f.name, 1, annotations)
	if edit != nil {
		edit(&d.Spec.Template.Spec)
	}
	if _, err := b.c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	msg, err := catWaitEvent(ctx, b.c, ns, "FailedCreate", f.name, what)
	f.state = "FailedCreate: " + catShort(msg)
	return err
}

// catClassic are the annotations of a lean pod with a classic sidecar.
func catClassic(kv ...string) map[string]string {
	return catLean(append([]string{"sidecar.istio.io/nativeSidecar", "false"}, kv...)...)
}

// catReadyDelay is the proxy config that delays the stand-in proxy's
// readiness.
func catReadyDelay(d string) string {
	return `{"proxyMetadata": {"STANDIN_READY_DELAY": "` + d + `"}}`
}
