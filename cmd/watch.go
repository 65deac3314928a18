package cmd

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// watchScope is poked at each change of the pods (of the selector) and the
// events of namespace ns ("": every namespace), from now on, for -w: a
// watch of each, opened again when it closes.
func watchScope(ctx context.Context, client *inspect.Client, ns, selector string) chan struct{} {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	go follow(ctx, poke, func(ctx context.Context) (watch.Interface, error) {
		// From the current state: a list of one for its resourceVersion.
		l, err := client.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
		if err != nil {
			return nil, err
		}
		return client.Kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: l.ResourceVersion})
	})
	go follow(ctx, poke, func(ctx context.Context) (watch.Interface, error) {
		l, err := client.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return nil, err
		}
		return client.Kube.CoreV1().Events(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	})
	return kick
}

// follow keeps a watch open until ctx ends, poking at each event; a watch
// that closes (it expired, the connection dropped) is opened again from
// the current state, with a poke: changes may have been missed.
func follow(ctx context.Context, poke func(), open func(context.Context) (watch.Interface, error)) {
	for ctx.Err() == nil {
		w, err := open(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			continue
		}
		for range w.ResultChan() {
			poke()
		}
		w.Stop()
		poke()
	}
}

// settle waits for watchQuiet without a change (at most watchMost).
func settle(ctx context.Context, kick chan struct{}) {
	most := time.After(watchMost)
	for {
		select {
		case <-ctx.Done():
			return
		case <-most:
			return
		case <-kick:
		case <-time.After(watchQuiet):
			return
		}
	}
}
