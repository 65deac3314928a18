// Package inspect reads cluster state with client-go and hands it to
// explain/ as facts. It reads in few, large requests: one LIST per kind
// (pods page by page, in protobuf), never one request per pod. A read the
// user may not make (RBAC) is recorded as an unknown fact, not an error, so
// that an answer still comes, marked incomplete.
package inspect

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// PageSize is how many pods one LIST request returns: large enough that the
// per-request cost stays small, small enough that two pages fit in memory.
const PageSize = 1000

// Client reads cluster state.
type Client struct {
	// Kube talks JSON; Proto asks for protobuf, which is much cheaper to
	// decode for large lists.
	Kube, Proto kubernetes.Interface
	requests    atomic.Int64
	// PageSize overrides the const PageSize when set (tests).
	PageSize int64
	// PagesOnly reads pods with paged LISTs even where the apiserver can
	// stream them (tests of the fallback).
	PagesOnly bool
	// nsForbidden are namespaces a GET was refused for (asked once).
	nsForbidden map[string]bool
}

// New builds a Client from a REST config.
func New(cfg *rest.Config) (*Client, error) {
	c := &Client{}
	if cfg.QPS == 0 && cfg.Burst == 0 && cfg.RateLimiter == nil {
		// client-go's default, 5 requests a second, is for controllers; the
		// few LISTs of a sweep never meet it, but --verify's dry runs (one
		// per template) would wait on it: allow what kubectl allows.
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = 50, 300
	}
	count := func(cfg *rest.Config) *rest.Config {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingRT{next: rt, n: &c.requests} })
		return cfg
	}
	var err error
	if c.Kube, err = kubernetes.NewForConfig(count(cfg)); err != nil {
		return nil, err
	}
	proto := count(cfg)
	proto.ContentType = "application/vnd.kubernetes.protobuf"
	proto.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if c.Proto, err = kubernetes.NewForConfig(proto); err != nil {
		return nil, err
	}
	return c, nil
}

// Requests is the number of API requests made so far.
func (c *Client) Requests() int64 { return c.requests.Load() }

// unknown turns a read error into an unknown fact when it is about
// permissions; other errors are returned.
func unknown(f *injection.ClusterFacts, kind, verb string, err error) error {
	if apierrors.IsForbidden(err) {
		f.Unknown[kind] = "forbidden: the user may not " + verb
		return nil
	}
	return err
}

// MeshFacts reads what injection decisions depend on: the mutating webhook
// configurations, every namespace, the injector and istio-cni ConfigMaps, the Services and
// EndpointSlices the webhooks call, the control-plane Deployments, the
// nodes' kubelet versions, and with ambient mode on, its node agents' pods.
func (c *Client) MeshFacts(ctx context.Context) (*injection.ClusterFacts, error) {
	f := &injection.ClusterFacts{
		Namespaces:      map[string]*corev1.Namespace{},
		ConfigMaps:      map[string]*corev1.ConfigMap{},
		Services:        map[string]*corev1.Service{},
		EndpointSlices:  map[string][]discoveryv1.EndpointSlice{},
		KubeletVersions: map[string]string{},
		NodeAllocatable: map[string]corev1.ResourceList{},
		Unknown:         map[string]string{},
	}
	// Every list that needs nothing else is made at once; the results are
	// then applied in a fixed order, so that the answer (and which error
	// is returned) does not depend on which came back first.
	var (
		whs                 *admissionregistrationv1.MutatingWebhookConfigurationList
		vwhs                *admissionregistrationv1.ValidatingWebhookConfigurationList
		vwhErr              error
		vapbs               *admissionregistrationv1.ValidatingAdmissionPolicyBindingList
		vapbErr             error
		mapbs               *admissionregistrationv1.MutatingAdmissionPolicyBindingList
		mapbErr             error
		nss                 *corev1.NamespaceList
		labelled            *corev1.ConfigMapList
		deps                *appsv1.DeploymentList
		nodes               *corev1.NodeList
		whErr, nsErr, cmErr error
		depErr, nodeErr     error
	)
	all(
		func() {
			whs, whErr = c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		},
		func() {
			vwhs, vwhErr = c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		},
		func() {
			vapbs, vapbErr = c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
		},
		func() {
			mapbs, mapbErr = c.Kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
		},
		func() { nss, nsErr = c.Proto.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}) },
		func() {
			labelled, cmErr = c.Proto.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: istio.LabelRev})
		},
		func() {
			deps, depErr = c.Proto.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: "app=istiod"})
		},
		func() { nodes, nodeErr = c.Proto.CoreV1().Nodes().List(ctx, metav1.ListOptions{}) },
	)
	if whErr != nil {
		if err := unknown(f, injection.FactWebhooks, "list mutatingwebhookconfigurations.admissionregistration.k8s.io", whErr); err != nil {
			return nil, err
		}
	} else {
		f.Webhooks = whs.Items
	}
	if vwhErr != nil {
		// Only a refusal is put down to them: not knowing them leaves every
		// verdict as it is, and the refusal's own words.
		f.ValidatingWebhooksUnknown = "list validatingwebhookconfigurations.admissionregistration.k8s.io: " + vwhErr.Error()
	} else {
		f.ValidatingWebhooks = vwhs.Items
	}
	if vapbErr == nil {
		f.PolicyBindings = vapbs.Items
	}
	if mapbErr != nil {
		// They are only named as what may have rewritten an injected pod:
		// not knowing them changes no verdict.
		f.MutatingPolicyBindingsUnknown = "list mutatingadmissionpolicybindings.admissionregistration.k8s.io: " + mapbErr.Error()
	} else {
		f.MutatingPolicyBindings = mapbs.Items
	}
	if nsErr != nil {
		if err := unknown(f, injection.FactNamespaces, "list namespaces", nsErr); err != nil {
			return nil, err
		}
	} else {
		for i := range nss.Items {
			f.Namespaces[nss.Items[i].Name] = &nss.Items[i]
		}
	}

	if err := c.controlPlaneLists(ctx, f, labelled, cmErr); err != nil {
		return nil, err
	}
	if depErr != nil {
		if err := unknown(f, injection.FactControlPlanes, "list deployments.apps (all namespaces)", depErr); err != nil {
			return nil, err
		}
	} else {
		f.ControlPlanes = deps.Items
	}
	if err := c.ambientAgents(ctx, f); err != nil {
		return nil, err
	}
	if nodeErr != nil {
		if err := unknown(f, injection.FactNodes, "list nodes", nodeErr); err != nil {
			return nil, err
		}
	} else {
		for _, n := range nodes.Items {
			f.KubeletVersions[n.Name] = n.Status.NodeInfo.KubeletVersion
			f.NodeAllocatable[n.Name] = n.Status.Allocatable
		}
	}
	return f, nil
}

// controlPlaneLists reads the injector ConfigMaps (those labelled istio.io/rev,
// listed with the others, and those of the namespaces of the Services the
// webhooks call), and those namespaces' Services and EndpointSlices.
func (c *Client) controlPlaneLists(ctx context.Context, f *injection.ClusterFacts, labelled *corev1.ConfigMapList, cmErr error) error {
	// The namespaces of the services the webhooks call hold the injector
	// ConfigMaps too; webhooks that call a URL give no namespace, and then
	// the ConfigMaps are found by their istio.io/rev label.
	svcNamespaces := map[string]bool{}
	for _, cfg := range f.Webhooks {
		for _, w := range cfg.Webhooks {
			if w.ClientConfig.Service != nil {
				svcNamespaces[w.ClientConfig.Service.Namespace] = true
			}
		}
	}
	namespaces := make([]string, 0, len(svcNamespaces))
	for ns := range svcNamespaces {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	addCMs := func(items []corev1.ConfigMap) {
		for i := range items {
			if strings.HasPrefix(items[i].Name, istio.InjectorConfigMap) || injection.IsAmbientConfig(&items[i]) {
				f.ConfigMaps[items[i].Namespace+"/"+items[i].Name] = &items[i]
			}
		}
	}
	if cmErr != nil {
		if err := unknown(f, injection.FactConfigMaps, "list configmaps (all namespaces)", cmErr); err != nil {
			return err
		}
	} else {
		addCMs(labelled.Items)
	}
	// Each control-plane namespace's lists, all at once.
	type nsLists struct {
		cms                  *corev1.ConfigMapList
		svcs                 *corev1.ServiceList
		eps                  *discoveryv1.EndpointSliceList
		cmErr, svcErr, epErr error
	}
	per := make([]nsLists, len(namespaces))
	var calls []func()
	for i, ns := range namespaces {
		l := &per[i]
		calls = append(calls,
			// Injector ConfigMaps without the label: the control plane's namespace has them.
			func() { l.cms, l.cmErr = c.Proto.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}) },
			func() { l.svcs, l.svcErr = c.Proto.CoreV1().Services(ns).List(ctx, metav1.ListOptions{}) },
			func() { l.eps, l.epErr = c.Proto.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{}) })
	}
	all(calls...)
	for i, ns := range namespaces {
		l := per[i]
		if l.cmErr == nil {
			delete(f.Unknown, injection.FactConfigMaps)
			addCMs(l.cms.Items)
		} else if err := unknown(f, injection.FactConfigMaps, "list configmaps in namespace "+ns, l.cmErr); err != nil {
			return err
		}
		if l.svcErr != nil {
			if err := unknown(f, injection.FactServices, "list services in namespace "+ns, l.svcErr); err != nil {
				return err
			}
		} else {
			for i := range l.svcs.Items {
				f.Services[ns+"/"+l.svcs.Items[i].Name] = &l.svcs.Items[i]
			}
		}
		if l.epErr != nil {
			if err := unknown(f, injection.FactEndpointSlices, "list endpointslices.discovery.k8s.io in namespace "+ns, l.epErr); err != nil {
				return err
			}
		} else {
			for _, s := range l.eps.Items {
				svc := s.Labels[discoveryv1.LabelServiceName]
				f.EndpointSlices[ns+"/"+svc] = append(f.EndpointSlices[ns+"/"+svc], s)
			}
		}
	}
	return nil
}

// ambientAgents reads ambient mode's node agents, when istio-cni's ambient
// mode is on (or its configuration could not be read).
func (c *Client) ambientAgents(ctx context.Context, f *injection.ClusterFacts) error {
	if injection.AmbientMayCapture(f) {
		var cni, zt *corev1.PodList
		var cniErr, ztErr error
		all(
			func() {
				cni, cniErr = c.Proto.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: injection.AmbientCNISelector})
			},
			func() {
				zt, ztErr = c.Proto.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: injection.AmbientZtunnelSelector})
			},
		)
		for _, l := range []struct {
			pods     *corev1.PodList
			err      error
			selector string
		}{{cni, cniErr, injection.AmbientCNISelector}, {zt, ztErr, injection.AmbientZtunnelSelector}} {
			if l.err != nil {
				if err := unknown(f, injection.FactAmbientAgents, "list pods -l "+l.selector+" (all namespaces)", l.err); err != nil {
					return err
				}
				continue
			}
			f.AmbientAgents = append(f.AmbientAgents, l.pods.Items...)
		}
	}
	return nil
}

// all runs the calls at once and returns when every one has.
func all(calls ...func()) {
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call()
		}()
	}
	wg.Wait()
}

// FailedCreateEvents lists the FailedCreate events of namespace ("" for
// all), keyed by "namespace/kind/name" of the object they are about.
func (c *Client) FailedCreateEvents(ctx context.Context, f *injection.ClusterFacts, namespace string) (map[string][]corev1.Event, error) {
	all, err := c.WarningEvents(ctx, namespace)
	if err != nil {
		return map[string][]corev1.Event{}, UnknownEvents(f, err)
	}
	return OnlyReason(all, "FailedCreate"), nil
}

var rsHash = regexp.MustCompile(`^(.+)-[a-z0-9]{5,10}$`)

// OwnerOf names the controller that re-creates a pod: a ReplicaSet's
// Deployment (from the pod-template-hash), else the direct controller.
func OwnerOf(p *corev1.Pod) *injection.Owner {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil
	}
	if ref.Kind == "ReplicaSet" {
		if h := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
			return &injection.Owner{Kind: "Deployment", Name: strings.TrimSuffix(ref.Name, "-"+h)}
		}
	}
	return &injection.Owner{Kind: ref.Kind, Name: ref.Name}
}

// EventsForOwner picks the FailedCreate events about a workload: on itself,
// on its ReplicaSets (named <deployment>-<hash>), or on its Jobs (named
// <cronjob>-<minute>).
func EventsForOwner(events map[string][]corev1.Event, namespace, kind, name string) []corev1.Event {
	out := append([]corev1.Event(nil), events[namespace+"/"+kind+"/"+name]...)
	if kind == "Deployment" {
		for k, evs := range events {
			prefix := namespace + "/ReplicaSet/"
			if strings.HasPrefix(k, prefix) {
				if m := rsHash.FindStringSubmatch(strings.TrimPrefix(k, prefix)); m != nil && m[1] == name {
					out = append(out, evs...)
				}
			}
		}
	}
	if kind == "CronJob" {
		// Its Jobs create the pods: NAME-<scheduled minute>.
		for k, evs := range events {
			if job, ok := strings.CutPrefix(k, namespace+"/Job/"+name+"-"); ok && job != "" && strings.Trim(job, "0123456789") == "" {
				out = append(out, evs...)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].LastTimestamp.After(out[j].LastTimestamp.Time) })
	return out
}

// PodWorkload turns a live pod into the workload explain/ reads.
func PodWorkload(p *corev1.Pod, f *injection.ClusterFacts) *injection.Workload {
	w := &injection.Workload{
		Kind: "Pod", Namespace: p.Namespace, Name: p.Name,
		Labels: p.Labels, Annotations: p.Annotations, Spec: p.Spec, Pod: p,
		NamespaceSource: injection.NamespaceFromCluster, Owner: OwnerOf(p),
	}
	if !NamespaceExists(f, p.Namespace) {
		w.NamespaceSource = injection.NamespaceMissing
	}
	return w
}

// NamespaceExists reports whether the facts know namespace ns (true when
// namespaces are unknown: an unknown namespace is not a missing one).
func NamespaceExists(f *injection.ClusterFacts, ns string) bool {
	if _, ok := f.Namespaces[ns]; ok {
		return true
	}
	if f.NamespacesAbsent[ns] {
		return false
	}
	_, unknown := f.Unknown[injection.FactNamespaces]
	return unknown
}

// ResolveNamespaces falls back to one GET per namespace named when listing
// namespaces was forbidden (a namespace-scoped user may often get their own
// namespace). Each namespace read becomes known, each one found missing is
// recorded absent; when all of them are settled the namespaces are no longer
// an unknown fact for this answer. Nothing is done when the list worked.
func (c *Client) ResolveNamespaces(ctx context.Context, f *injection.ClusterFacts, names ...string) error {
	_, unknown := f.Unknown[injection.FactNamespaces]
	if !unknown && !f.NamespacesByGet {
		return nil
	}
	f.NamespacesByGet = true
	var forbidden []string
	for _, name := range names {
		if _, ok := f.Namespaces[name]; ok || f.NamespacesAbsent[name] || name == "" {
			continue
		}
		if c.nsForbidden[name] {
			forbidden = append(forbidden, name)
			continue
		}
		ns, err := c.Proto.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			f.Namespaces[name] = ns
		case apierrors.IsNotFound(err):
			if f.NamespacesAbsent == nil {
				f.NamespacesAbsent = map[string]bool{}
			}
			f.NamespacesAbsent[name] = true
		case apierrors.IsForbidden(err):
			if c.nsForbidden == nil {
				c.nsForbidden = map[string]bool{}
			}
			c.nsForbidden[name] = true
			forbidden = append(forbidden, name)
		default:
			return err
		}
	}
	switch {
	case len(forbidden) > 0:
		f.Unknown[injection.FactNamespaces] = "forbidden: the user may not get namespaces/" + forbidden[0] + " (or list namespaces)"
	case len(c.nsForbidden) > 0 && unknown:
		// An earlier call could not read some namespace: still unknown.
	default:
		delete(f.Unknown, injection.FactNamespaces)
	}
	return nil
}

// ErrNoMesh is returned when no supported mesh's injector is installed.
var ErrNoMesh = fmt.Errorf("no Istio sidecar injector in this cluster: no MutatingWebhookConfiguration has a *.sidecar-injector.istio.io webhook")

// countingRT counts the requests a client makes.
type countingRT struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// PodEvents lists the events about pods in namespace ("" for all), keyed by
// the pod's UID; podName narrows it to one pod. Events are read in pages,
// and each keeps only what a startup report reads (reason, message, the
// container it is about, count and times): a busy cluster has several
// events per pod.
func (c *Client) PodEvents(ctx context.Context, namespace, podName string) (map[string][]corev1.Event, error) {
	sel := fields.OneTermEqualSelector("involvedObject.kind", "Pod")
	if podName != "" {
		sel = fields.AndSelectors(sel, fields.OneTermEqualSelector("involvedObject.name", podName))
	}
	out := map[string][]corev1.Event{}
	opts := metav1.ListOptions{FieldSelector: sel.String(), Limit: 2000}
	for {
		list, err := c.Proto.CoreV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, e := range list.Items {
			uid := string(e.InvolvedObject.UID)
			out[uid] = append(out[uid], corev1.Event{Reason: e.Reason, Message: e.Message, Count: e.Count, Type: e.Type,
				InvolvedObject: corev1.ObjectReference{Kind: e.InvolvedObject.Kind, Name: e.InvolvedObject.Name, UID: e.InvolvedObject.UID, FieldPath: e.InvolvedObject.FieldPath},
				FirstTimestamp: e.FirstTimestamp, LastTimestamp: e.LastTimestamp, EventTime: e.EventTime})
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
}

// LogTail reads the last lines of a container's log, of its current and,
// when it restarted, its previous run. A read the user may not make is
// reported in the result, not as an error.
func (c *Client) LogTail(ctx context.Context, p *corev1.Pod, container string, restarted bool, lines int64) startup.LogTail {
	var t startup.LogTail
	read := func(previous bool) ([]string, error) {
		b, err := c.Kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: &lines}).DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		s := strings.TrimRight(string(b), "\n")
		if s == "" {
			return nil, nil
		}
		return strings.Split(s, "\n"), nil
	}
	var err error
	if t.Current, err = read(false); err != nil {
		if apierrors.IsForbidden(err) {
			t.Unavailable = "forbidden: the user may not get pods/log in namespace " + p.Namespace
			return t
		}
		t.Unavailable = err.Error()
	}
	if restarted {
		// Once the runtime removed the previous run, the kubelet answers
		// with a one-line explanation instead of its log.
		if prev, err := read(true); err == nil && !(len(prev) == 1 && strings.HasPrefix(prev[0], "unable to retrieve container logs")) {
			t.Previous = prev
			// Between two runs (the next one being created) only the
			// previous run has a log: it is the one that says why.
			t.Unavailable = ""
		}
	}
	return t
}

// ExplainAPIError says which permission a forbidden request lacked ("not
// allowed to WHAT: …"); any other error is returned as it is.
func ExplainAPIError(err error, what string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("not allowed to %s: %v", what, err)
	}
	return err
}

// Services lists the Services of namespace ("" for all) that select pods
// (a selector), keyed by namespace; unread says why they could not be read
// (and then the map is empty).
func (c *Client) Services(ctx context.Context, namespace string) (map[string][]corev1.Service, string) {
	list, err := c.Proto.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		scope := "namespace " + namespace
		if namespace == "" {
			scope = "cluster-wide"
		}
		if apierrors.IsForbidden(err) {
			return nil, "forbidden: list services (" + scope + ")"
		}
		return nil, "list services (" + scope + "): " + err.Error()
	}
	out := map[string][]corev1.Service{}
	for _, s := range list.Items {
		if len(s.Spec.Selector) > 0 {
			out[s.Namespace] = append(out[s.Namespace], corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
				Spec: corev1.ServiceSpec{Selector: s.Spec.Selector, Ports: s.Spec.Ports}})
		}
	}
	return out, ""
}
