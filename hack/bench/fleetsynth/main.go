// Command fleetsynth measures the node side of the fleet audit at a scale
// one machine cannot run as pods: it reads the rules of the network
// namespaces hack/bench/fleet-audit.sh made on the node (a process in each,
// in a cgroup named by a made-up container ID), through the real node pod
// of nsexec.DumpNode, as if each were a pod's. It prints one JSON line: how
// many were read, how long it took, how many were unreadable and how many
// held the rules loaded into them.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig")
	node := flag.String("node", "", "the node the namespaces are on")
	ids := flag.String("ids", "", "file of container IDs, one a line")
	image := flag.String("image", "", "image of the node pod (with iptables)")
	ns := flag.String("namespace", "default", "namespace of the node pod")
	parallel := flag.Int("parallel", 0, "pods read at once (0: the node's CPUs)")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fail(err)
	}
	f, err := os.Open(*ids)
	if err != nil {
		fail(err)
	}
	var pods []*corev1.Pod
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id := strings.TrimSpace(sc.Text())
		if id == "" {
			continue
		}
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "synthetic", Name: fmt.Sprintf("netns-%d", len(pods))},
			Spec: corev1.PodSpec{NodeName: *node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + id,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}})
	}
	r := &nsexec.Runner{Client: client}
	start := time.Now()
	dumps, _, err := r.DumpNode(context.Background(), nsexec.NodeRequest{Node: *node, Namespace: *ns, Image: *image, Pods: pods, Parallel: *parallel, Timeout: 10 * time.Minute})
	took := time.Since(start)
	if err != nil {
		fail(err)
	}
	unreadable, withRules := 0, 0
	reasons := map[string]int{}
	for _, d := range dumps {
		if d.Err != "" {
			unreadable++
			reasons[d.Err]++
			continue
		}
		for _, s := range d.Sections {
			if s.Name == "iptables-nft-save" {
				if rs, err := capture.ParseSave([]byte(s.Text)); err == nil && rs.RuleCount() > 0 {
					withRules++
				}
			}
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"namespaces": len(pods), "seconds": took.Seconds(), "msPerNamespace": took.Seconds() * 1000 / float64(len(pods)),
		"unreadable": unreadable, "withRules": withRules, "reasons": reasons})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "fleetsynth:", err)
	os.Exit(1)
}
