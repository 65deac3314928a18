package e2e

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// faultsRunOnce are the faults of run-once pods (a Job's, restartPolicy
// Never) that never end or fail for something of their own.
func (b *catBed) faultsRunOnce() []*catFault {
	c, inj, createPod := b.c, b.inj, b.createPod
	return []*catFault{
		{code: "KM-START-017", ns: inj, name: "helper-runs-on", how: "a run-once pod (restartPolicy Never, native sidecar) whose app exits 0 while its second container, a log shipper, runs on (sleep)",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("helper-runs-on", nil, catLean())
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				shipper := *p.Spec.Containers[0].DeepCopy()
				shipper.Name, shipper.Command, shipper.Ports, shipper.ReadinessProbe = "log-shipper", []string{"/bin/sh", "-c", "sleep 100000"}, nil, nil
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo exported"}
				p.Spec.Containers = append(p.Spec.Containers, shipper)
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "its app ended with exit 0, log-shipper running"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					app, helper := catStatus(p, p.Spec.Containers[0].Name), catStatus(p, "log-shipper")
					return app != nil && app.State.Terminated != nil && app.State.Terminated.ExitCode == 0 && helper != nil && helper.State.Running != nil
				})
				return err
			}},
		{code: "KM-START-018", ns: inj, name: "quits-no-proxy", how: "a run-once pod opted out (label sidecar.istio.io/inject=false) whose command (sh -e) ends by posting to 127.0.0.1:15020/quitquitquit: refused, it fails",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("quits-no-proxy", map[string]string{"sidecar.istio.io/inject": "false"}, catLean())
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-ec", "echo exported; wget -q -O- --post-data='' http://127.0.0.1:15020/quitquitquit"}
				p.Spec.Containers[0].Ports = nil
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "failed"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
				return err
			}},
	}
}

// faultsProxySettings are the faults of a pod's own settings of the proxy:
// its status port, its image (it does not start), its owner-group capture
// (its traffic bypasses), its drain (cut at every stop).
func (b *catBed) faultsProxySettings() []*catFault {
	c, inj, createPod := b.c, b.inj, b.createPod
	return []*catFault{
		{code: "KM-INJ-022", ns: b.plain, name: "rev-opted-out", how: `a pod labelled istio.io/rev=canary and sidecar.istio.io/inject="false" (a chart's opt-out left beside a revision label): no webhook selects it, it runs without a sidecar`,
			plant: func(ctx context.Context, f *catFault) error {
				return b.runningReady(ctx, f, b.plain, appPod("rev-opted-out", map[string]string{"istio.io/rev": "canary", "sidecar.istio.io/inject": "false"}, catLean()))
			}},
		{code: "KM-START-022", ns: inj, name: "probes-the-proxy", how: "a sidecar pod whose app's liveness and readiness probes ask /healthz/ready on 15021, the proxy's readiness port: they answer for the proxy, not the app",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("probes-the-proxy", nil, catLean())
				ready := &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}}}
				p.Spec.Containers[0].LivenessProbe, p.Spec.Containers[0].ReadinessProbe = ready, ready.DeepCopy()
				return b.runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-019", ns: inj, name: "status-on-inbound", how: `status.sidecar.istio.io/port="15006", the proxy's inbound listener: the app's readiness probe, which the injector points at the status port, reaches the listener: never ready`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("status-on-inbound", nil, catLean("status.sidecar.istio.io/port", "15006"))
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "running, its app's rewritten probe failing"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "app")
					return p.Status.Phase == corev1.PodRunning && s != nil && s.State.Running != nil && !s.Ready && time.Since(s.State.Running.StartedAt.Time) > 10*time.Second
				})
				return err
			}},
		{code: "KM-CAP-014", ns: inj, name: "groups-let-out", how: `proxy.istio.io/config proxyMetadata ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE="0", the app setting no group (root's): istio-init lets group 0's traffic out uncaptured`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("groups-let-out", nil, catLean("proxy.istio.io/config", `{"proxyMetadata":{"ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE":"0"}}`))
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "ready, its group's traffic not captured"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, podReadyNow)
				return err
			}},
		{code: "KM-CAP-015", ns: inj, name: "init-dry-run", how: `proxy.istio.io/config proxyMetadata DRY_RUN="true": istio-init runs istio-iptables as with --dry-run and writes no rules`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("init-dry-run", nil, catLean("proxy.istio.io/config", `{"proxyMetadata":{"DRY_RUN":"true"}}`))
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "ready, no capture rules written"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, podReadyNow)
				return err
			}},
		{code: "KM-CAP-016", ns: inj, name: "init-env-gid", how: `proxy.istio.io/config proxyMetadata PROXY_GID="0": istio-iptables reads it as -g, and its rules let group 0's traffic (the app's) out uncaptured`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("init-env-gid", nil, catLean("proxy.istio.io/config", `{"proxyMetadata":{"PROXY_GID":"0"}}`))
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "ready, group 0 let out of the capture"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, podReadyNow)
				return err
			}},
		{code: "KM-START-020", ns: inj, name: "drain-past-grace", how: `proxy.istio.io/config terminationDrainDuration 60s, terminationGracePeriodSeconds 5: the kubelet kills the proxy 5s into its drain`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("drain-past-grace", nil, catLean("proxy.istio.io/config", `{"terminationDrainDuration":"60s"}`))
				five := int64(5)
				p.Spec.TerminationGracePeriodSeconds = &five
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "ready"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, podReadyNow)
				return err
			}},
		{code: "KM-START-021", ns: inj, name: "ports-privileged", how: "the pod's securityContext sets net.ipv4.ip_unprivileged_port_start=16000: istio-proxy (uid 1337) cannot bind its ports and crash-loops",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("ports-privileged", nil, catLean())
				p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "16000"}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "istio-proxy failed again"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool { return catFailedAgain(catStatus(p, "istio-proxy")) })
				return err
			}},
		{code: "KM-INIT-013", ns: inj, name: "sidecar-probes-app", how: "a native sidecar of the app's own whose startup probe asks the app container's port 8080: the app starts only after it passes",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("sidecar-probes-app", nil, catLean())
				always := corev1.ContainerRestartPolicyAlways
				side := *p.Spec.Containers[0].DeepCopy()
				side.Name, side.Command, side.Ports, side.RestartPolicy = "config-reloader", []string{"/bin/sh", "-c", "sleep 100000"}, nil, &always
				side.StartupProbe = &corev1.Probe{PeriodSeconds: 2, FailureThreshold: 100000, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
				p.Spec.InitContainers = append(p.Spec.InitContainers, side)
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "config-reloader running, not started"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "config-reloader")
					return s != nil && s.State.Running != nil && (s.Started == nil || !*s.Started)
				})
				return err
			}},
		{code: "KM-INIT-012", ns: inj, name: "proxy-image-app", how: "a run-once pod whose sidecar.istio.io/proxyImage is the app's image: istio-init finds no istio-iptables in it and fails",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("proxy-image-app", nil, catLean("sidecar.istio.io/proxyImage", testImage))
				p.Spec.RestartPolicy = corev1.RestartPolicyNever
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "failed in istio-init"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
				return err
			}},
	}
}
