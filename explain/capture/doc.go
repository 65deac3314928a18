// Package capture explains a pod's traffic-capture rules.
//
// In: iptables-save (or ip6tables-save) dumps of either backend, with or
// without counters; the pod's context (its container ports, the proxy's
// uid, its addresses and DNS servers); the istio-iptables arguments the
// rules were written from (CaptureArgsFromPod finds them in the pod's spec
// and annotations); and the connections to trace.
//
// Out: each dump as a Ruleset with every rule annotated in plain language
// (ParseSave, Annotate); the rules the arguments call for (ParseCaptureArgs,
// ExpectedRules); the drift between the two (CompareRules); where each
// traced connection goes (ParseTraceSpec, Trace); and all of it as one
// CaptureReport (ExplainCapture).
//
// Facts in, findings out: no client, no I/O (cmd reads dump files; nsexec
// reads a live pod's rules). It imports nothing from the other subjects of
// explain (injection, startup).
package capture
