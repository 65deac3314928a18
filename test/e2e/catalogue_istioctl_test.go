package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// istioctl compares istioctl analyze's messages on every namespace with
// diagnose's findings.
func (k *catTally) istioctl(t *testing.T, b *catBed, docs catDocs, faults []*catFault, inContract map[string]catContractCode) {
	c, ctx := b.c, context.Background()
	faultOf := map[string]*catFault{} // ns/pod (ns/workload:name) → its fault
	for _, f := range faults {
		if f.err == nil {
			faultOf[f.key()] = f
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	analyses := map[string][]catMessage{}
	for _, ns := range b.namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs, err := catAnalyze(c, ns)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%v", err)
			}
			analyses[ns] = msgs
		}()
	}
	wg.Wait()
	onPod := map[string][]catMessage{} // ns/pod (or ns/workload:name) → istioctl's messages about it
	onNS := map[string][]catMessage{}  // ns → istioctl's messages about the namespace itself
	cluster := map[string]bool{}       // istioctl's messages about cluster-scoped objects (every run repeats them)
	for _, ns := range b.namespaces {
		for _, m := range analyses[ns] {
			kind, name, inNS := catOrigin(m.Origin, ns)
			switch {
			case kind == "Namespace" && name == ns:
				onNS[ns] = append(onNS[ns], m)
				t.Logf("istioctl on namespace %s: %s", ns, catMessages([]catMessage{m}))
				// A message about the namespace that names its pods (IST0158
				// lists the pods whose proxy image is not the injector's) is
				// about those pods.
				if names := catPodNames.FindStringSubmatch(m.Message); names != nil {
					for _, p := range strings.Fields(names[1]) {
						onPod[ns+"/"+p] = append(onPod[ns+"/"+p], m)
					}
				}
				continue
			case !inNS:
				key := fmt.Sprintf("%s %s on %s: %s", m.Code, m.Level, m.Origin, catShort(m.Message))
				if !cluster[key] {
					cluster[key] = true
					t.Logf("istioctl, not about a pod: %s", key)
				}
				continue
			}
			var targets []string
			switch kind {
			case "Pod":
				targets = []string{name}
			case "Deployment":
				d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil && d.Spec.Selector != nil {
					targets = catSelected(ctx, t, c, ns, d.Spec.Selector.MatchLabels)
				}
				if len(targets) == 0 {
					targets = []string{"workload:" + name}
				}
			case "Service":
				s, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
				if err == nil {
					targets = catSelected(ctx, t, c, ns, s.Spec.Selector)
				}
			default:
				t.Logf("istioctl %s %s on %s (%s): not about a pod", m.Code, m.Level, m.Origin, catShort(m.Message))
				continue
			}
			for _, p := range targets {
				onPod[ns+"/"+p] = append(onPod[ns+"/"+p], m)
			}
		}
	}
	var keys []string
	for key := range onPod {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ns, p, _ := strings.Cut(key, "/")
		workload := strings.HasPrefix(p, "workload:")
		p = strings.TrimPrefix(p, "workload:")
		planted := "not planted"
		if f := faultOf[key]; f != nil {
			planted = "planted " + f.code
		}
		t.Logf("istioctl on %s/%s (%s): %s", ns, p, planted, catMessages(onPod[key]))
		for _, m := range onPod[key] {
			k.istioMsgs++
			it, ok := docs.itemFor(ns, p, workload)
			if k.check(t, ok && len(it.Findings) > 0, "istioctl %s (%s) on %s/%s: diagnose has no finding there (item found %v): %s", m.Code, catShort(m.Message), ns, p, ok, it.says()) {
				k.matched++
			}
		}
	}
	// What diagnose finds that istioctl has no message for, pod by pod;
	// and whether istioctl reports the code the contract pairs with each
	// planted fault.
	for _, ns := range b.namespaces {
		for _, it := range docs[ns].all() {
			key := ns + "/" + it.Name
			workload := it.WorkloadKind != "Pod"
			if workload {
				for _, f := range faults {
					if f.workload && f.ns == ns && (it.Name == f.name || strings.HasPrefix(it.Name, f.name+"-")) {
						key = ns + "/workload:" + f.name
					}
				}
			}
			reported := map[string]bool{}
			for _, m := range append(onPod[key], onNS[ns]...) {
				reported[m.Code] = true
			}
			var only []string
			for _, fd := range it.Findings {
				if !catAnyOf(inContract[fd.Code].istioctl, reported) {
					only = append(only, fd.Code+"("+fd.Status+")")
				}
			}
			if len(only) > 0 {
				t.Logf("diagnose only, on %s %s/%s: %s", it.WorkloadKind, ns, it.Name, strings.Join(only, " "))
			}
		}
	}
	for _, f := range faults {
		want := inContract[f.code].istioctl
		if len(want) == 0 || f.err != nil {
			continue
		}
		key := f.key()
		reported := map[string]bool{}
		for _, m := range append(onPod[key], onNS[f.ns]...) {
			reported[m.Code] = true
		}
		t.Logf("contract pairs %s with istioctl %s: reported on %s (or its namespace): %v", f.code, strings.Join(want, "/"), key, catAnyOf(want, reported))
	}
}
