package inspect

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// CallInjector asks a revision's injector what it makes of pod: the
// AdmissionReview the apiserver would send it for a create of pod, posted
// where the webhook's clientConfig says (its url directly, as istioctl
// kube-inject does, or its Service through the apiserver's service proxy).
// Nothing is created. It returns the pod with the injector's patch applied,
// or why the injector refused it (denied) or could not be asked (err).
func (c *Client) CallInjector(ctx context.Context, cc admissionregistrationv1.WebhookClientConfig, pod *corev1.Pod) (out *corev1.Pod, denied string, err error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, "", err
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("kubectl-mesh-%d", time.Now().UnixNano())),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw}, DryRun: ptrTo(true),
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return nil, "", err
	}
	var resp []byte
	switch {
	case cc.URL != nil:
		resp, err = postURL(ctx, *cc.URL, cc.CABundle, body)
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		path := ""
		if cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		c.requests.Add(1)
		resp, err = c.Kube.CoreV1().RESTClient().Post().
			AbsPath(fmt.Sprintf("/api/v1/namespaces/%s/services/https:%s:%d/proxy%s", cc.Service.Namespace, cc.Service.Name, port, path)).
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Raw()
		if err != nil {
			err = ExplainAPIError(err, "create services/proxy")
		}
	default:
		err = fmt.Errorf("the webhook has neither a url nor a service")
	}
	if err != nil {
		return nil, "", err
	}
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(resp, &answer); err != nil || answer.Response == nil {
		return nil, "", fmt.Errorf("the injector's answer is not an AdmissionReview: %.200s", resp)
	}
	r := answer.Response
	if !r.Allowed {
		msg := "denied"
		if r.Result != nil && r.Result.Message != "" {
			msg = r.Result.Message
		}
		return nil, msg, nil
	}
	patched := raw
	if len(r.Patch) > 0 {
		p, err := jsonpatch.DecodePatch(r.Patch)
		if err != nil {
			return nil, "", fmt.Errorf("the injector's patch: %w", err)
		}
		if patched, err = p.Apply(raw); err != nil {
			return nil, "", fmt.Errorf("the injector's patch does not apply: %w", err)
		}
	}
	out = &corev1.Pod{}
	if err := json.Unmarshal(patched, out); err != nil {
		return nil, "", err
	}
	return out, "", nil
}

// postURL posts an AdmissionReview to a webhook's url, trusting its
// caBundle.
func postURL(ctx context.Context, url string, caBundle, body []byte) ([]byte, error) {
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caBundle)
		tlsConfig.RootCAs = pool
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s: %.200s", url, resp.Status, b)
	}
	return b, nil
}

func ptrTo[T any](v T) *T { return &v }
