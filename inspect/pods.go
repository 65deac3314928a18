package inspect

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// PodStream reads the pods of a sweep in the background, from the moment it
// is started, and hands them over in batches of PageSize: the mesh's other
// facts are read meanwhile, and each batch is explained while the next one
// is decoded (the two use both cores). At most two batches are held: one
// handed over, one filling (StreamBatch pods each when streamed, PageSize
// when paged).
//
// Where the apiserver can (Kubernetes 1.34 and later; 1.33 has it off by
// default), the pods come as one streamed list — a watch asked for its
// initial events only (KEP-3157), served from the apiserver's cache and
// decoded pod by pod — else as paged LISTs (the next page fetched while the
// current one is worked on). The stream is given up for pages only before
// its first pod: an apiserver that refuses it (422 before 1.34 with the
// feature off, 500 when its etcd cannot report progress, 403 for a user
// who may list pods but not watch them) costs one request.
type PodStream struct {
	batches chan podBatch
	parent  context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	// Streamed is set once the stream (not pages) delivered the pods.
	streamed bool
}

// StreamBatch is how many streamed pods are handed over at once: a stream
// has no per-request cost, so batches are small and little is held.
const StreamBatch = 250

type podBatch struct {
	pods []corev1.Pod
	err  error
}

// StreamPods starts reading the pods of namespace ("" for all) matching
// selector. Each or Close must be called.
func (c *Client) StreamPods(parent context.Context, namespace, selector string) *PodStream {
	ctx, cancel := context.WithCancel(parent)
	s := &PodStream{batches: make(chan podBatch), parent: parent, cancel: cancel, done: make(chan struct{})}
	size, batch := int64(PageSize), StreamBatch
	if c.PageSize > 0 {
		size, batch = c.PageSize, int(c.PageSize)
	}
	go func() {
		defer close(s.done)
		defer close(s.batches)
		send := func(b podBatch) bool {
			select {
			case s.batches <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if !c.PagesOnly {
			started, err := c.watchList(ctx, namespace, selector, batch, send)
			if started || err == nil {
				s.streamed = err == nil
				if err != nil {
					send(podBatch{err: err})
				}
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
		c.pages(ctx, namespace, selector, size, send)
	}()
	return s
}

// watchList streams the pods as a watch's initial events. started reports
// whether any pod was handed over (after that, a failure cannot fall back
// to pages without handing pods over twice).
func (c *Client) watchList(ctx context.Context, namespace, selector string, size int, send func(podBatch) bool) (started bool, err error) {
	yes := true
	w, err := c.Proto.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{LabelSelector: selector,
		SendInitialEvents: &yes, AllowWatchBookmarks: true, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		return false, err
	}
	defer w.Stop()
	batch := make([]corev1.Pod, 0, size)
	for {
		select {
		case <-ctx.Done():
			return started, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return started, errors.New("the apiserver ended the pod stream before its last pod")
			}
			switch ev.Type {
			case watch.Added:
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					return started, fmt.Errorf("the pod stream sent a %T", ev.Object)
				}
				batch = append(batch, *p)
				if len(batch) == size {
					if !send(podBatch{pods: batch}) {
						return true, ctx.Err()
					}
					started = true
					batch = make([]corev1.Pod, 0, size)
				}
			case watch.Bookmark:
				if p, ok := ev.Object.(*corev1.Pod); ok && p.Annotations[metav1.InitialEventsAnnotationKey] == "true" {
					if len(batch) > 0 && !send(podBatch{pods: batch}) {
						return true, ctx.Err()
					}
					return true, nil
				}
			case watch.Error:
				return started, apierrors.FromObject(ev.Object)
			default:
				// Modified or Deleted: changes after the list, which a sweep
				// (a list) does not take; the list's end is not here yet, so
				// this is not expected.
			}
		}
	}
}

// pages reads the pods with paged LISTs, the next page fetched while the
// current one is worked on. (Each page costs the apiserver a roughly fixed
// time, so pages are large; resourceVersion "0" would be faster still but
// makes the watch cache ignore the limit and return every pod at once.)
func (c *Client) pages(ctx context.Context, namespace, selector string, limit int64, send func(podBatch) bool) {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: limit}
	for {
		list, err := c.Proto.CoreV1().Pods(namespace).List(ctx, opts)
		if err != nil {
			send(podBatch{err: err})
			return
		}
		if !send(podBatch{pods: list.Items}) || list.Continue == "" {
			return
		}
		opts = metav1.ListOptions{LabelSelector: selector, Limit: opts.Limit, Continue: list.Continue}
	}
}

// Each hands the pods to fn batch by batch, in the apiserver's order, and
// returns the first error (the stream's, fn's, or the context's: a reading
// cut short is never a complete answer). The reading ends before Each
// returns, whatever fn did.
func (s *PodStream) Each(fn func([]corev1.Pod) error) error {
	defer s.Close()
	for b := range s.batches {
		if b.err != nil {
			return b.err
		}
		if err := fn(b.pods); err != nil {
			return err
		}
	}
	return s.parent.Err()
}

// Streamed reports whether the pods came as one stream (after Each).
func (s *PodStream) Streamed() bool { return s.streamed }

// Close stops the reading and waits for it to end.
func (s *PodStream) Close() {
	s.cancel()
	<-s.done
}

// EachPodPage reads the pods of namespace ("" for all) matching selector
// (StreamPods) and hands them to fn batch by batch.
func (c *Client) EachPodPage(ctx context.Context, namespace, selector string, fn func([]corev1.Pod) error) error {
	return c.StreamPods(ctx, namespace, selector).Each(fn)
}
