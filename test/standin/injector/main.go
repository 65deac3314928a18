// Command mesh-injector is the stand-in for istiod's sidecar injector that
// kubectl-mesh's local test cluster runs on loopback. The apiserver calls it
// through MutatingWebhookConfigurations shaped as Istio's (clientConfig.url
// https://127.0.0.1:15017/inject/<revision>), so the real apiserver decides
// which webhook fires, exactly as in a real mesh. It then decides and injects
// as istiod does, reading the revision's istio-sidecar-injector ConfigMap:
// hostNetwork, ignored namespaces, sidecar.istio.io/inject (label over
// annotation, parsed as the revision's Istio version parses it), never/always
// inject selectors and the policy; istio-init (or istio-validation in CNI
// mode) and istio-proxy, classic or native sidecar, holdApplicationUntilProxyStarts.
// It is a test fixture, not Istio.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

type server struct {
	client         kubernetes.Interface
	istioNamespace string
}

func main() {
	listen := flag.String("listen", "127.0.0.1:15017", "address to serve the webhook on")
	cert := flag.String("tls-cert", "", "serving certificate")
	key := flag.String("tls-key", "", "serving key")
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig to read the injector ConfigMaps and nodes with")
	istioNS := flag.String("istio-namespace", "istio-system", "namespace of the injector ConfigMaps")
	flag.Parse()
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig: %v", err)
	}
	s := &server{client: kubernetes.NewForConfigOrDie(cfg), istioNamespace: *istioNS}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/inject", s.serveInject)
	mux.HandleFunc("/inject/", s.serveInject)
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("stand-in injector listening on https://%s/inject[/<revision>]", *listen)
	log.Fatal(srv.ListenAndServeTLS(*cert, *key))
}

func (s *server) serveInject(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
	if err != nil || req.Method != http.MethodPost {
		http.Error(w, "expected a POSTed AdmissionReview", http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "malformed AdmissionReview", http.StatusBadRequest)
		return
	}
	revision := strings.Trim(strings.TrimPrefix(req.URL.Path, "/inject"), "/")
	if revision == "" {
		revision = "default"
	}
	review.Response = s.admit(req.Context(), revision, review.Request)
	review.Response.UID = review.Request.UID
	out, _ := json.Marshal(review)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

func (s *server) admit(ctx context.Context, revision string, ar *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	var pod corev1.Pod
	if err := json.Unmarshal(ar.Object.Raw, &pod); err != nil {
		return deny(fmt.Sprintf("could not decode pod: %v", err))
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "<generated>"
	}
	cmName := "istio-sidecar-injector"
	if revision != "default" {
		cmName += "-" + revision
	}
	cm, err := s.client.CoreV1().ConfigMaps(s.istioNamespace).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		log.Printf("%s/%s: revision %s: %v", ar.Namespace, name, revision, err)
		return deny(fmt.Sprintf("injector of revision %q has no configuration: %v", revision, err))
	}
	rev, err := parseRevision(revision, cm.Data)
	if err != nil {
		return deny(fmt.Sprintf("injector ConfigMap %s/%s: %v", s.istioNamespace, cmName, err))
	}
	ok, why := injectRequired(rev, ar.Namespace, &pod)
	if !ok {
		log.Printf("%s/%s: revision %s: skipping due to policy check: %s", ar.Namespace, name, revision, why)
		return allow
	}
	log.Printf("%s/%s: revision %s: injecting: %s", ar.Namespace, name, revision, why)
	injectPod(&pod, rev, s.nativeSidecar(ctx, rev, &pod))
	patch, err := topLevelPatch(&pod)
	if err != nil {
		return deny(err.Error())
	}
	pt := admissionv1.PatchTypeJSONPatch
	allow.Patch = patch
	allow.PatchType = &pt
	return allow
}

func deny(msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Status: "Failure", Message: msg, Code: http.StatusInternalServerError}}
}

// nativeSidecar decides between a classic and a native (restartPolicy:
// Always init container) sidecar: the pod annotation, else the revision's
// ENABLE_NATIVE_SIDECARS (default auto from Istio 1.27, off before), where
// auto means every node's kubelet is at least 1.33.
func (s *server) nativeSidecar(ctx context.Context, r *meshRevision, pod *corev1.Pod) bool {
	if v, ok := pod.Annotations["sidecar.istio.io/nativeSidecar"]; ok {
		return v == "true"
	}
	mode := r.values.Pilot.Env["ENABLE_NATIVE_SIDECARS"]
	if mode == "" {
		mode = "false"
		if m := r.minor(); m == 0 || m >= 27 { // an unreadable version: the newest behaviour
			mode = "auto"
		}
	}
	if mode != "auto" {
		return mode == "true"
	}
	nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		return false
	}
	// A pod bound to a node that exists is decided by that node alone, else
	// every node decides.
	check := nodes.Items
	for i := range nodes.Items {
		if pod.Spec.NodeName != "" && nodes.Items[i].Name == pod.Spec.NodeName {
			check = nodes.Items[i : i+1]
		}
	}
	for _, n := range check {
		v, err := version.ParseGeneric(n.Status.NodeInfo.KubeletVersion)
		if err != nil || v.LessThan(version.MajorMinor(1, 33)) {
			return false
		}
	}
	return true
}

// topLevelPatch replaces the pod fields injection changes, as one JSON patch.
func topLevelPatch(pod *corev1.Pod) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{
		{"add", "/metadata/labels", pod.Labels},
		{"add", "/metadata/annotations", pod.Annotations},
		{"add", "/spec/initContainers", pod.Spec.InitContainers},
		{"add", "/spec/containers", pod.Spec.Containers},
		{"add", "/spec/volumes", pod.Spec.Volumes},
	}
	return json.Marshal(ops)
}
