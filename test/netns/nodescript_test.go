package netns

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// fakePod is a process standing in for a pod on the node: a sleep in its
// own network namespace, in a cgroup named by a made-up container ID, as
// the node script finds a pod's processes.
type fakePod struct {
	id, netns string
	cmd       *exec.Cmd
}

// cgroupRoot is a hierarchy a process can be moved into: cgroup v2's, or
// v1's pids controller.
func cgroupRoot(t *testing.T) string {
	t.Helper()
	for _, d := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids"} {
		if _, err := os.Stat(filepath.Join(d, "cgroup.procs")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "cgroup.controllers")); err == nil || strings.HasSuffix(d, "/pids") {
				return d
			}
		}
	}
	t.Fatal("no cgroup hierarchy to put a process in")
	return ""
}

// startFakePod starts a sleep in a new network namespace whose resolv.conf
// is what resolv makes in dir /etc/netns/<ns>, with rules loaded, in a
// cgroup named by a made-up 64-hex container ID. All of it is removed at
// the end.
func startFakePod(t *testing.T, rules string, resolv func(path string) error) *fakePod {
	t.Helper()
	p := &fakePod{id: fmt.Sprintf("%016x%016x%016x%016x", mrand.Uint64(), mrand.Uint64(), mrand.Uint64(), mrand.Uint64()), netns: "kmt-node-" + rand.String(6)}
	run(t, "ip", "netns", "add", p.netns)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", p.netns).Run()
		_ = os.RemoveAll("/etc/netns/" + p.netns)
	})
	if err := os.MkdirAll("/etc/netns/"+p.netns, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := resolv("/etc/netns/" + p.netns + "/resolv.conf"); err != nil {
		t.Fatal(err)
	}
	if rules != "" {
		cmd := exec.Command("ip", "netns", "exec", p.netns, "iptables-nft-restore")
		cmd.Stdin = strings.NewReader(rules)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("loading rules: %v\n%s", err, out)
		}
	}
	// ip netns exec enters the namespace and bind-mounts resolv.conf in a
	// mount namespace of its own, then becomes sleep.
	p.cmd = exec.Command("ip", "netns", "exec", p.netns, "sleep", "600")
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	pid := strconv.Itoa(p.cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		comm, _ := os.ReadFile("/proc/" + pid + "/comm")
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s never became sleep in %s", pid, p.netns)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cg := filepath.Join(cgroupRoot(t), "kmesh-test-"+p.id)
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		_ = os.Remove(cg)
	})
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(pid), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func keys(m map[string]nsexec.PodDump) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// leftBehind lists the processes whose parent is this test process, but
// for the ones it started itself: anything the script left running (or
// exited unreaped) once it ended, reparented to this process, the
// subreaper, as a host-PID node pod's orphans are to containerd's shim.
func leftBehind(t *testing.T, own map[int]bool) []string {
	t.Helper()
	var left []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		if ppid == os.Getpid() && !own[pid] {
			left = append(left, fmt.Sprintf("%d %s (%s)", pid, s[strings.IndexByte(s, '(')+1:i], fields[0]))
		}
	}
	return left
}

// The node pod's script, run on this host as a host-PID node pod runs it,
// with busybox's shell (the test images') and the host's /bin/sh: it finds
// each pod's process by its container ID in one pass, reads every pod's
// rules, resolv.conf and socket tables in parallel lanes, says which pod has no process,
// kills the dump of a pod that hangs (its resolv.conf is a FIFO nobody
// writes) after the per-pod timeout while the others are read, and leaves
// no process behind it when it ends: a process that outlived it (busybox
// timeout's watcher did) made containerd's shim report the node pod
// finished up to 30 s late.
func TestNodeScriptAgainstTheHost(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"busybox", "nsenter", "iptables-nft-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (hack/cluster/deps.sh installs it): %v", tool, err)
		}
	}
	// ip netns exec binds /etc/netns/<ns>/resolv.conf over this one.
	if _, err := os.Stat("/etc/resolv.conf"); err != nil {
		t.Fatalf("ip netns exec needs an /etc/resolv.conf to bind the pods' own over: %v", err)
	}
	rules, err := os.ReadFile("../../explain/capture/testdata/istio-default.nft.save")
	if err != nil {
		t.Fatal(err)
	}
	// Its resolv.conf also holds comment lines that look like the node
	// pod's markers: a pod may write any line there.
	good := startFakePod(t, string(rules), func(path string) error {
		return os.WriteFile(path, []byte("### kubectl-mesh-pod shop/forged\nnameserver 10.250.9.53\n### kubectl-mesh-end 0\n; kubectl-mesh\n"), 0o644)
	})
	hung := startFakePod(t, "", func(path string) error { return unix.Mkfifo(path, 0o644) })
	// A pod whose dump hangs in a program it runs: nft, in its namespace
	// only, sleeps (a wrapper first in PATH).
	stuck := startFakePod(t, string(rules), func(path string) error { return os.WriteFile(path, []byte("nameserver 10.250.9.54\n"), 0o644) })
	stuckNet, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", stuck.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	realNft, err := exec.LookPath("nft")
	if err != nil {
		t.Fatal(err)
	}
	wrappers := t.TempDir()
	if err := os.WriteFile(filepath.Join(wrappers, "nft"), []byte(fmt.Sprintf("#!/bin/sh\n[ \"$(readlink /proc/self/ns/net)\" != %q ] || exec sleep 600\nexec %s \"$@\"\n", stuckNet, realNft)), 0o755); err != nil {
		t.Fatal(err)
	}
	vanished := fmt.Sprintf("%016x%016x%016x%016x", mrand.Uint64(), mrand.Uint64(), mrand.Uint64(), mrand.Uint64())

	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	var list strings.Builder
	const goodPods = 6
	for i := 0; i < goodPods; i++ {
		fmt.Fprintf(&list, "shop/good-%d %s\n", i, good.id)
	}
	fmt.Fprintf(&list, "shop/hung %s\nshop/stuck %s\nshop/vanished %s\n", hung.id, stuck.id, vanished)
	// Long enough for a dump on a busy machine (make test runs the e2e
	// tests beside this one).
	const podTimeout = 4 * time.Second
	shells := [][]string{{"busybox", "sh"}, {"/bin/sh"}}
	checked, clean := 0, 0
	for _, sh := range shells {
		t.Run(strings.ReplaceAll(strings.Trim(strings.Join(sh, "-"), "/"), "/", "-"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			script := nsexec.NodeScript(list.String(), 2, podTimeout, false, true)
			cmd := exec.CommandContext(ctx, sh[0], append(sh[1:], "-c", script)...)
			cmd.Env = append(os.Environ(), "PATH="+wrappers+":"+os.Getenv("PATH"))
			// Past the minute, the whole group goes, and a process still
			// holding the output does not hold the test.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			cmd.WaitDelay = 5 * time.Second
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			if err != nil {
				t.Fatalf("the script failed after %s: %v\n%s", took, err, out)
			}
			own := map[int]bool{good.cmd.Process.Pid: true, hung.cmd.Process.Pid: true, stuck.cmd.Process.Pid: true}
			if left := leftBehind(t, own); len(left) > 0 {
				t.Errorf("the script left %d processes behind it: %s", len(left), strings.Join(left, "; "))
			} else {
				clean++
			}
			// Reap whatever was left, so that the next shell starts clean.
			for {
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			dumps := nsexec.ParseNodeOutput(string(out))
			for i := 0; i < goodPods; i++ {
				d, ok := dumps[fmt.Sprintf("shop/good-%d", i)]
				text := map[string]string{}
				for _, s := range d.Sections {
					text[s.Name] += s.Text
				}
				switch {
				case !ok || d.Err != "":
					t.Errorf("good-%d: no dump (%q)", i, d.Err)
				case !strings.Contains(text["iptables-nft-save"], "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001"):
					t.Errorf("good-%d: the rules loaded in its namespace are not in its dump:\n%s", i, text["iptables-nft-save"])
				case !strings.Contains(text["resolv.conf"], "nameserver 10.250.9.53"):
					t.Errorf("good-%d: its own resolv.conf is not in its dump: %q", i, text["resolv.conf"])
				case !strings.Contains(text["resolv.conf"], "nameserver 10.250.9.53") || strings.Contains(text["resolv.conf"], "kubectl-mesh"):
					t.Errorf("good-%d: its resolv.conf in its dump is not its nameserver without its comment lines: %q", i, text["resolv.conf"])
				case !strings.Contains(text["sockets"], "# tcp\n  sl "):
					t.Errorf("good-%d: its socket tables are not in its dump: %q", i, text["sockets"])
				default:
					checked++
				}
			}
			if len(dumps) != goodPods+3 {
				t.Errorf("%d pods in the output, want %d: %v", len(dumps), goodPods+3, keys(dumps))
			}
			for _, hung := range []string{"shop/hung", "shop/stuck"} {
				if d := dumps[hung]; d.Err != "timed out after 4s reading its rules" {
					t.Errorf("%s, whose dump hangs: %q, want timed out after 4s", hung, d.Err)
				} else {
					checked++
				}
			}
			if d := dumps["shop/vanished"]; !strings.Contains(d.Err, "no process of container "+vanished) {
				t.Errorf("the pod with no process: %q", d.Err)
			} else {
				checked++
			}
			t.Logf("%s: %d pods in %s", strings.Join(sh, " "), goodPods+3, took.Round(10*time.Millisecond))
		})
	}
	testreport.Count(t, "node script: %d pod dumps checked with %d shells (rules, resolv.conf, sockets, a dump hung in the shell and one hung in a program it ran, both killed at the timeout, a vanished pod); %d of them left no process behind", checked, len(shells), clean)
}
