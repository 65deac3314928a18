package cmd

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// What a why-injected sweep keeps of each report prints, as JSON and YAML,
// byte for byte the list of the reports themselves sorted (SortReports) with
// their summary (Summarize); its table has a row per report in that order
// and reads the same whatever order the reports came in. The reports: pods
// through the memo (mismatched or not, names that JSON escapes), pods whose
// expectation is unknown (what they need), and workloads the webhook blocks,
// which a sweep reports after the pods (out of order). They arrive in the
// apiserver's order, shuffled, and in the apiserver's order until halfway.
func TestInjectionSweepPrintsAsReports(t *testing.T) {
	facts := memoFacts()
	dark := *facts
	dark.Unknown = map[string]string{injection.FactWebhooks: "forbidden: the user may not list mutatingwebhookconfigurations"}
	reports := func() []*injection.InjectionReport {
		rs, _ := memoReports(facts)
		for i, name := range []string{"b", "a", "c"} {
			p := &corev1.Pod{}
			p.Namespace, p.Name = "dark", "pod-"+name
			p.Spec.Containers = []corev1.Container{{Name: "app"}}
			rs = append(rs, injection.Istio{}.Explain(&dark, &injection.Workload{Kind: "Pod", Namespace: "dark", Name: p.Name, Pod: p,
				Spec: p.Spec, NamespaceSource: injection.NamespaceFromCluster}))
			if i == 0 && rs[len(rs)-1].Expected != nil {
				t.Fatal("a pod whose webhooks are unknown is expected known")
			}
		}
		// The apiserver's order: by namespace, then name.
		sort.SliceStable(rs, func(i, j int) bool { return render.KeyBefore(rs[i].Namespace, rs[i].Name, rs[j].Namespace, rs[j].Name) })
		for _, name := range []string{"api", "web-<1>"} {
			ev := corev1.Event{Reason: "FailedCreate", Message: `Internal error occurred: failed calling webhook "namespace.sidecar-injector.istio.io": connection refused`}
			rs = append(rs, injection.Istio{}.Explain(facts, &injection.Workload{Kind: "Deployment", Namespace: "shop", Name: name,
				NamespaceSource: injection.NamespaceFromCluster, Events: []corev1.Event{ev}}))
		}
		return rs
	}
	incomplete := []string{"webhooks: forbidden"}
	orders := map[string]func([]*injection.InjectionReport){
		"apiserver": func([]*injection.InjectionReport) {},
		"shuffled": func(rs []*injection.InjectionReport) {
			rand.New(rand.NewSource(7)).Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
		},
		"apiserver until halfway": func(rs []*injection.InjectionReport) {
			half := rs[len(rs)/2:]
			rand.New(rand.NewSource(8)).Shuffle(len(half), func(i, j int) { half[i], half[j] = half[j], half[i] })
		},
	}
	checked, tables := 0, map[string]string{}
	for name, order := range orders {
		for _, format := range []string{render.JSON, render.YAML, ""} {
			want := reports()
			injection.SortReports(want)
			var wantOut bytes.Buffer
			if format != "" {
				if err := render.List(&wantOut, format, "InjectionReportList", len(want), func(i int) any { return want[i] },
					render.Field{Key: "summary", Value: injection.Summarize(facts, want)}, render.Field{Key: "incomplete", Value: incomplete}); err != nil {
					t.Fatal(err)
				}
			}
			var got, errOut bytes.Buffer
			o := &WhyInjectedOptions{Output: format, IOStreams: genericiooptions.IOStreams{Out: &got, ErrOut: &errOut}}
			s := newInjectionSweep(o, &render.Printer{Out: &got}, facts, false)
			rs := reports()
			order(rs)
			for _, r := range rs {
				if format == "" {
					r.Factors = nil
				}
				if err := s.add(r, injectionSlice(r, nil)); err != nil {
					t.Fatal(err)
				}
			}
			late := s.list.Late()
			if err := s.print(incomplete); err != nil {
				t.Fatal(err)
			}
			if late == 0 || name == "apiserver" && late > 2 {
				t.Errorf("%s, -o %q: %d of %d reports kept out of order (in the apiserver order: some of the 2 workloads after the pods)", name, format, late, len(rs))
			}
			checked++
			if format != "" {
				if !bytes.Equal(got.Bytes(), wantOut.Bytes()) {
					t.Errorf("%s, -o %q: the sweep prints\n%s\nthe reports print\n%s", name, format, got.String(), wantOut.String())
				}
				continue
			}
			tables[name] = got.String()
			lines := strings.Split(got.String(), "\n")
			for i, r := range want {
				f := strings.Fields(lines[i+1])
				pod := r.Name
				if r.Kind != "Pod" {
					pod = "deployment/" + r.Name
				}
				if len(f) < 2 || f[0] != r.Namespace || f[1] != pod {
					t.Fatalf("%s: row %d is %q, want %s %s", name, i+1, lines[i+1], r.Namespace, pod)
				}
			}
			for _, s := range []string{"To fix the mismatches:", "kubectl rollout restart deployment/web-<1> -n shop", "Unknown:", "list mutatingwebhookconfigurations"} {
				if !strings.Contains(got.String(), s) {
					t.Errorf("%s: the table lacks %q:\n%s", name, s, got.String())
				}
			}
		}
	}
	for name, table := range tables {
		if table != tables["apiserver"] {
			t.Errorf("the table of reports in %s order differs from the apiserver order's:\n%s\n---\n%s", name, table, tables["apiserver"])
		}
	}
	t.Logf("%d arrival orders × formats, %d reports each, printed as the reports", checked, len(reports()))
}

// BenchmarkInjectionSweep: what keeping and printing a sweep's reports
// costs per pod (the pods' reading and explaining aside), for 10,000 pods
// of 500 namespaces that share their answers as a cluster's do.
func BenchmarkInjectionSweep(b *testing.B) {
	facts := memoFacts()
	for _, format := range []string{render.JSON, render.YAML, ""} {
		b.Run("o="+format, func(b *testing.B) {
			memo := injection.NewMemo(injection.Istio{}, facts, true)
			var rs []*injection.InjectionReport
			for n := 0; n < 500; n++ {
				ns := fmt.Sprintf("shop-%03d", n)
				facts.Namespaces[ns] = facts.Namespaces[[]string{"shop", "plain"}[n%2]]
				for i := 0; i < 20; i++ {
					p := &corev1.Pod{}
					p.Namespace, p.Name = ns, fmt.Sprintf("web-%02d", i)
					p.Labels = map[string]string{"app": "web"}
					p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1"}}
					r := memo.Explain(&injection.Workload{Kind: "Pod", Namespace: ns, Name: p.Name, Labels: p.Labels, Spec: p.Spec, Pod: p,
						NamespaceSource: injection.NamespaceFromCluster, Owner: &injection.Owner{Kind: "ReplicaSet", Name: "web-5d8f"}})
					if format == "" {
						r.Factors = nil
					}
					rs = append(rs, r)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				o := &WhyInjectedOptions{Output: format, IOStreams: genericiooptions.IOStreams{Out: io.Discard, ErrOut: io.Discard}}
				s := newInjectionSweep(o, &render.Printer{Out: io.Discard}, facts, false)
				for _, r := range rs {
					if err := s.add(r, injectionSlice(r, nil)); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.print(nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(rs)), "µs/pod")
		})
	}
}
