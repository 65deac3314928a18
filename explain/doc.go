// Package explain is the project's pure logic: facts read from a cluster (or
// from files) in, findings out. No package under it holds a client or does
// I/O: inspect/ and nsexec/ read the facts from the cluster, cmd/ reads files
// and renders the findings. It holds no code itself; there is one
// sub-package per subject:
//
//   - injection: whether a pod is, and would be, injected with a sidecar,
//     and why: the Mesh interface, the factor table and the reports, and
//     Istio's model and verdicts.
//   - startup: how a pod's containers started, in what order, and what went
//     or may go wrong.
//   - capture: what a pod's traffic-capture rules do: an iptables-save dump
//     parsed and annotated, the pod's capture arguments, the rules those
//     arguments call for, the drift between the two, and traces of
//     connections through the rules.
//
// Subjects do not reach into each other: none of the three imports another,
// and there is no shared helper package. A name all of them know, such as
// Istio's proxy container (istio-proxy), is a fact about Istio that each
// subject states where it uses it; a helper of a few lines is repeated
// rather than shared. A type two subjects need would go to a package named
// for that type, not to a grab-bag.
package explain
