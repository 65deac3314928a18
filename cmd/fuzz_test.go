package cmd

// Fuzz targets: every parser from its input to the human output a person
// reads. Each run asserts no panic (the fuzzer's own check) and no raw
// control character in what would reach the terminal. `go test` runs their
// seeds; `make fuzz` runs each for $FUZZTIME (60 s by default).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/engine/inject"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// runIn runs the command in-process with stdin.
func runIn(stdin []byte, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: bytes.NewReader(stdin), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	return exitCode(root.Execute(), &errOut), out.String(), errOut.String()
}

// seedFiles adds every file under dir (its subdirectories' too) as a seed.
func seedFiles(f *testing.F, dir string) {
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
}

// FuzzIptablesDump: any dump given to --from-file (iptables-save, iptables
// -S, iptables -L -v or an nft listing), annotated, compared, traced and
// printed.
func FuzzIptablesDump(f *testing.F) {
	seedFiles(f, filepath.Join("..", "explain", "capture", "testdata"))
	f.Add([]byte("*nat\n:OUTPUT ACCEPT [0:0]\n:X\x1b[2J - [0:0]\n-A OUTPUT -j X\x1b[2J\n-A X\x1b[2J -m comment --comment \"\x1b]0;t\x07\" -j REDIRECT --to-ports 15001\nCOMMIT\n"))
	f.Add([]byte("table inet istio-proxy-nat {\n\tchain out\x07put {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tcounter packets 1 bytes 2 jump x\x1b[5m\n\t}\n}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		code, out, errOut := runIn(data, "iptables", "--from-file", "-", "--pod-ip", "10.1.2.3", "--expect-args", defaultIstioArgs,
			"--trace", "out:10.96.0.10:443", "--trace", "in:8080", "--trace", "out:10.96.0.10:53/udp,uid=1337")
		if code != ExitOK && code != ExitUsage && code != ExitError {
			t.Errorf("exit %d", code)
		}
		rawControl(t, "stdout", out)
		rawControl(t, "stderr", errOut)
	})
}

// FuzzExpectArgs: any istio-iptables argument string a pod could carry.
func FuzzExpectArgs(f *testing.F) {
	for _, s := range []string{defaultIstioArgs, defaultIstioArgs + " --redirect-dns --capture-all-dns -m TPROXY", `-p 15001 -z "15006 -u 1337`,
		"-p 15001 -z 15006 -u 1337 -m REDIRECT -i 10.0.0.0/33 -x \"\x1b[2J\"", "--native-nftables -p 15001 -z 15006 -u 1337 -q 53 -o 1,2,3"} {
		f.Add(s)
	}
	dump := filepath.Join("..", "explain", "capture", "testdata", "istio-default.nft.save")
	f.Fuzz(func(t *testing.T, args string) {
		code, out, errOut := runIn(nil, "iptables", "--from-file", dump, "--pod-ip", "10.1.2.3", "--pod-ip", "fd00::3",
			"--nameserver", "10.96.0.10", "--expect-args", args, "--trace", "out:10.96.0.10:53/udp")
		if code != ExitOK && code != ExitUsage && code != ExitError {
			t.Errorf("exit %d", code)
		}
		rawControl(t, "stdout", out)
		rawControl(t, "stderr", errOut)
	})
}

// fuzzFacts is an Istio mesh as why-injected reads it: the default
// revision's namespace and object webhooks and its injector ConfigMap.
func fuzzFacts() *injection.ClusterFacts {
	fail := admissionregistrationv1.Fail
	req := func(key string, op metav1.LabelSelectorOperator, v ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: v}
	}
	hook := func(name string, ns, obj []metav1.LabelSelectorRequirement) admissionregistrationv1.MutatingWebhook {
		url := "https://127.0.0.1:15017/inject"
		return admissionregistrationv1.MutatingWebhook{Name: name, ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			FailurePolicy: &fail, NamespaceSelector: &metav1.LabelSelector{MatchExpressions: ns}, ObjectSelector: &metav1.LabelSelector{MatchExpressions: obj}}
	}
	f := &injection.ClusterFacts{
		Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Labels: map[string]string{"istio.io/rev": "default"}},
			Webhooks: []admissionregistrationv1.MutatingWebhook{
				hook("namespace.sidecar-injector.istio.io", []metav1.LabelSelectorRequirement{req("istio-injection", metav1.LabelSelectorOpIn, "enabled")},
					[]metav1.LabelSelectorRequirement{req("sidecar.istio.io/inject", metav1.LabelSelectorOpNotIn, "false")}),
				hook("object.sidecar-injector.istio.io", []metav1.LabelSelectorRequirement{req("istio-injection", metav1.LabelSelectorOpDoesNotExist), req("istio.io/rev", metav1.LabelSelectorOpDoesNotExist)},
					[]metav1.LabelSelectorRequirement{req("sidecar.istio.io/inject", metav1.LabelSelectorOpIn, "true"), req("istio.io/rev", metav1.LabelSelectorOpDoesNotExist)}),
			}}},
		Namespaces: map[string]*corev1.Namespace{
			"shop":    {ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"istio-injection": "enabled"}}},
			"default": {ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		},
		ConfigMaps: map[string]*corev1.ConfigMap{"istio-system/istio-sidecar-injector": {ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-sidecar-injector"},
			Data: map[string]string{"config": "policy: enabled\ntemplates:\n  sidecar: x\n", "values": `{"global":{"tag":"1.28.1"}}`}}},
		KubeletVersions: map[string]string{"node-1": "v1.34.4"},
		Unknown:         map[string]string{},
	}
	return f
}

// FuzzManifest: any file given to why-injected -f, explained against a mesh
// and printed for a person and as JSON.
func FuzzManifest(f *testing.F) {
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web}\n      annotations: {traffic.sidecar.istio.io/includeOutboundIPRanges: \"10.0.0.0/33\", inject.istio.io/templates: \"x\\e[2J\"}\n    spec:\n      containers: [{name: app, image: app}]\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: new, labels: {istio-injection: enabled}}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p, namespace: new, annotations: {sidecar.istio.io/inject: \"\\x1b]0;t\\x07\"}}\n  spec: {hostNetwork: true, containers: [{name: a}]}\n"))
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}},"spec":{"containers":[{"name":"a"}]}}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, output := range []string{"", render.JSON} {
			var out, errOut bytes.Buffer
			o := &WhyInjectedOptions{Filenames: []string{"-"}, Output: output, namespace: "default",
				IOStreams: genericiooptions.IOStreams{In: bytes.NewReader(data), Out: &out, ErrOut: &errOut}}
			eng := &inject.Engine{Filenames: o.Filenames, Namespace: "default", Mesh: injection.Istio{}, In: o.In}
			facts := fuzzFacts()
			reports, err := eng.FromFiles(context.Background(), facts)
			if err != nil {
				rawControl(t, "error", render.EscapeLines(err.Error()))
				return
			}
			if err := o.print(reports, len(reports) != 1, nil); err != nil {
				t.Fatal(err)
			}
			if output == render.JSON && !json.Valid(out.Bytes()) {
				t.Errorf("-o json is not JSON: %.200s", out.String())
			}
			rawControl(t, "why-injected -f "+output, out.String())
		}
	})
}

// FuzzPod: any pod object (JSON, as the apiserver could return it, with an
// event about it) through why-injected's and startup's analyses and renderers.
func FuzzPod(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"web","namespace":"shop","annotations":{"sidecar.istio.io/status":"{\"revision\":\"default\"}"}},"spec":{"nodeName":"node-1","initContainers":[{"name":"istio-init"},{"name":"istio-proxy","restartPolicy":"Always"}],"containers":[{"name":"app"}]},"status":{"phase":"Running","initContainerStatuses":[{"name":"istio-init","state":{"terminated":{"exitCode":1,"reason":"Error\u001b[2J","message":"iptables-restore: invalid port/service"}}}]}}`),
		"Unhealthy\x1b]0;x\x07", "spec.containers{istio-proxy}\x1b[2J", "Startup probe failed\r\x1b[5m")
	f.Add([]byte(`{"metadata":{"name":"p","namespace":"default","labels":{"sidecar.istio.io/inject":"true"}},"spec":{"containers":[{"name":"istio-proxy","image":"\u009b31m"}]},"status":{"phase":"Pending\u0007"}}`),
		"BackOff", "spec.initContainers{istio-init}", "Back-off restarting failed container")
	f.Fuzz(func(t *testing.T, podJSON []byte, reason, fieldPath, message string) {
		var p corev1.Pod
		if err := json.Unmarshal(podJSON, &p); err != nil {
			return
		}
		facts := fuzzFacts()
		ir := injection.Istio{}.Explain(facts, inspect.PodWorkload(&p, facts))
		ev := corev1.Event{Reason: reason, Message: message, Count: 2, InvolvedObject: corev1.ObjectReference{FieldPath: fieldPath}, LastTimestamp: p.CreationTimestamp}
		sr := startup.AnalyzeStartup(startup.StartupFacts{Pod: &p, Events: []corev1.Event{ev}, Now: origin,
			Logs: map[string]startup.LogTail{"istio-init": {Current: []string{message}}}})
		render.Sanitize(ir)
		render.Sanitize(sr)
		var out bytes.Buffer
		pr := &render.Printer{Out: &out, Color: true}
		render.FactorTable(pr, ir, true)
		if err := printPodRows(pr, []*injection.InjectionReport{ir}, facts); err != nil {
			t.Fatal(err)
		}
		render.Startup(pr, sr)
		render.StartupRows(pr, []*startup.StartupReport{sr}, nil)
		rawControl(t, "pod", out.String())
		if strings.Contains(out.String(), "\x1b[2J") {
			t.Error("a screen clear reached the output")
		}
	})
}
