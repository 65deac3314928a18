package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// userShell runs a line as a user pastes it: sh, with kubectl and
// kubectl-mesh on the PATH and the cluster's kubeconfig, in dir.
func userShell(ctx context.Context, t *testing.T, c *testcluster.Cluster, bin, dir string) func(line string) ([]byte, error) {
	t.Helper()
	pathDir := t.TempDir()
	for name, target := range map[string]string{"kubectl": c.KubectlPath, "kubectl-mesh": bin} {
		if err := os.Symlink(target, filepath.Join(pathDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return func(line string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NO_COLOR=1", "PATH="+pathDir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
		return cmd.CombinedOutput()
	}
}

// A platform policy that refuses a part of what the injector adds, with a
// knob of the mesh that leaves that part out: the scrape annotations of
// metrics merging, the sidecar's CPU limit. diagnose names the part, as
// dry runs proved it, and its fix is that knob: pasted as printed (its
// commented exemption not run), the workload runs with its sidecar while
// the policy stays in force.
func TestPolicyRefusalMeshSideFix(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	checks := 0
	defer func() {
		testreport.Count(t, "policy refusals of an injected part, fixed by the mesh's knob the dry runs proved, the policy kept; %d checks", checks)
	}()
	dir := t.TempDir()
	shell := userShell(ctx, t, c, bin, dir)
	cases := []struct {
		name, expression, message, part, knob string
		limited                               bool // the template gives the sidecar a CPU limit
	}{
		{"kmscrape", `!has(object.metadata.annotations) || !object.metadata.annotations.exists(k, k.startsWith("prometheus.io/"))`,
			"prometheus.io/* scrape annotations are not allowed: use a PodMonitor", "prometheus.io/* scrape annotations", "prometheus.istio.io/merge-metrics", false},
		{"kmnolimit", `object.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) || !('cpu' in c.resources.limits)) && (!has(object.spec.initContainers) || object.spec.initContainers.all(c, !has(c.resources) || !has(c.resources.limits) || !('cpu' in c.resources.limits)))`,
			"CPU limits are not allowed (they throttle): set requests only", "resource limits", "sidecar.istio.io/proxyCPULimit", true},
	}
	for _, tc := range cases {
		ns := c.Namespace(t, tc.name, map[string]string{"istio-injection": "enabled"})
		// A probe the policy refuses (not injected): the policy is in force.
		probe := appPod("vap-probe", map[string]string{"sidecar.istio.io/inject": "false"}, map[string]string{"prometheus.io/scrape": "true"})
		probe.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		if err := bindPodPolicy(ctx, t, c, ns+"-pol", ns, tc.expression, tc.message, probe); err != nil {
			t.Fatalf("%s: the policy: %v", tc.name, err)
		}
		manifest := strings.ReplaceAll(manifestWorker, "name: worker\n", "name: worker\n  namespace: "+ns+"\n")
		if tc.limited {
			manifest = strings.ReplaceAll(manifest, `{sidecar.istio.io/proxyCPU: "10m"}`, `{sidecar.istio.io/proxyCPU: "10m", sidecar.istio.io/proxyCPULimit: "200m"}`)
		}
		file := filepath.Join(dir, tc.name+".yaml")
		if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		// The scrape case is diagnosed as a manifest not applied yet (its
		// fix then creates it); the other once its Deployment is refused.
		args := []string{"diagnose", "-f", file, "-n", ns, "--verify"}
		if tc.limited {
			args = []string{"diagnose", "deployment/worker", "-n", ns}
			out, err := shell("kubectl apply -f " + file)
			if err != nil {
				t.Fatalf("%s: apply: %v\n%s", tc.name, err, out)
			}
		}
		var d catDoc
		var it catItem
		var f *catFinding
		err := catPoll(ctx, tc.name+": diagnose names the refusal", func(context.Context) (bool, string) {
			r, err := catRun(bin, append([]string{"--kubeconfig", c.Kubeconfig, "-o", "json"}, args...)...)
			if err != nil || json.Unmarshal([]byte(r.stdout), &d) != nil || len(d.all()) != 1 {
				return false, r.stderr
			}
			it = d.all()[0]
			for i := range it.Findings {
				if it.Findings[i].Status == "fail" && strings.Contains(it.Findings[i].Evidence, "is admitted with its sidecar") {
					f = &it.Findings[i]
					return true, ""
				}
			}
			return false, it.says()
		})
		checks++
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		checks++
		if !strings.Contains(f.Evidence, tc.part) || !strings.Contains(f.Evidence, ns+"-pol") {
			t.Errorf("%s: the finding does not name the part the policy refuses (%s) and the policy: %s", tc.name, tc.part, f.Evidence)
		}
		checks++
		at := 1 // a manifest is applied first
		if tc.limited {
			at = 0
		}
		if knob := strings.Split(f.Fix, "\n")[at]; !strings.Contains(knob, tc.knob) || strings.Contains(knob, "binding") {
			t.Errorf("%s: the fix's first command is not the mesh's knob %s: %s", tc.name, tc.knob, f.Fix)
		}
		t.Logf("%s: %s\nfix:\n%s", tc.name, catShort(f.Evidence), f.Fix)
		if tc.limited {
			// why-injected gives the same answer for the workload: the
			// same fix, exit 4.
			wr, _ := catRun(bin, "--kubeconfig", c.Kubeconfig, "why-injected", "deployment/worker", "-n", ns, "-o", "json")
			var list struct {
				Items []struct {
					Name, Fix string
				} `json:"items"`
			}
			err := json.Unmarshal([]byte(wr.stdout), &list)
			checks++
			if err != nil || len(list.Items) == 0 || list.Items[0].Name != "worker" || list.Items[0].Fix != f.Fix || wr.code != 4 {
				t.Errorf("%s: why-injected deployment/worker: exit %d, %v, its fix differs from diagnose's:\n%s", tc.name, wr.code, err, wr.stdout)
			}
		}
		out, err := shell(f.Fix)
		checks++
		if err != nil {
			t.Fatalf("%s: the pasted fix failed: %v\n%s", tc.name, err, out)
		}
		checks++
		if _, err := catWaitPodSelector(ctx, c, ns, "app=worker", func(p *corev1.Pod) bool {
			return podReadyNow(p) && catStatus(p, "istio-proxy") != nil
		}); err != nil {
			t.Fatalf("%s: after the pasted fix: %v", tc.name, err)
		}
		b, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, ns+"-pol", metav1.GetOptions{})
		checks++
		if err != nil || b.Spec.MatchResources == nil || b.Spec.MatchResources.NamespaceSelector == nil || b.Spec.MatchResources.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != ns || len(b.Spec.MatchResources.NamespaceSelector.MatchExpressions) != 0 {
			t.Errorf("%s: the fix changed the policy's binding: %v %+v", tc.name, err, b)
		}
	}
}
