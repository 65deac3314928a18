package cmd

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// workloadTypes are the TYPE/ prefixes completion offers, as kubectl spells them.
var workloadTypes = []string{"deployment/", "statefulset/", "daemonset/", "replicaset/", "job/", "cronjob/", "replicationcontroller/", "service/", "pod/"}

// completePodsAndWorkloads completes a POD or TYPE/NAME argument from the
// cluster: pod names and workload types, then names of the chosen type.
func completePodsAndWorkloads(flags *genericclioptions.ConfigFlags) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg, err := flags.ToRESTConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cfg.Timeout = 5 * time.Second
		client, err := metadataClient(cfg)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, _, _ := flags.ToRawKubeConfigLoader().Namespace()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var names []string
		if typ, prefix, ok := strings.Cut(toComplete, "/"); ok {
			gvr, known := completionResources[strings.ToLower(typ)]
			if !known {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, n := range listNames(ctx, client, ns, gvr) {
				if strings.HasPrefix(n, prefix) {
					names = append(names, typ+"/"+n)
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		}
		for _, n := range listNames(ctx, client, ns, completionResources["pod"]) {
			if strings.HasPrefix(n, toComplete) {
				names = append(names, n)
			}
		}
		for _, t := range workloadTypes {
			if strings.HasPrefix(t, toComplete) {
				names = append(names, t)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completionResources maps what a user types before "/" to the resource listed.
var completionResources = map[string]schema.GroupVersionResource{}

func init() {
	for _, r := range []struct {
		gvr   schema.GroupVersionResource
		names []string
	}{
		{schema.GroupVersionResource{Version: "v1", Resource: "pods"}, []string{"pod", "pods", "po"}},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, []string{"deployment", "deployments", "deploy"}},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}, []string{"statefulset", "statefulsets", "sts"}},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}, []string{"daemonset", "daemonsets", "ds"}},
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}, []string{"replicaset", "replicasets", "rs"}},
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}, []string{"job", "jobs"}},
		{schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}, []string{"cronjob", "cronjobs", "cj"}},
		{schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, []string{"replicationcontroller", "replicationcontrollers", "rc"}},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, []string{"service", "services", "svc"}},
	} {
		for _, n := range r.names {
			completionResources[n] = r.gvr
		}
	}
}

// listNames lists the names of one kind of object in a namespace ("" for
// cluster-scoped kinds), metadata only.
func listNames(ctx context.Context, c metadata.Interface, ns string, gvr schema.GroupVersionResource) []string {
	list, err := c.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1000})
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list.Items))
	for _, i := range list.Items {
		names = append(names, i.Name)
	}
	return names
}

func metadataClient(cfg *rest.Config) (metadata.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 5 * time.Second
	return metadata.NewForConfig(cfg)
}

// listNamespaces lists the cluster's namespace names (metadata only).
func listNamespaces(c metadata.Interface) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return listNames(ctx, c, "", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
}
