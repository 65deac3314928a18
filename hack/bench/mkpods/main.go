// Command mkpods fills the local test cluster with many namespaces and pods
// for benchmarks, and removes them again (-delete). Pods name a scheduler
// that does not exist, so they are stored but never run. Namespaces are
// labelled only after their pods exist, so that creating them does not call
// the injection webhooks; half the pods are created already shaped as Istio
// leaves an injected pod. The mix is what a real cluster sweep meets:
// injected, not injected, and pods that differ from what they would get now.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "/var/tmp/kubectl-mesh-cluster/admin.kubeconfig", "kubeconfig")
	namespaces := flag.Int("namespaces", 500, "namespaces to create")
	pods := flag.Int("pods", 20, "pods per namespace")
	prefix := flag.String("prefix", "bench-", "namespace name prefix")
	del := flag.Bool("delete", false, "delete the namespaces with the prefix instead")
	workers := flag.Int("workers", 32, "concurrent requests")
	owners := flag.Bool("owners", true, "give each app's pods a ReplicaSet that owns them (as a Deployment's pods have)")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 2000, 2000
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	start := time.Now()
	jobs := make(chan func() error, 1024)
	var wg sync.WaitGroup
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := j(); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	if *del {
		list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			log.Fatal(err)
		}
		n := 0
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, *prefix) {
				name := ns.Name
				n++
				// The pods first, in one request per namespace: the
				// namespace controller would delete them one by one.
				jobs <- func() error {
					if err := c.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
						return err
					}
					err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
					if apierrors.IsNotFound(err) {
						return nil
					}
					return err
				}
			}
		}
		close(jobs)
		wg.Wait()
		log.Printf("deleting %d namespaces (%s)", n, time.Since(start).Round(time.Millisecond))
		return
	}
	// Namespaces of an earlier run may still be going away.
	for waited := time.Duration(0); ; waited += time.Second {
		list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			log.Fatal(err)
		}
		left := 0
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, *prefix) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if waited == 0 {
			log.Printf("waiting for %d namespaces named %s* to go away", left, *prefix)
		}
		if waited > 10*time.Minute {
			log.Fatalf("%d namespaces named %s* are still there", left, *prefix)
		}
		time.Sleep(time.Second)
	}
	for i := 0; i < *namespaces; i++ {
		ns := fmt.Sprintf("%s%03d", *prefix, i)
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			log.Fatal(err)
		}
		rsUID := map[string]types.UID{}
		if *owners {
			// One ReplicaSet per app, asking for exactly the pods created for
			// it: the controller has nothing to add or remove.
			for a := 0; a < 5 && a < *pods; a++ {
				app := fmt.Sprintf("app-%d", a)
				n := int32((*pods - a + 4) / 5)
				tmpl := benchPod(ns, app+"-7d4b9c8f6-tmpl", false)
				rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: app + "-7d4b9c8f6", Namespace: ns},
					Spec: appsv1.ReplicaSetSpec{Replicas: &n, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations}, Spec: tmpl.Spec}}}
				created, err := c.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
				if err != nil {
					log.Fatal(err)
				}
				rsUID[app] = created.UID
			}
		}
		for j := 0; j < *pods; j++ {
			p := benchPod(ns, fmt.Sprintf("app-%d-7d4b9c8f6-x%04d", j%5, j), j%2 == 0)
			if uid, ok := rsUID[p.Labels["app"]]; ok {
				yes := true
				p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: p.Labels["app"] + "-7d4b9c8f6", UID: uid, Controller: &yes}}
			}
			jobs <- func() error {
				// A new namespace's "default" ServiceAccount comes a moment
				// after it: admission refuses pods until then.
				for {
					_, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
					if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "serviceaccount") {
						return err
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	// Label three namespaces in four for injection (enabled, or revision canary).
	for i := 0; i < *namespaces; i++ {
		var label string
		switch i % 4 {
		case 0, 1:
			label = `{"metadata":{"labels":{"istio-injection":"enabled"}}}`
		case 2:
			label = `{"metadata":{"labels":{"istio.io/rev":"canary"}}}`
		default:
			continue
		}
		if _, err := c.CoreV1().Namespaces().Patch(ctx, fmt.Sprintf("%s%03d", *prefix, i), types.MergePatchType, []byte(label), metav1.PatchOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("created %d namespaces with %d pods each (%s)", *namespaces, *pods, time.Since(start).Round(time.Millisecond))
}

// benchPod is a pod the size of a real one; injected ones carry what the
// injector adds.
func benchPod(ns, name string, injected bool) *corev1.Pod {
	app := strings.SplitN(name, "-", 3)[0] + "-" + strings.SplitN(name, "-", 3)[1]
	env := []corev1.EnvVar{}
	for k := 0; k < 8; k++ {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", k), Value: "some-configuration-value"})
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels:      map[string]string{"app": app, "version": "v1", "pod-template-hash": "7d4b9c8f6"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-01T00:00:00Z"}},
		Spec: corev1.PodSpec{
			SchedulerName: "kmesh-unscheduled",
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/" + app + ":1.4.2", Env: env,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
		},
	}
	if injected {
		st, _ := json.Marshal(map[string]any{"initContainers": []string{"istio-init", "istio-proxy"}, "containers": nil,
			"volumes": []string{"istio-envoy", "istio-data", "istio-podinfo"}, "imagePullSecrets": nil, "revision": "default"})
		p.Annotations["sidecar.istio.io/status"] = string(st)
		p.Annotations["istio.io/rev"] = "default"
		p.Labels["security.istio.io/tlsMode"] = "istio"
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = []corev1.Container{
			{Name: "istio-init", Image: "kmesh.local/istio/proxyv2:1.28.1", Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*", "-d", "15090,15021,15020"}},
			{Name: "istio-proxy", Image: "kmesh.local/istio/proxyv2:1.28.1", RestartPolicy: &always, Args: []string{"proxy", "sidecar"}, Env: env},
		}
	}
	return p
}
