package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// fixCase is a fault planted from testdata/fixes (namespace kmfix-NN),
// diagnose's answer it must get (the item, the code, the words its fix
// must start with), and whether the pasted fix must leave the workload's
// pods with a sidecar.
type fixCase struct {
	nn, object, code, fixStarts string
	injected                    bool
	// healthy: the plant is not a fault; diagnose must not say fail (and
	// there is no fix to paste).
	healthy bool
	// completes: its pods run to completion (a Job): recovered is every
	// pod Succeeded rather than ready.
	completes bool
	state     func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string)
	// applied is a manifest under testdata/fixes/applied put in place with
	// kubectl apply (client-side: the pod keeps the manifest it was
	// applied with); then are shell lines run once state holds (what a
	// user did next).
	applied string
	then    []string
	// minMinor is the least Kubernetes 1.x where the fault can exist (a
	// field of a later release): on an older lane it is not planted.
	minMinor int
	// mesh: the finding must put the fault down to the mesh (its mesh
	// field set), not to the platform.
	mesh bool
	// rules: diagnose reads the pod's rules (--rules), as the fault's
	// finding needs.
	rules bool
	// names: what the finding's evidence must name (the object that acted
	// on the pod), when it is not in the refusal it quotes.
	names string
}

var fixCases = []fixCase{
	{nn: "01", object: "replicaset/web", code: "KM-INJ-004", fixStarts: "kubectl label namespace kmfix-01 istio.io/rev=default --overwrite", injected: true, state: rsFailed},
	{nn: "02", object: "web", code: "KM-INJ-004", fixStarts: "kubectl label namespace kmfix-02 istio.io/rev=default --overwrite", injected: true, state: anyPod("web", "running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})},
	{nn: "03", object: "ledger", code: "KM-CAP-009", fixStarts: "kubectl patch deployment/ledger -n kmfix-03", injected: true, state: anyPod("ledger", "ready", podReadyNow)},
	{nn: "04", object: "replicaset/web", code: "KM-INJ-014", fixStarts: "kubectl patch validatingadmissionpolicybinding kmfix-no-net-admin", injected: true, state: rsFailed},
	// The red team's first round (its 01, 02, 09 and 11), replanted.
	{nn: "05", object: "deployment/web", code: "KM-INJ-013", fixStarts: "kubectl patch validatingwebhookconfiguration kmfix-image-scanner", injected: true, state: rsFailed},
	{nn: "06", object: "statefulset/db", code: "KM-INJ-014", fixStarts: "kubectl patch validatingadmissionpolicybinding kmfix-no-net-admin-sts", injected: true, state: podEvent("FailedCreate")},
	{nn: "07", object: "catalog", code: "KM-CONN-007", fixStarts: "kubectl patch service catalog -n kmfix-07", injected: true, state: anyPod("catalog", "ready", podReadyNow)},
	{nn: "09", object: "deployment/search", code: "KM-INJ-013", fixStarts: "kubectl patch deployment/search -n kmfix-09 --type=merge", injected: true, state: rsFailed,
		names: "LimitRange burst-ratio (its maxLimitRequestRatio cpu per Container, 4)"},
	{nn: "10", object: "job/migrate", code: "KM-INJ-007", fixStarts: "kubectl get job migrate -n kmfix-10 -o json | kubectl patch --local", completes: true, state: podEvent("FailedCreate")},
	// The red team's second round (its 02, 16, 11 and 07), replanted.
	{nn: "11", object: "web", code: "KM-INJ-010", fixStarts: "kubectl patch deployment web -n kmfix-11", injected: true, state: anyPod("web", "ready", podReadyNow)},
	{nn: "12", object: "cart", code: "KM-INJ-010", fixStarts: "kubectl label namespace kmfix-12 istio-injection=enabled --overwrite", injected: true, state: anyPod("cart", "ready", podReadyNow)},
	{nn: "13", object: "front", code: "KM-START-003", fixStarts: "kubectl patch deployment front -n kmfix-13 --type=strategic", injected: true, state: anyPod("front", "istio-proxy running, not ready, over 70s", olderThan(70*time.Second, func(p *corev1.Pod) bool {
		s := catStatus(p, "istio-proxy")
		return s != nil && s.State.Running != nil && !s.Ready
	}))},
	{nn: "14", object: "statefulset/db", code: "KM-INJ-007", fixStarts: "kubectl patch statefulset/db -n kmfix-14", injected: true, state: podEvent("FailedCreate")},
	{nn: "15", object: "catalog", code: "KM-CONN-004", fixStarts: "kubectl patch service catalog-raw -n kmfix-15 --type=json", injected: true, state: anyPod("catalog", "ready", podReadyNow)},
	// The red team's third round (its 05), replanted.
	{nn: "16", object: "gateway-ish", code: "KM-INIT-010", fixStarts: "kubectl patch deployment/gateway-ish -n kmfix-16 --type=json", injected: true, state: podEvent("FailedMount")},
	{nn: "08", object: "payments", code: "KM-START-016", fixStarts: "kubectl patch networkpolicy default-deny-egress -n kmfix-08", injected: true, state: anyPod("payments", "ready", podReadyNow)},
	// The red team's fourth round (its 01, 09, 06 and 17), replanted.
	{nn: "17", object: "web", code: "KM-INJ-001", fixStarts: "kubectl rollout resume deployment/web -n kmfix-17", injected: true, state: anyPod("web", "ready", podReadyNow),
		then: []string{"kubectl rollout pause deployment/web -n kmfix-17", "kubectl label namespace kmfix-17 istio-injection=enabled"}},
	{nn: "18", object: "deployment/batch-worker", code: "KM-INJ-013", fixStarts: "kubectl patch deployment/batch-worker -n kmfix-18 --type=merge", injected: true, state: rsFailed, minMinor: 34},
	{nn: "19", object: "replicaset/reports", code: "KM-INJ-011", fixStarts: `kubectl patch deployment/reports -n kmfix-19 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyMemory":"48Mi"}}}}}'`, injected: true, state: rsFailed},
	{nn: "20", object: "pod/reporter", code: "KM-CAP-008", fixStarts: "kubectl apply view-last-applied pod/reporter -n kmfix-20 -o json | kubectl patch --local", injected: true, state: anyPod("reporter", "ready", podReadyNow),
		applied: "20-reporter.yaml"},
	// The red team's fifth round (its 12, 04 and 02), replanted.
	{nn: "21", object: "collector", code: "KM-CAP-010", fixStarts: `kubectl patch daemonset/collector -n kmfix-21 --type=json -p '[{"op":"replace","path":"/spec/template/spec/initContainers/0/name"`, injected: true, state: anyPod("collector", "ready", podReadyNow)},
	{nn: "22", object: "client", code: "KM-CAP-010", fixStarts: `kubectl patch deployment/client -n kmfix-22 --type=json -p '[{"op":"remove","path":"/spec/template/spec/containers/1/securityContext/runAsUser"}]'`, injected: true, state: anyPod("client", "running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})},
	{nn: "23", object: "deployment/cache", code: "KM-INJ-013", fixStarts: "kubectl patch validatingadmissionpolicybinding kmfix-emptydir-sizelimit", injected: true, state: rsFailed, mesh: true},
	// The red team's sixth round (its 01, 02, 09, 12, 07, 04, 10 and 05), replanted.
	{nn: "24", object: "deployment/web", code: "KM-INJ-016", fixStarts: `kubectl patch deployment/web -n kmfix-24 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/userVolumeMount":`, injected: true, state: rsFailed, mesh: true},
	{nn: "25", object: "statefulset/edge", code: "KM-INJ-016", fixStarts: `kubectl patch statefulset/edge -n kmfix-25 --type=json -p '[{"op":"replace","path":"/spec/template/spec/volumes/0/name","value":"app-istio-envoy"}`, injected: true, state: podEvent("FailedCreate"), mesh: true},
	{nn: "26", object: "metrics-api", code: "KM-CAP-003", fixStarts: `kubectl patch deployment/metrics-api -n kmfix-26 --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/status.sidecar.istio.io~1port"}]'`, injected: true, state: anyPod("metrics-api", "ready", podReadyNow), mesh: true},
	{nn: "27", object: "quotes", code: "KM-CAP-011", fixStarts: `kubectl patch statefulset/quotes -n kmfix-27 --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/inject.istio.io~1templates"}]'`, injected: true, state: anyPod("quotes", "ready", podReadyNow), mesh: true},
	{nn: "28", object: "node-agent", code: "KM-CAP-012", fixStarts: `kubectl patch daemonset/node-agent -n kmfix-28 --type=json -p '[{"op":"remove","path":"/spec/template/spec/initContainers/0"}]'`, injected: true, state: anyPod("node-agent", "ready", podReadyNow), rules: true},
	{nn: "29", object: "migrate", code: "KM-INJ-017", fixStarts: "kubectl patch mutatingadmissionpolicybinding kmfix-no-sidecar-for-jobs --type=json", injected: true, state: anyPod("migrate", "ready", podReadyNow), mesh: true, minMinor: 36},
	{nn: "30", object: "log-relay", code: "KM-INJ-009", fixStarts: `kubectl patch daemonset/log-relay -n kmfix-30 --type=json -p '[{"op":"remove","path":"/spec/template/spec/hostNetwork"}]'`, injected: true, state: anyPod("log-relay", "ready", podReadyNow)},
	{nn: "31", object: "pod/worker", code: "KM-INIT-010", fixStarts: `kubectl patch resourcequota tenant-objects -n kmfix-31 --type=merge -p '{"spec":{"hard":{"count/configmaps":`, injected: true, state: quotaCounted("tenant-objects"), mesh: true,
		then: []string{"kubectl delete configmap istio-ca-root-cert -n kmfix-31 --ignore-not-found", "kubectl apply -f testdata/fixes/applied/31-worker.yaml",
			"for i in $(seq 90); do kubectl get events -n kmfix-31 --field-selector reason=FailedMount -o name | grep -q . && exit 0; sleep 2; done; exit 1"}},
	// The red team's ninth round (its 11 and 09), replanted.
	{nn: "32", object: "node-metrics", code: "KM-START-008", fixStarts: `kubectl patch daemonset/node-metrics -n kmfix-32 --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"command":["/bin/sh","-c","mkdir -p /m && echo '\''node_up 1'\'' > /m/metrics && exec httpd -f -p 9020 -h /m"]`, injected: true, state: anyPod("node-metrics", "app restarted", restarted("app")), mesh: true},
	{nn: "33", object: "pod/edge", code: "KM-START-008", fixStarts: "kubectl apply view-last-applied pod/edge -n kmfix-33 -o json | kubectl patch --local -f - --type=strategic", injected: true, state: anyPod("edge", "app restarted", restarted("app")),
		applied: "33-edge.yaml", mesh: true},
	{nn: "34", object: "ledger", code: "KM-INIT-005", fixStarts: `kubectl patch statefulset/ledger -n kmfix-34 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}}}'`, injected: true, mesh: true,
		state: anyPod("ledger", "wait-for-mesh running over 65s", olderThan(65*time.Second, func(p *corev1.Pod) bool {
			s := catStatus(p, "wait-for-mesh")
			return s != nil && s.State.Running != nil
		}))},
	{nn: "35", object: "pod/worker", code: "KM-INIT-010", fixStarts: `kubectl patch validatingadmissionpolicybinding kmfix-configmap-owner --type=json -p '[{"op":"add","path":"/spec/matchResources/excludeResourceRules"`, injected: true, mesh: true,
		state: configMapsRefused,
		then: []string{"kubectl delete configmap istio-ca-root-cert kube-root-ca.crt -n kmfix-35 --ignore-not-found", "kubectl apply -f testdata/fixes/applied/35-worker.yaml",
			"for i in $(seq 90); do kubectl get events -n kmfix-35 --field-selector reason=FailedMount -o name | grep -q . && exit 0; sleep 2; done; exit 1"}},
	// The red team's tenth round (its 02), replanted.
	{nn: "36", object: "worker", code: "KM-START-012", fixStarts: `kubectl patch deployment/worker -n kmfix-36 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}}}'`, injected: true, mesh: true,
		state: anyPod("worker", "Pending over 100s, istio-proxy not started", olderThan(100*time.Second, func(p *corev1.Pod) bool {
			s := catStatus(p, "istio-proxy")
			return p.Status.Phase == corev1.PodPending && s != nil && s.State.Waiting != nil
		}))},
	// The red team's tenth round (its user volume), replanted.
	{nn: "37", object: "web", code: "KM-INIT-010", fixStarts: `kubectl patch configmap proxy-extra -n kmfix-37 --type=merge -p '{"data":{"tls.conf":"VALUE"}}'`, injected: true, mesh: true, state: podEvent("FailedMount")},
	// The red team's twelfth round (its 11), replanted: the pod stays out
	// of the mesh, out of the Service.
	{nn: "38", object: "pod/pay-debug", code: "KM-CONN-009", fixStarts: "kubectl label pod pay-debug -n kmfix-38 app-", mesh: true,
		state: anyPod("pay", "pay-debug ready beside a meshed pay pod", func(p *corev1.Pod) bool { return p.Name == "pay-debug" && podReadyNow(p) })},
	// Its 04: the exemption, and the native sidecar the Job then needs.
	{nn: "39", object: "job/migrate", code: "KM-INJ-013", fixStarts: "kubectl patch validatingadmissionpolicybinding kmfix-no-init --type=json", completes: true, mesh: true, state: podEvent("FailedCreate")},
	// Its 08: the template's own proxy annotations are what the policy refuses.
	{nn: "40", object: "statefulset/cache", code: "KM-INJ-013", fixStarts: `kubectl patch statefulset/cache -n kmfix-40 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":null,"sidecar.istio.io/proxyMemory":null}}}}}'`,
		injected: true, mesh: true, state: podEvent("FailedCreate")},
	// Round 13's 12: the app's own ACCEPT ahead of the capture, taken out.
	{nn: "42", object: "cache", code: "KM-CAP-012", fixStarts: `kubectl patch statefulset/cache -n kmfix-42 --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/command/2","value":"mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 6379 -h /www"},{"op":"remove","path":"/spec/template/spec/containers/0/securityContext/capabilities/add/0"}]'`,
		injected: true, state: anyPod("cache", "ready", podReadyNow)},
	// Its 06: the sidecar's CPU request over the policy's cap, sized down.
	{nn: "41", object: "job/report", code: "KM-INJ-013", fixStarts: "kubectl get job report -n kmfix-41 -o json | kubectl patch --local -f - --type=merge", completes: true, mesh: true, state: podEvent("FailedCreate")},
	// Round 14's: a pinned pod whose sidecar asks for more memory than its
	// node has, re-created without the annotation.
	{nn: "43", object: "pod/cache", code: "KM-INJ-021", fixStarts: "kubectl apply view-last-applied pod/cache -n kmfix-43 -o json | kubectl patch --local -f - --type=merge", injected: true, mesh: true,
		state: func(context.Context, *testcluster.Cluster, string) (bool, string) { return true, "" },
		then: []string{`sed "s/NODE/$(kubectl get nodes -l '!kmesh.test/no-kubelet' -o jsonpath='{.items[0].metadata.name}')/" testdata/fixes/applied/43-cache.yaml | kubectl apply -f -`,
			"for i in $(seq 60); do [ \"$(kubectl get pod cache -n kmfix-43 -o jsonpath='{.status.reason}')\" = OutOfmemory ] && exit 0; sleep 2; done; exit 1"}},
	// Round 15's 12: istio-proxy's readiness probe delayed by annotation.
	{nn: "44", object: "checkout", code: "KM-START-003", fixStarts: `kubectl patch deployment/checkout -n kmfix-44 --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/readiness.status.sidecar.istio.io~1initialDelaySeconds"}]'`,
		injected: true, mesh: true, state: anyPod("checkout", "istio-proxy running, not ready", func(p *corev1.Pod) bool {
			s := catStatus(p, "istio-proxy")
			return s != nil && s.State.Running != nil && !s.Ready
		})},
	{nn: "45", object: "pricing", code: "KM-START-008", fixStarts: `kubectl patch deployment/pricing -n kmfix-45 --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"command":["/bin/sh","-c","mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 9000 -h /www"],"name":"app","ports":[{"$patch":"delete","containerPort":15000},{"containerPort":9000,"name":"http","protocol":"TCP"}],"readinessProbe":{"httpGet":{"port":9000}}}]}}}}'`,
		injected: true, mesh: true, state: anyPod("pricing", "app restarted", restarted("app"))},
	{nn: "46", object: "web", code: "KM-INJ-010", fixStarts: "kubectl label namespace kmfix-46 istio-injection=enabled   # the annotation's key and value, as a label", injected: true, state: anyPod("web", "ready", podReadyNow)},
	{nn: "47", object: "ledger-writer", code: "KM-START-012", fixStarts: `kubectl patch deployment/ledger-writer -n kmfix-47 --type=merge -p '{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'`,
		injected: true, state: anyPod("ledger-writer", "ready", podReadyNow),
		then: []string{"kubectl rollout restart deployment/ledger-writer -n kmfix-47",
			"for i in $(seq 60); do kubectl get pods -n kmfix-47 -o jsonpath='{.items[*].status.conditions[?(@.reason==\"Unschedulable\")].reason}' | grep -q Unschedulable && exit 0; sleep 2; done; exit 1"}},
	{nn: "48", object: "nightly-export", code: "KM-START-017", fixStarts: "kubectl get job nightly-export -n kmfix-48 -o json | kubectl patch --local -f - --type=merge", injected: true, completes: true,
		state: anyPod("nightly-export", "export ended, log-shipper running", func(p *corev1.Pod) bool {
			e, s := catStatus(p, "export"), catStatus(p, "log-shipper")
			return e != nil && e.State.Terminated != nil && s != nil && s.State.Running != nil
		})},
	{nn: "49", object: "shipping", code: "KM-CONN-010", fixStarts: `kubectl patch service shipping -n kmfix-49 --type=json -p '[{"op":"remove","path":"/spec/selector/service.istio.io~1canonical-revision"}]'`, injected: true, mesh: true,
		state: anyPod("shipping", "ready", podReadyNow)},
	// Round 18's 04, 08 and 05: the app calls a proxy its pod does not
	// have (opted out, or a namespace no injector selects).
	{nn: "50", object: "report", code: "KM-START-018", fixStarts: "kubectl get job report -n kmfix-50 -o json | kubectl patch --local -f - --type=merge", injected: true, completes: true, mesh: true,
		state: anyPod("report", "report waiting for the proxy over a minute", runningFor("report", 65*time.Second))},
	{nn: "51", object: "export", code: "KM-START-018", fixStarts: "kubectl get job export -n kmfix-51 -o json | kubectl patch --local -f - --type=merge", injected: true, completes: true, mesh: true,
		state: anyPod("export", "the run failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })},
	{nn: "52", object: "cache", code: "KM-START-018", fixStarts: `kubectl patch deployment/cache -n kmfix-52 --type=strategic -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}}}'`, injected: true, mesh: true,
		state: anyPod("cache", "not ready for over a minute", func(p *corev1.Pod) bool {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					return c.Status == corev1.ConditionFalse && p.Status.Phase == corev1.PodRunning && time.Since(c.LastTransitionTime.Time) > 65*time.Second
				}
			}
			return false
		})},
	// Round 19's 18, 24, 02 and 26.
	{nn: "53", object: "deployment/web", code: "KM-INJ-013", fixStarts: `kubectl patch deployment/web -n kmfix-53 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"inject.istio.io/templates":"sidecar"}}}}}'`,
		injected: true, mesh: true, state: podEvent("FailedCreate")},
	{nn: "54", object: "node-cache", code: "KM-START-019", fixStarts: `kubectl patch daemonset/node-cache -n kmfix-54 --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/status.sidecar.istio.io~1port"}]'`,
		injected: true, mesh: true, state: anyPod("node-cache", "running, not ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && !podReadyNow(p) })},
	{nn: "55", object: "migrate", code: "KM-INIT-012", fixStarts: "kubectl get job migrate -n kmfix-55 -o json | kubectl patch --local -f - --type=merge", injected: true, completes: true, mesh: true,
		state: anyPod("migrate", "the run failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })},
	{nn: "56", object: "orders", code: "KM-INJ-010", fixStarts: `kubectl patch statefulset orders -n kmfix-56 --type merge -p '{"spec": {"template": {"metadata": {"labels": {"istio.io/rev": null}}}}}'`, injected: true,
		state: anyPod("orders", "ready", podReadyNow)},
	// Round 20's 07, 04, 05, 03, 02 and 06.
	{nn: "57", object: "reconciler", code: "KM-CAP-014", fixStarts: `kubectl patch statefulset/reconciler -n kmfix-57 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":null}}}}}'`,
		injected: true, mesh: true, state: anyPod("reconciler", "ready", podReadyNow)},
	{nn: "58", object: "payments-gw", code: "KM-START-020", fixStarts: `kubectl patch deployment/payments-gw -n kmfix-58 --type=strategic -p '{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":70}}}}'`,
		injected: true, mesh: true, state: anyPod("payments-gw", "ready", podReadyNow)},
	{nn: "59", object: "search", code: "KM-INIT-003", fixStarts: `kubectl patch deployment/search -n kmfix-59 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":null}}}}}'`,
		injected: true, state: anyPod("search", "istio-init failed", func(p *corev1.Pod) bool {
			s := catStatus(p, "istio-init")
			return s != nil && s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0
		})},
	{nn: "60", object: "node-exporter", code: "KM-INIT-005", fixStarts: `kubectl patch daemonset/node-exporter -n kmfix-60 --type=strategic -p '{"spec":{"template":{"spec":{"initContainers":[{"name":"log-shipper","restartPolicy":"Always"}]}}}}'`,
		injected: true, state: anyPod("node-exporter", "log-shipper running for over a minute", func(p *corev1.Pod) bool {
			s := catStatus(p, "log-shipper")
			return s != nil && s.State.Running != nil && time.Since(s.State.Running.StartedAt.Time) > 65*time.Second
		})},
	{nn: "61", object: "checkout", code: "KM-INIT-009", fixStarts: `kubectl patch deployment/checkout -n kmfix-61 --type=strategic -p '{"spec":{"template":{"spec":{"securityContext":{"seccompProfile":{"localhostProfile":null,"type":"RuntimeDefault"}}}}}}'`,
		injected: true, state: anyPod("checkout", "istio-init cannot be created", func(p *corev1.Pod) bool {
			s := catStatus(p, "istio-init")
			return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == "CreateContainerError"
		})},
	{nn: "62", object: "storefront", code: "KM-START-014", fixStarts: `kubectl patch replicaset/storefront -n kmfix-62 --type=strategic -p '{"spec":{"template":{"spec":{"readinessGates":null}}}}'`,
		injected: true, state: anyPod("storefront", "running, containers ready, not ready", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && !podReadyNow(p) && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].Ready
		})},
	// Round 21's 01 and 05 (after the move).
	{nn: "63", object: "api", code: "KM-START-004", fixStarts: `kubectl patch deployment/api -n kmfix-63 --type=strategic -p '{"spec":{"template":{"spec":{"securityContext":{"sysctls":null}}}}}'`,
		injected: true, mesh: true, names: "net.ipv4.ip_unprivileged_port_start=16000", state: anyPod("api", "istio-proxy failed again", func(p *corev1.Pod) bool {
			return catFailedAgain(catStatus(p, "istio-proxy"))
		})},
	{nn: "64", object: "web", code: "KM-CONN-010", fixStarts: `kubectl patch service web -n kmfix-64 --type=json -p '[{"op":"remove","path":"/spec/selector/istio.io~1rev"}]'`,
		injected: true, mesh: true, state: anyPod("web", "ready", podReadyNow)},
	// Round 22's 04 and 09.
	{nn: "65", object: "shop-web", code: "KM-INIT-013", fixStarts: `kubectl patch deployment/shop-web -n kmfix-65 --type=strategic -p '{"spec":{"template":{"spec":{"initContainers":[{"name":"config-reloader","startupProbe":null}]}}}}'`,
		injected: true, state: anyPod("shop-web", "config-reloader running, not started", func(p *corev1.Pod) bool {
			s := catStatus(p, "config-reloader")
			return s != nil && s.State.Running != nil && (s.Started == nil || !*s.Started)
		})},
	{nn: "66", object: "cache", code: "KM-INIT-013", fixStarts: `kubectl patch statefulset/cache -n kmfix-66 --type=strategic -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}}}'`,
		injected: true, mesh: true, state: anyPod("cache", "metrics-agent running, not started", func(p *corev1.Pod) bool {
			s := catStatus(p, "metrics-agent")
			return s != nil && s.State.Running != nil && (s.Started == nil || !*s.Started)
		})},
	// Round 24's 05: the fix is the CronJob's, not only its stuck Job's.
	{nn: "67", object: "nightly-export", code: "KM-INIT-009", fixStarts: `kubectl patch cronjob/nightly-export -n kmfix-67 --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyImageType":null}}}}}}}'`,
		injected: true, completes: true, mesh: true, state: anyPod("nightly-export", "istio-init cannot pull its image", func(p *corev1.Pod) bool {
			return waitingOn("istio-init", "ErrImagePull")(p) || waitingOn("istio-init", "ImagePullBackOff")(p)
		})},
	// Round 24's 02: a StatefulSet does not replace its stuck pod.
	{nn: "68", object: "db", code: "KM-START-004", fixStarts: `kubectl patch statefulset/db -n kmfix-68 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyImageType":"default"}}}}}'   # the variant "distroless" of the mesh's proxy image is not one the nodes can pull; it comes from the pod's own proxy.istio.io/config`,
		injected: true, mesh: true, state: anyPod("db", "istio-proxy cannot pull its image", func(p *corev1.Pod) bool {
			return waitingOn("istio-proxy", "ErrImagePull")(p) || waitingOn("istio-proxy", "ImagePullBackOff")(p)
		})},
	// Round 24's 07: a claim template cannot change; the StatefulSet is made again.
	{nn: "69", object: "statefulset/queue", code: "KM-INJ-016", fixStarts: `kubectl get statefulset/queue -n kmfix-69 -o json | kubectl patch --local -f - --type=json -p '[{"op":"replace","path":"/spec/volumeClaimTemplates/0/metadata/name","value":"app-istio-data"}`,
		injected: true, mesh: true, state: podEvent("FailedCreate")},
	// Round 25's 02: the app's probes ask the proxy's 15021.
	{nn: "70", object: "catalog", code: "KM-START-022", fixStarts: `kubectl patch deployment/catalog -n kmfix-70 --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"livenessProbe":{"httpGet":{"path":"/","port":8080}},"name":"app","readinessProbe":{"httpGet":{"path":"/","port":8080}}}]}}}}'`,
		injected: true, mesh: true, state: anyPod("catalog", "ready", podReadyNow)},
	// Round 25's 04: the template rolled back, the pod left on the bad revision.
	{nn: "71", object: "kv", code: "KM-START-014", fixStarts: "kubectl delete pod kv-0 -n kmfix-71   # created again from statefulset/kv's current template",
		injected: true, state: anyPod("kv", "running, not ready, over 70s", olderThan(70*time.Second, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && !podReadyNow(p)
		})),
		then: []string{`kubectl patch statefulset kv -n kmfix-71 --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/command/2","value":"mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 7000 -h /w"}]'`, "sleep 3"}},
	// Round 26's 03: the probe's host localhost, kept by the rewrite.
	{nn: "72", object: "catalog", code: "KM-START-023", fixStarts: `kubectl patch deployment/catalog -n kmfix-72 --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","readinessProbe":{"httpGet":{"host":null}}}]}}}}'`,
		injected: true, state: anyPod("catalog", "running, not ready, over 20s", olderThan(20*time.Second, func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning && !podReadyNow(p)
		}))},
	// Round 27's 08: the opt-out on the jobTemplate's metadata, not its pod template.
	{nn: "73", object: "report", code: "KM-INJ-023", fixStarts: `kubectl patch cronjob/report -n kmfix-73 --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}}}}}}}'`,
		completes: true, mesh: true, state: anyPod("report", "its work done, istio-proxy running", func(p *corev1.Pod) bool {
			s := catStatus(p, "report")
			return s != nil && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
		})},
	// Round 28's 06: a scheduling gate in the template, which nothing lifts.
	{nn: "74", object: "search", code: "KM-START-012", fixStarts: `kubectl patch deployment/search -n kmfix-74 --type=json -p '[{"op":"remove","path":"/spec/template/spec/schedulingGates"}]'`,
		injected: true, names: "its pod template (deployment/search) carries them", state: anyPod("search", "scheduling gated, over 65s", olderThan(65*time.Second, func(p *corev1.Pod) bool {
			return len(p.Spec.SchedulingGates) > 0
		}))},
	// Round 28's 07: a StatefulSet's pod deleted with a finalizer nothing removes.
	{nn: "75", object: "queue", code: "KM-START-012", fixStarts: `kubectl patch pod queue-0 -n kmfix-75 --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'`,
		injected: true, names: "statefulset/queue makes no new queue-0", state: anyPod("queue", "ready", func(p *corev1.Pod) bool { return podReadyNow(p) }),
		then: []string{`kubectl patch pod queue-0 -n kmfix-75 --type=merge -p '{"metadata":{"finalizers":["drain.example.com/protect"]}}'`,
			"kubectl delete pod queue-0 -n kmfix-75 --wait=false", "sleep 40"}},
	// Round 28's 05: a Job whose spec.managedBy names a controller not run here.
	{nn: "76", object: "job/export", code: "KM-INJ-013", fixStarts: `kubectl get job export -n kmfix-76 -o json | kubectl patch --local -f - --type=merge`,
		completes: true, injected: true, names: "its spec.managedBy is kueue.x-k8s.io/multikueue", minMinor: 32, state: jobOlderThan("export", 65*time.Second)},
	// Round 28's 03: a policy that requires the sidecar, a Job opted out.
	{nn: "77", object: "job/migrate", code: "KM-INJ-013", fixStarts: "kubectl get job migrate -n kmfix-77 -o json | kubectl patch --local -f - --type=merge",
		completes: true, injected: true, mesh: true, names: "the template's opt-out from the mesh", state: podEvent("FailedCreate")},
	// Round 28's 02: a Service selecting an older template's pod-template-hash.
	{nn: "78", object: "cart", code: "KM-CONN-011", fixStarts: `kubectl patch service cart -n kmfix-78 --type=json -p '[{"op":"remove","path":"/spec/selector/pod-template-hash"}]'`,
		injected: true, state: anyPod("cart", "ready", func(p *corev1.Pod) bool { return podReadyNow(p) })},
	// Round 29's 01: proxyMetadata DRY_RUN, so istio-init writes no rules.
	{nn: "79", object: "api", code: "KM-CAP-015", fixStarts: `kubectl patch deployment/api -n kmfix-79 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":null}}}}}'`,
		injected: true, mesh: true, state: anyPod("api", "ready", func(p *corev1.Pod) bool { return podReadyNow(p) })},
	// Round 31's 06: a sidecar pod labelled for ambient mode; the fix takes the pod's label off, not the namespace's.
	{nn: "81", object: "api", code: "KM-INJ-003", fixStarts: `kubectl patch deployment/api -n kmfix-81 --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"istio.io/dataplane-mode":null}}}}}'`,
		injected: true, state: anyPod("api", "ready", func(p *corev1.Pod) bool { return podReadyNow(p) })},
	// Round 30's 02: proxyMetadata PROXY_GID=0, so group 0's traffic bypasses the proxy.
	{nn: "80", object: "api", code: "KM-CAP-016", fixStarts: `kubectl patch deployment/api -n kmfix-80 --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":null}}}}}'`,
		injected: true, mesh: true, state: anyPod("api", "ready", func(p *corev1.Pod) bool { return podReadyNow(p) })},
}

// jobOlderThan: Job name exists and is older than d.
func jobOlderThan(name string, d time.Duration) func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	return func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
		j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return time.Since(j.CreationTimestamp.Time) > d, "job/" + name + " younger than " + d.String()
	}
}

// plantFixes plants the faults of testdata/fixes that can exist on the
// lane's Kubernetes (KMESH_FIXES=NN,NN: only those, a developer's run of
// a few; make test plants every one), marking them in planted.
func plantFixes(ctx context.Context, t *testing.T, c *testcluster.Cluster, planted map[string]bool) {
	t.Helper()
	files, err := filepath.Glob("testdata/fixes/[0-9][0-9]-*.yaml")
	if err != nil || len(files) != len(fixCases) {
		t.Fatalf("testdata/fixes: %d files (%v), %d cases", len(files), err, len(fixCases))
	}
	sort.Strings(files)
	lane := laneMinor(c.ServerVersion)
	// KMESH_FIXES=NN,NN plants only those (a developer's run of a few);
	// make test plants every one.
	only := strings.Split(os.Getenv("KMESH_FIXES"), ",")
	for _, f := range files {
		nn := filepath.Base(f)[:2]
		if only[0] != "" && !slices.Contains(only, nn) {
			continue
		}
		if fc := fixCaseOf(nn); fc != nil && fc.minMinor > lane {
			testreport.Count(t, "fault %s cannot exist on Kubernetes %s (it needs 1.%d): not planted on this lane", nn, c.ServerVersion, fc.minMinor)
			continue
		}
		plantFix(ctx, t, c, f)
		planted[nn] = true
	}
}

// configMapsRefused: a dry-run create of a ConfigMap without an owner
// label is refused in ns (the policy is in force).
func configMapsRefused(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns}}
	_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return false, "the policy admits ConfigMaps yet"
	}
	return true, ""
}

// quotaCounted: the ResourceQuota's usage is counted (its admission then
// holds).
func quotaCounted(name string) func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	return func(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
		q, err := c.Client.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(q.Status.Used) == 0 {
			return false, "resourcequota " + name + " not counted yet"
		}
		return true, ""
	}
}

// TestFixesRecover plants faults taken from Istio's issues, checks that
// diagnose puts each down to what acted on the pod, then pastes the fix it
// printed, line by line, as a user would (comments and all, through a
// shell, with kubectl and the plugin on PATH), and waits until the
// workload recovers: its pods ready (with a sidecar where one is asked
// for), and diagnose no longer finding the fault.
func TestFixesRecover(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.KubectlPath == "" {
		t.Fatal("no kubectl: hack/cluster/build-kube.sh builds it")
	}
	bin := meshBinary(t, c)
	ctx := context.Background()
	start := time.Now()
	var recovered, checks atomic.Int64
	planted := map[string]bool{}
	defer func() {
		testreport.Count(t, "pasted fixes: %d of %d planted faults named and recovered after their printed fix was run; %d checks (%s)", recovered.Load(), len(planted), checks.Load(), time.Since(start).Round(time.Second))
	}()
	// A shell where `kubectl` is the cluster's and `kubectl mesh` this build.
	shell := pasteShell(ctx, t, c, "")
	plantFixes(ctx, t, c, planted)
	for _, fc := range fixCases {
		if fc.applied != "" && planted[fc.nn] {
			if out, err := shell("kubectl apply -f testdata/fixes/applied/" + fc.applied); err != nil {
				t.Fatalf("kubectl apply %s: %v\n%s", fc.applied, err, out)
			}
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	errs := make([]error, len(fixCases))
	var wg sync.WaitGroup
	for i, fc := range fixCases {
		if !planted[fc.nn] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = catPoll(waitCtx, "fault "+fc.nn+"'s state", func(ctx context.Context) (bool, string) { return fc.state(ctx, c, "kmfix-"+fc.nn) })
			for _, line := range fc.then {
				if errs[i] != nil {
					break
				}
				if out, err := shell(line); err != nil {
					errs[i] = fmt.Errorf("%s: %v\n%s", line, err, out)
				}
			}
		}()
	}
	wg.Wait()
	// Each fault in its own namespace: their fixes are pasted and their
	// recoveries awaited side by side (a controller's retry back-off is
	// most of the wait).
	t.Run("cases", func(t *testing.T) {
		for i, fc := range fixCases {
			if !planted[fc.nn] {
				continue
			}
			t.Run(fc.nn, func(t *testing.T) {
				t.Parallel()
				if errs[i] != nil {
					t.Fatalf("not in its state: %v", errs[i])
				}
				ns := "kmfix-" + fc.nn
				it, found := fixFinding(t, bin, c, ns, fc)
				checks.Add(1)
				// why-injected shows diagnose's injection check: the same
				// exit for the same state.
				checks.Add(1)
				if msg := injectionAgrees(bin, c, ns); msg != "" {
					t.Error(msg)
				}
				// So do startup's init and start checks, pod by pod.
				msg, n := commandsAgree(bin, c, ns)
				checks.Add(int64(n))
				if msg != "" {
					t.Errorf("the commands disagree in %s: %s", ns, msg)
				}
				if found == nil {
					return
				}
				checks.Add(1)
				if fc.mesh && found.Mesh == "" {
					t.Errorf("%s is put down to the platform, not to what the mesh added: %s", fc.code, found.Evidence)
				}
				if fc.names != "" {
					checks.Add(1)
					if !strings.Contains(found.Evidence, fc.names) {
						t.Errorf("%s does not name %s: %s", fc.code, fc.names, found.Evidence)
					}
				}
				checks.Add(1)
				if !strings.HasPrefix(found.Fix, fc.fixStarts) {
					t.Fatalf("%s's fix does not start with %q:\n%s", fc.code, fc.fixStarts, found.Fix)
				}
				t.Logf("%s %s: %s; fix:\n%s", fc.nn, it.Name, catShort(found.Evidence), found.Fix)
				if strings.HasPrefix(fc.code, "KM-INJ-") {
					// --verify's dry run meets the same refusal: the sweep
					// finishes, and the answer is the same.
					d, r, err := catDiagnose(bin, c.Kubeconfig, ns, "--verify")
					checks.Add(1)
					if err != nil || r.code == 1 {
						t.Fatalf("diagnose -n %s --verify: exit %d, %v\n%s", ns, r.code, err, r.stderr)
					}
					same := false
					for _, x := range d.all() {
						for _, f := range x.Findings {
							same = same || f.Code == fc.code
						}
					}
					checks.Add(1)
					if !same {
						t.Errorf("diagnose -n %s --verify has no %s", ns, fc.code)
					}
				}
				for _, line := range strings.Split(found.Fix, "\n") {
					out, err := shell(line)
					checks.Add(1)
					if err != nil {
						t.Fatalf("the pasted fix failed: %s: %v\n%s", line, err, out)
					}
				}
				recCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
				defer cancel()
				checks.Add(1)
				if err := catPoll(recCtx, ns+" recovered", func(ctx context.Context) (bool, string) {
					return fixRecovered(ctx, bin, c, ns, fc)
				}); err != nil {
					t.Fatalf("after the pasted fix: %v", err)
				}
				recovered.Add(1)
			})
		}
	})
}

// fixFinding is diagnose's item for the case's object and its finding of
// the case's code (nil, with the test failed, when there is none).
func fixFinding(t *testing.T, bin string, c *testcluster.Cluster, ns string, fc fixCase) (*catItem, *catFinding) {
	t.Helper()
	var more []string
	if fc.rules {
		more = append(more, "--rules")
	}
	d, r, err := catDiagnose(bin, c.Kubeconfig, ns, more...)
	if err != nil {
		t.Fatalf("diagnose -n %s: %v\n%s", ns, err, r.stderr)
	}
	for _, x := range d.all() {
		x := x
		kindName := strings.ToLower(x.WorkloadKind) + "/" + x.Name
		if !(x.WorkloadKind == "Pod" && strings.HasPrefix(x.Name, fc.object+"-") || kindName == fc.object || strings.HasPrefix(kindName, fc.object+"-")) {
			continue
		}
		if x.Status == "pass" && !fc.healthy {
			t.Errorf("%s is broken, diagnose says pass: %s", fc.object, x.says())
		}
		for j := range x.Findings {
			if x.Findings[j].Code == fc.code {
				return &x, &x.Findings[j]
			}
		}
		t.Errorf("%s: no finding %s: %s", fc.object, fc.code, x.says())
		return &x, nil
	}
	t.Errorf("no item %s in diagnose -n %s", fc.object, ns)
	return nil, nil
}

// fixRecovered: every pod of the namespace is ready (with istio-proxy when
// the case wants a sidecar), none is being deleted, and diagnose no
// longer has the fault's code.
func fixRecovered(ctx context.Context, bin string, c *testcluster.Cluster, ns string, fc fixCase) (bool, string) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	if len(pods.Items) == 0 {
		return false, "no pods yet"
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if fc.completes {
			if p.Status.Phase != corev1.PodSucceeded {
				return false, "pod " + p.Name + ": " + catPodState(p)
			}
			continue
		}
		if p.DeletionTimestamp != nil || !podReadyNow(p) || fc.injected && catStatus(p, "istio-proxy") == nil {
			return false, "pod " + p.Name + ": " + catPodState(p)
		}
	}
	d, r, err := catDiagnose(bin, c.Kubeconfig, ns)
	if err != nil {
		return false, err.Error() + r.stderr
	}
	for _, x := range d.all() {
		for _, f := range x.Findings {
			if f.Code == fc.code {
				return false, fmt.Sprintf("diagnose still finds %s on %s: %s", fc.code, x.Name, catShort(f.Evidence))
			}
		}
	}
	// The workload named, as a user asks after the fix: its past refusals
	// (FailedCreate events that stay for an hour) are over.
	if kind, _, ok := strings.Cut(fc.object, "/"); ok && kind != "replicaset" {
		d, r, err := catDiagnose(bin, c.Kubeconfig, ns, fc.object)
		if err != nil {
			return false, err.Error() + r.stderr
		}
		for _, x := range d.all() {
			for _, f := range x.Findings {
				if f.Code == fc.code {
					return false, fmt.Sprintf("diagnose %s still finds %s: %s", fc.object, fc.code, catShort(f.Evidence))
				}
			}
		}
	}
	return true, ""
}

// plantFix applies one fault file: what is not a workload first (the
// namespace, webhooks, policies), then, a few seconds later, the
// workloads, so that what selects the pods exists before them, and
// deletes it all at the end (cluster-scoped objects too).
func plantFix(ctx context.Context, t *testing.T, c *testcluster.Cluster, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var first, then [][]byte
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if len(obj.Object) == 0 {
			continue
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		switch obj.GetKind() {
		case "Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod":
			then = append(then, data)
		default:
			first = append(first, data)
			if obj.GetNamespace() == "" && obj.GetKind() != "Namespace" {
				kind, name := strings.ToLower(obj.GetKind()), obj.GetName()
				t.Cleanup(func() {
					// Not waited for: a volume bound to a claim of the
					// namespace goes only once the namespace does.
					_ = exec.Command(c.KubectlPath, "--kubeconfig", c.Kubeconfig, "delete", kind, name, "--ignore-not-found", "--wait=false").Run()
				})
			}
			if obj.GetKind() == "Namespace" {
				ns := obj.GetName()
				t.Cleanup(func() {
					_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
				})
			}
		}
	}
	for _, d := range first {
		if err := c.ApplyManifest(ctx, "", d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	time.Sleep(2 * time.Second) // the workloads' pods are younger than what selects them
	for _, d := range then {
		if err := c.ApplyManifest(ctx, "", d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
}

// injectionAgrees: why-injected -n ns exits 4 exactly when diagnose -n ns
// finds an injection check failed ("" when they agree). A workload short
// of its pods for a reason not the mesh's (KM-INJ-013: a missing
// ServiceAccount, a third-party webhook) is diagnose's row only:
// why-injected lists pods and the templates the mesh's admission refuses,
// so such a row is not compared (a gap of its own).
func injectionAgrees(bin string, c *testcluster.Cluster, ns string) string {
	d, r, err := catDiagnose(bin, c.Kubeconfig, ns)
	if err != nil {
		return fmt.Sprintf("diagnose -n %s: %v\n%s", ns, err, r.stderr)
	}
	// A workload short of its pods (KM-INJ-013) is why-injected's too when
	// admission denied them (a webhook or policy): it may, not must, fail
	// there (a missing ServiceAccount is not an admission denial).
	var failed, short []string
	for _, x := range d.all() {
		for _, ch := range x.Checks {
			switch {
			case ch.Name != "injection" || ch.Status != "fail":
			case ch.Code == "KM-INJ-013":
				short = append(short, x.Name)
			default:
				failed = append(failed, x.Name)
			}
		}
	}
	w, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "why-injected", "-n", ns)
	if err != nil {
		return fmt.Sprintf("why-injected -n %s: %v", ns, err)
	}
	if len(failed) > 0 && w.code != 4 || w.code == 4 && len(failed)+len(short) == 0 {
		return fmt.Sprintf("why-injected -n %s exits %d, while diagnose's injection check fails on %v (short of pods: %v): %s", ns, w.code, failed, short, w.stderr)
	}
	return ""
}

// fixCaseOf is the case of a fault's number.
func fixCaseOf(nn string) *fixCase {
	for i := range fixCases {
		if fixCases[i].nn == nn {
			return &fixCases[i]
		}
	}
	return nil
}

// laneMinor is the minor of a Kubernetes version ("v1.33.13" → 33), 0
// when it cannot be read.
func laneMinor(v string) int {
	_, rest, _ := strings.Cut(strings.TrimPrefix(v, "v"), ".")
	minor, _, _ := strings.Cut(rest, ".")
	n, err := strconv.Atoi(minor)
	if err != nil {
		return 0
	}
	return n
}
