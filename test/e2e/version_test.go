package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// `kubectl mesh version` shows, as kubectl version and istioctl version
// do, the server's release, the mesh's revisions with the release each
// runs, and the proxies by revision and version: each against what the
// cluster has (its discovery, its injector ConfigMaps, its pods).
func TestVersionShowsClusterAndMesh(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	checks := 0
	defer func() {
		testreport.Count(t, "version: server, revisions and data plane against the cluster; %d checks", checks)
	}()
	r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "version", "-o", "json")
	if err != nil || r.code != 0 {
		t.Fatalf("version -o json: exit %d, %v\n%s", r.code, err, r.stderr)
	}
	var v struct {
		Version string `json:"version"`
		Cluster *struct {
			Server    string `json:"serverVersion"`
			Revisions []struct {
				Name     string   `json:"name"`
				Version  string   `json:"version"`
				Modelled *bool    `json:"modelled"`
				Tags     []string `json:"tags"`
			} `json:"revisions"`
			DataPlane []struct {
				Revision string `json:"revision"`
				Version  string `json:"version"`
				Pods     int    `json:"pods"`
			} `json:"dataPlane"`
		} `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Cluster == nil {
		t.Fatalf("version -o json: %v\n%s", err, r.stdout)
	}
	checks++
	if v.Cluster.Server != c.ServerVersion {
		t.Errorf("server version %q, the apiserver says %q", v.Cluster.Server, c.ServerVersion)
	}
	// Every injector ConfigMap is a revision, with a release.
	cms, err := c.Client.CoreV1().ConfigMaps("istio-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, cm := range cms.Items {
		if cm.Name == "istio-sidecar-injector" {
			want["default"] = true
		} else if rev, ok := strings.CutPrefix(cm.Name, "istio-sidecar-injector-"); ok {
			want[rev] = true
		}
	}
	got := map[string]bool{}
	for _, rv := range v.Cluster.Revisions {
		got[rv.Name] = true
		checks++
		if rv.Version == "" || rv.Modelled == nil || !*rv.Modelled {
			t.Errorf("revision %s: version %q, modelled %v", rv.Name, rv.Version, rv.Modelled)
		}
	}
	checks++
	if len(got) != len(want) {
		t.Errorf("revisions %v, the cluster's injector ConfigMaps %v", got, want)
	}
	for rev := range want {
		checks++
		if !got[rev] {
			t.Errorf("revision %s is not shown", rev)
		}
	}
	// The data plane: as many pods as have an istio-proxy container (read
	// before and after, so that pods other tests create meanwhile do not
	// count: the answer is compared when both reads agree).
	countProxies := func() int {
		pods, err := c.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: "security.istio.io/tlsMode"})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range pods.Items {
			if hasProxySpec(pods.Items[i].Spec.InitContainers) || hasProxySpec(pods.Items[i].Spec.Containers) {
				n++
			}
		}
		return n
	}
	shownProxies := func() int {
		r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "version", "-o", "json")
		if err != nil || r.code != 0 {
			t.Fatalf("version -o json: exit %d, %v\n%s", r.code, err, r.stderr)
		}
		var v struct {
			Cluster struct {
				DataPlane []struct{ Pods int } `json:"dataPlane"`
			} `json:"cluster"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, g := range v.Cluster.DataPlane {
			n += g.Pods
		}
		return n
	}
	agreed := false
	for try := 0; try < 5 && !agreed; try++ {
		before := countProxies()
		shown := shownProxies()
		after := countProxies()
		if before == after {
			checks++
			agreed = true
			if shown != before {
				t.Errorf("data plane: %d pods shown, the cluster has %d with istio-proxy", shown, before)
			}
		}
	}
	if !agreed {
		t.Errorf("the cluster's injected pods kept changing: the data plane was not compared")
	}
	r, err = catRun(bin, "--kubeconfig", c.Kubeconfig, "version")
	checks++
	if err != nil || r.code != 0 || !strings.Contains(r.stdout, "Server Version: "+c.ServerVersion) || !strings.Contains(r.stdout, "REVISION") {
		t.Errorf("version: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// hasProxySpec: one of the containers is istio-proxy.
func hasProxySpec(cs []corev1.Container) bool {
	for _, c := range cs {
		if c.Name == "istio-proxy" {
			return true
		}
	}
	return false
}
