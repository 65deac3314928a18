// Command listfloor reads every pod of the cluster and discards them: the
// floor a sweep cannot beat. -proto asks for protobuf (what kubectl-mesh
// reads) instead of JSON; -limit reads page by page as kubectl-mesh does (0:
// one response, as `kubectl get --raw /api/v1/pods`). Each response is
// decoded into a PodList, as any client must to use it (and to find the next
// page), and dropped. It prints the pod count on stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig")
	proto := flag.Bool("proto", false, "ask for protobuf")
	limit := flag.Int64("limit", 0, "pods per page (0: one response)")
	watchList := flag.Bool("watch", false, "stream the pods as a watch's initial events (WatchList) instead")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: transport}
	accept := "application/json"
	if *proto {
		accept = "application/vnd.kubernetes.protobuf"
	}
	if *watchList {
		n, err := streamPods(cfg, *proto)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "%d pods\n", n)
		return
	}
	codecs := scheme.Codecs.UniversalDeserializer()
	ctx := context.Background()
	pods, cont := 0, ""
	for {
		q := url.Values{}
		if *limit > 0 {
			q.Set("limit", strconv.FormatInt(*limit, 10))
		}
		if cont != "" {
			q.Set("continue", cont)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/pods?"+q.Encode(), nil)
		if err != nil {
			log.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			log.Fatalf("listing pods: %s %v", resp.Status, err)
		}
		var list corev1.PodList
		if _, _, err := codecs.Decode(body, nil, &list); err != nil {
			log.Fatal(err)
		}
		pods += len(list.Items)
		if cont = list.Continue; cont == "" || *limit == 0 {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "%d pods\n", pods)
}

// streamPods reads the pods as the initial events of one watch.
func streamPods(cfg *rest.Config, proto bool) (int, error) {
	cfg = rest.CopyConfig(cfg)
	if proto {
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	yes := true
	w, err := c.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	n := 0
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added:
			n++
		case watch.Bookmark:
			if p, ok := ev.Object.(*corev1.Pod); ok && p.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
				return n, nil
			}
		case watch.Error:
			return n, fmt.Errorf("watch error: %v", ev.Object)
		}
	}
	return n, fmt.Errorf("the watch ended before its initial events did")
}
