// Package startup explains how a pod's containers started.
//
// In: StartupFacts (the pod with its container statuses, the events about
// it, the log tails of the containers that failed, its owner's kind, and
// the time now).
//
// Out: a StartupReport: each container's role (istio-init,
// istio-validation, the proxy as a classic or native sidecar, the pod's own
// init and app containers), its state, exit code and recognised failure;
// the order the containers started in; when the proxy became ready; and the
// hazards of that order, each with its fix. A container that failed is
// Failing through every phase of its crash loop; one that restarted and
// runs ready now in a Ready pod (or completed, in a pod that Succeeded) is
// Recovered, a note, not a hazard (classify says when a crash loop caught
// between two crashes is not). StartupSeverity ranks reports for the
// many-pods view.
//
// Facts in, findings out: no client, no I/O (inspect reads the logs and
// events). It imports nothing from the other subjects of explain
// (injection, capture): the names of Istio's containers it looks for are
// its own constants.
package startup
