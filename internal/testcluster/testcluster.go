// Package testcluster gives tests the local cluster that hack/cluster/up.sh
// starts: a clientset, the kubeconfig, namespaces that tests create and delete
// themselves, and helpers to apply manifests, wait for pods and run ephemeral
// containers.
//
// The cluster is found through $KMESH_KUBECONFIG, else the kubeconfig up.sh
// writes. When there is none, tests are skipped, except under CI=true, where a
// missing cluster fails them: CI must never pass by testing nothing.
package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultKubeconfig is where hack/cluster/up.sh writes the admin kubeconfig.
const DefaultKubeconfig = "/var/tmp/kubectl-mesh-cluster/admin.kubeconfig"

// Cluster is a running local test cluster.
type Cluster struct {
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	Dynamic    dynamic.Interface
	Mapper     meta.RESTMapper
	// RepoRoot is the repository's top directory (where go.mod is).
	RepoRoot string
	// KubectlPath is the kubectl built for the cluster, if found.
	KubectlPath string
	// IstioctlPath is the istioctl hack/cluster/build-istio.sh built from the
	// istio.io/istio version hack/tools/istio pins, if found.
	IstioctlPath string
	// IstioBinDir is where build-istio.sh put Istio's binaries (istioctl,
	// pilot-agent, pilot-discovery, istio-cni) for the pinned version.
	IstioBinDir string
	// ProxyImage is the local proxyv2 image, tagged with the built Istio's
	// version as istiod's injection template names it (kmesh.local/istio/proxyv2:1.31-dev).
	ProxyImage string
	// ServerVersion is the apiserver's git version (v1.37.2): the test lane.
	ServerVersion string
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

var (
	once    sync.Once
	shared  *Cluster
	initErr error
)

// Get returns the local cluster, or ends the test: skipped when no cluster is
// running, failed when CI is set to a true value (true, 1, True, …).
func Get(t testing.TB) *Cluster {
	t.Helper()
	once.Do(func() { shared, initErr = connect() })
	if initErr != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("the local test cluster is required under CI=true: %v (start it with `make cluster-up`)", initErr)
		}
		t.Skipf("no local test cluster (%v); start one with `make cluster-up`", initErr)
	}
	return shared
}

func connect() (*Cluster, error) {
	kc := os.Getenv("KMESH_KUBECONFIG")
	if kc == "" {
		kc = DefaultKubeconfig
	}
	if _, err := os.Stat(kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kc, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		return nil, fmt.Errorf("apiserver behind %s is not ready: %w", kc, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		Kubeconfig: kc, Config: cfg, Client: client, Dynamic: dyn, RepoRoot: root,
		Mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(client.Discovery())),
	}
	cache := os.Getenv("KMESH_CACHE_DIR")
	if cache == "" {
		if base, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(base, "kubectl-mesh")
		}
	}
	// The kubectl built for the version the cluster runs (hack/cluster/build-kube.sh
	// builds one per lane), else any that was built.
	if v, err := client.Discovery().ServerVersion(); err == nil {
		c.ServerVersion = v.GitVersion
		if p := filepath.Join(cache, "kube", v.GitVersion, "kubectl"); fileExists(p) {
			c.KubectlPath = p
		}
	}
	if matches, _ := filepath.Glob(filepath.Join(cache, "kube", "*", "kubectl")); c.KubectlPath == "" && len(matches) > 0 {
		c.KubectlPath = matches[len(matches)-1]
	}
	if b, err := os.ReadFile(filepath.Join(root, "hack", "tools", "istio", "go.mod")); err == nil {
		if m := regexp.MustCompile(`(?m)^\s*istio\.io/istio (v\S+)`).FindSubmatch(b); m != nil {
			dir := filepath.Join(cache, "istio", string(m[1]))
			c.IstioBinDir = dir
			if p := filepath.Join(dir, "istioctl"); fileExists(p) {
				c.IstioctlPath = p
			}
			if b, err := os.ReadFile(filepath.Join(dir, "release")); err == nil {
				c.ProxyImage = "kmesh.local/istio/proxyv2:" + strings.TrimSpace(string(b))
			}
		}
	}
	return c, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/kubectl-mesh/kubectl-mesh\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod of kubectl-mesh) not found above the working directory")
		}
		dir = parent
	}
}

// Namespace creates a namespace named prefix-<random> with the given labels
// and deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(5), Labels: labels}}
	created, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return created.Name
}

// Apply server-side-applies every object of a multi-document YAML manifest.
// Namespaced objects without a namespace go to namespace ns.
func (c *Cluster) Apply(t testing.TB, ns string, manifest []byte) {
	t.Helper()
	if err := c.ApplyManifest(context.Background(), ns, manifest); err != nil {
		t.Fatal(err)
	}
}

// ApplyManifest is Apply without a test.
func (c *Cluster) ApplyManifest(ctx context.Context, ns string, manifest []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		var ri dynamic.ResourceInterface = c.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(ns)
			}
			ri = c.Dynamic.Resource(mapping.Resource).Namespace(obj.GetNamespace())
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "kubectl-mesh-tests", Force: &force}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
}

// MeshManifest returns the mesh hack/cluster/up.sh rendered from Istio's
// charts with istioctl and applied (mesh.sh): Istio's CRDs, the injector
// ConfigMaps and the webhooks of every revision and tag, their clientConfig
// the URL of that revision's istiod on loopback.
func (c *Cluster) MeshManifest() ([]byte, error) {
	return os.ReadFile(filepath.Join(filepath.Dir(c.Kubeconfig), "mesh", "mesh.yaml"))
}

// ApplyMesh applies the rendered mesh again (restoring what a test changed)
// and waits until istiod has patched its CA into every Istio webhook: a
// webhook created anew has none until then, and the apiserver cannot call it.
func (c *Cluster) ApplyMesh(ctx context.Context) error {
	m, err := c.MeshManifest()
	if err != nil {
		return err
	}
	if err := c.ApplyManifest(ctx, "", m); err != nil {
		return err
	}
	return c.WaitWebhooksPatched(ctx)
}

// WaitWebhooksPatched waits until every MutatingWebhookConfiguration of an
// Istio revision (label istio.io/rev) has a caBundle in each of its webhooks.
func (c *Cluster) WaitWebhooksPatched(ctx context.Context) error {
	var missing string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: "istio.io/rev"})
		if err != nil {
			return false, err
		}
		missing = ""
		for _, m := range l.Items {
			for _, w := range m.Webhooks {
				if len(w.ClientConfig.CABundle) == 0 {
					missing = m.Name + "/" + w.Name
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("istiod did not patch its CA into webhook %s: %w", missing, err)
	}
	return nil
}

var meshOnce sync.Once

// InstallMesh makes sure the rendered mesh is applied, its webhooks patched
// by istiod, once per test binary. It stays installed: it is shared state,
// like a real mesh.
func (c *Cluster) InstallMesh(t testing.TB) {
	t.Helper()
	var err error
	meshOnce.Do(func() { err = c.ApplyMesh(context.Background()) })
	if err != nil {
		t.Fatalf("install mesh: %v", err)
	}
}

// WaitPod polls the pod until cond holds, failing the test after timeout with
// the pod's last status.
func (c *Cluster) WaitPod(t testing.TB, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return cond(p), nil
	})
	if err != nil {
		status := "pod not found"
		if last != nil {
			status = fmt.Sprintf("phase=%s conditions=%v init=%v containers=%v", last.Status.Phase, last.Status.Conditions,
				last.Status.InitContainerStatuses, last.Status.ContainerStatuses)
		}
		t.Fatalf("pod %s/%s: waiting for %s: %v; %s", ns, name, what, err, status)
	}
	return last
}

// Running reports whether every container of the pod runs and is ready.
func Running(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podReady(p)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RunEphemeral adds an ephemeral container running command in the pod,
// waits for it to finish and returns its logs.
func (c *Cluster) RunEphemeral(t testing.TB, ns, pod, name, image string, caps []corev1.Capability, command ...string) string {
	t.Helper()
	ctx := context.Background()
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var root int64
	no := false
	ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Command: command,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsNonRoot: &no,
			Capabilities: &corev1.Capabilities{Add: caps}},
	}}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
	if _, err := c.Client.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, pod, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("add ephemeral container %s: %v", name, err)
	}
	c.WaitPod(t, ns, pod, 60*time.Second, "ephemeral container "+name+" to finish", func(p *corev1.Pod) bool {
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == name && s.State.Terminated != nil {
				return true
			}
		}
		return false
	})
	return c.Logs(t, ns, pod, name)
}

// Logs returns a container's log.
func (c *Cluster) Logs(t testing.TB, ns, pod, container string) string {
	t.Helper()
	b, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s/%s -c %s: %v", ns, pod, container, err)
	}
	return string(b)
}

// IgnoreNotFound returns nil for a NotFound error.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ContainerNames lists the names of containers, in order.
func ContainerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, ",")
}

// GrantRole gives user (impersonated with --as) exactly rules in namespace,
// through a Role and RoleBinding named after the user.
func (c *Cluster) GrantRole(t testing.TB, namespace, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: namespace}, Rules: rules}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: user},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}}}
	if _, err := c.Client.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().RoleBindings(namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitGranted(t, user, namespace, rules)
}

// waitGranted waits until the apiserver's authorizer allows user the first
// verb of the first rule granted (its RBAC cache sees a new binding a
// moment after it is created): a test asserts what the grant allows, not
// the race.
func (c *Cluster) waitGranted(t testing.TB, user, namespace string, rules []rbacv1.PolicyRule) {
	t.Helper()
	if len(rules) == 0 || len(rules[0].Verbs) == 0 || len(rules[0].Resources) == 0 {
		return
	}
	r := rules[0]
	group := ""
	if len(r.APIGroups) > 0 {
		group = r.APIGroups[0]
	}
	resource, sub, _ := strings.Cut(r.Resources[0], "/")
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: r.Verbs[0], Group: group, Resource: resource, Subresource: sub}}}
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && got.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("granted %s %s/%s to %s in %q, but the authorizer does not allow it after 30s", r.Verbs[0], group, r.Resources[0], user, namespace)
	}
}

// GrantClusterRole gives user (impersonated with --as) cluster-wide either
// exactly rules, through a ClusterRole named after the user, or, with rules
// nil, the existing ClusterRole clusterRole; both removed when the test ends.
func (c *Cluster) GrantClusterRole(t testing.TB, user, clusterRole string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if rules != nil {
		clusterRole = user
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
		if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), user, metav1.DeleteOptions{})
		})
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), user, metav1.DeleteOptions{})
	})
	if rules == nil {
		// An existing ClusterRole (cluster-admin, view): wait for what it
		// grants, as for rules given here.
		role, err := c.Client.RbacV1().ClusterRoles().Get(ctx, clusterRole, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rules = role.Rules
	}
	c.waitGranted(t, user, "", rules)
}

// RunningPod waits until a pod matching selector in ns runs and returns its name.
func (c *Cluster) RunningPod(t testing.TB, ns, selector string, timeout time.Duration) string {
	t.Helper()
	var name string
	err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if Running(&l.Items[i]) {
				name = l.Items[i].Name
			}
		}
		return name != "", nil
	})
	if err != nil {
		t.Fatalf("no running pod %q in %s after %s", selector, ns, timeout)
	}
	return name
}
