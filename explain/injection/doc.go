// Package injection explains sidecar injection.
//
// In: ClusterFacts, read once per run (the mutating webhooks, the injector
// ConfigMaps, the control-plane Deployments, the namespaces, the Services
// the webhooks call and their EndpointSlices, the kubelet versions, and
// which of these could not be read), and one Workload (a live pod or a pod
// template, with its namespace's labels, its owner and the owner's
// FailedCreate events).
//
// Out: an InjectionReport: every factor that decides injection, with its
// effect and where it was found; whether the pod was and would be injected,
// by which revision and webhook, as which kind of sidecar; the verdict, the
// fix and any mismatch. SortReports and Summarize order and count reports
// for the many-pods view (Rank and Summaries do it as reports come, for a
// sweep that keeps none). With ambient mode, whether istio-cni's agent
// enrolls the pod and what became of it (AmbientCapture).
//
// A Mesh is one service mesh's injection model. Istio implements it: the
// apiserver's choice of webhook from Istio's selectors, then istiod's own
// checks, in its order of precedence.
//
// Facts in, findings out: no client, no I/O. It imports nothing from the
// other subjects of explain (startup, capture).
package injection
