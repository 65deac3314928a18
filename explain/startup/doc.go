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
// hazards of that order, each with its fix. StartupSeverity ranks reports
// for the many-pods view.
//
// Facts in, findings out: no client, no I/O (inspect reads the logs and
// events). It imports nothing from the other subjects of explain
// (injection, capture): the names of Istio's containers it looks for are
// its own constants.
package startup
