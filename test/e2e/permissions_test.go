package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

var updateMatrix = flag.Bool("update-matrix", false, "rewrite testdata/permission-matrix.md from this run")

// A permission is named as "<verb> <resource>" in what the user is told.
var namedPermission = regexp.MustCompile(`(may not|not allowed to|needs?) (get|list|patch|create|delete) [a-z]`)

// matrixRole is a realistic set of permissions a user of kubectl mesh has.
type matrixRole struct {
	name string
	// bind grants the role to user (impersonated with --as).
	bind func(t *testing.T, c *testcluster.Cluster, ns, user string)
}

// The rules a mesh operator needs for every command, with some left out.
func operatorRules(without string) []rbacv1.PolicyRule {
	core := []string{"pods", "pods/log", "namespaces", "configmaps", "services", "endpoints", "nodes", "events"}
	var kept []string
	for _, r := range core {
		if r != without {
			kept = append(kept, r)
		}
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: kept, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets", "statefulsets", "daemonsets"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete"}},
	}
	if without == "events" {
		return rules
	}
	// events.k8s.io too, as kubectl's own view does.
	return append(rules, rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list"}})
}

func bindNamespace(t *testing.T, c *testcluster.Cluster, ns, user, clusterRole string) {
	t.Helper()
	b := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: user, APIGroup: "rbac.authorization.k8s.io"}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var matrixRoles = []matrixRole{
	{"namespace view (view, RoleBinding)", func(t *testing.T, c *testcluster.Cluster, ns, user string) { bindNamespace(t, c, ns, user, "view") }},
	{"namespace edit (edit, RoleBinding)", func(t *testing.T, c *testcluster.Cluster, ns, user string) { bindNamespace(t, c, ns, user, "edit") }},
	{"cluster view (view, ClusterRoleBinding)", func(t *testing.T, c *testcluster.Cluster, ns, user string) { c.GrantClusterRole(t, user, "view", nil) }},
	{"mesh operator without events", func(t *testing.T, c *testcluster.Cluster, ns, user string) {
		c.GrantClusterRole(t, user, "", operatorRules("events"))
	}},
	{"mesh operator without configmaps", func(t *testing.T, c *testcluster.Cluster, ns, user string) {
		c.GrantClusterRole(t, user, "", operatorRules("configmaps"))
	}},
	{"cluster admin (cluster-admin)", func(t *testing.T, c *testcluster.Cluster, ns, user string) {
		c.GrantClusterRole(t, user, "cluster-admin", nil)
	}},
}

// TestPermissionMatrix runs every command as six realistic users, from a
// namespace viewer to a cluster admin, against a pod real istiod injected.
// For each: the exit code is 0 (complete), 3 (an answer with unknowns) or 1
// (refused) and matches the answer; an unknown is never reported as "no"
// (every known answer equals the admin's); no fix is built on an unknown;
// every unknown names the permission that would settle it; no factor row
// contradicts an unknown. The cells are compared with
// testdata/permission-matrix.md, the table docs/permissions.md shows.
func TestPermissionMatrix(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "perm", map[string]string{"istio-injection": "enabled"})

	dep := appDeployment(ns, "web", 1, nil)
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := c.RunningPod(t, ns, "app=web", 120*time.Second)
	file := writeManifest(t, dep)

	commands := []struct {
		name string
		args []string
	}{
		{"why-injected POD", []string{"why-injected", pod, "-n", ns}},
		{"why-injected deploy/web", []string{"why-injected", "deploy/web", "-n", ns}},
		{"why-injected -n", []string{"why-injected", "-n", ns}},
		{"why-injected -A", []string{"why-injected", "-A"}},
		{"why-injected -f", []string{"why-injected", "-f", file}},
		{"startup POD", []string{"startup", pod, "-n", ns}},
		{"iptables POD", []string{"iptables", pod, "-n", ns}},
		{"iptables POD --via node", []string{"iptables", pod, "-n", ns, "--via", "node"}},
		{"diagnose POD", []string{"diagnose", pod, "-n", ns}},
		{"diagnose POD --connections", []string{"diagnose", pod, "-n", ns, "--connections"}},
	}

	type cell struct {
		code   int
		out    string
		stderr string
	}
	results := map[string]map[string]cell{} // role → command → result
	users := map[string]string{}
	for i, role := range matrixRoles {
		user := fmt.Sprintf("%s-u%d", ns, i)
		users[role.name] = user
		role.bind(t, c, ns, user)
	}
	// Run the admin first: every other answer is compared with it.
	order := append([]matrixRole{matrixRoles[len(matrixRoles)-1]}, matrixRoles[:len(matrixRoles)-1]...)
	for _, role := range order {
		results[role.name] = map[string]cell{}
		for _, cmd := range commands {
			r := mesh(t, c, "", append(append([]string{}, cmd.args...), "--as", users[role.name], "-o", "json")...)
			results[role.name][cmd.name] = cell{r.code, r.stdout, r.stderr}
		}
	}
	noNodePods(t, c)

	// Per role and command: what the user gets, in docs/permissions.md's words.
	summary := map[string]map[string]string{}
	checks := 0
	admin := results[matrixRoles[len(matrixRoles)-1].name]
	for _, role := range matrixRoles {
		summary[role.name] = map[string]string{}
		for _, cmd := range commands {
			got := results[role.name][cmd.name]
			where := role.name + " / " + cmd.name
			switch got.code {
			case 0, 3:
			case 4:
				// A problem found is an answer (why-injected exits as
				// diagnose does): a sweep meets the cluster's other pods.
				if !strings.HasPrefix(cmd.name, "why-injected") && !strings.HasPrefix(cmd.name, "diagnose") {
					t.Errorf("%s: exit 4: %s", where, got.stderr)
					continue
				}
			case 1:
				if strings.HasPrefix(cmd.name, "diagnose") {
					// A check it may not make is unknown, not an error.
					t.Errorf("%s: exit 1: %s", where, got.stderr)
					continue
				}
				if !namedPermission.MatchString(got.stderr) {
					t.Errorf("%s: refused without naming the permission: %s", where, got.stderr)
				}
				summary[role.name][cmd.name] = "refused: " + abbrev(refusedNeed(got.stderr))
				checks++
				continue
			default:
				t.Errorf("%s: exit %d: %s", where, got.code, got.stderr)
				continue
			}
			switch {
			case strings.HasPrefix(cmd.name, "why-injected"):
				summary[role.name][cmd.name] = permWhyInjected(t, where, cmd.name, got.code, got.out, admin[cmd.name].out, &checks)
			case strings.HasPrefix(cmd.name, "diagnose"):
				summary[role.name][cmd.name] = checkDiagnosis(t, where, got.code, got.out, admin[cmd.name].out, &checks)
			case cmd.name == "startup POD":
				summary[role.name][cmd.name] = permStartup(t, where, got.code, got.out, admin[cmd.name].out, &checks)
			default: // iptables
				summary[role.name][cmd.name] = permIptables(t, where, got.code, got.out, admin[cmd.name].out, &checks)
			}
		}
	}

	// The matrix, as docs/permissions.md shows it.
	var b strings.Builder
	b.WriteString("| role | " + strings.Join(commandNames(commands), " | ") + " |\n")
	b.WriteString("|---" + strings.Repeat("|---", len(commands)) + "|\n")
	for _, role := range matrixRoles {
		row := []string{role.name}
		for _, cmd := range commands {
			row = append(row, summary[role.name][cmd.name])
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	golden := filepath.Join("testdata", "permission-matrix.md")
	if *updateMatrix {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./test/e2e -run TestPermissionMatrix -update-matrix writes it)", err)
	}
	if string(want) != b.String() {
		t.Errorf("the permission matrix differs from %s (docs/permissions.md's table):\n--- got\n%s--- want\n%s", golden, b.String(), want)
	}
	testreport.Count(t, "permission matrix: %d roles × %d commands, %d checks", len(matrixRoles), len(commands), checks)
}

// permWhyInjected checks one user's why-injected answer against the
// admin's; it returns the cell of docs/permissions.md's matrix.
func permWhyInjected(t *testing.T, where, name string, code int, out, adminOut string, checks *int) string {
	var needs []string
	items, incomplete := whyItems(t, where, out)
	adminItems, _ := whyItems(t, "admin "+name, adminOut)
	unknown := 0
	for _, it := range items {
		*checks += checkAgainstAdmin(t, where, it, adminItems)
		*checks += checkNoContradiction(t, where, it)
		if it.Expected == nil {
			unknown++
			needs = append(needs, it.Needs...)
			for _, n := range it.Needs {
				if !containsSub(incomplete, n) {
					t.Errorf("%s: %s needs %q, which the incomplete list %q does not name", where, it.Name, n, incomplete)
				}
			}
		}
	}
	if code == 0 && (unknown > 0 || len(incomplete) > 0) {
		t.Errorf("%s: exit 0 with %d unknown verdicts, incomplete %q", where, unknown, incomplete)
	}
	if code == 3 && len(incomplete) == 0 {
		t.Errorf("%s: exit 3 but nothing is named incomplete", where)
	}
	for _, u := range incomplete {
		if !namedPermission.MatchString(u) {
			t.Errorf("%s: incomplete %q names no permission", where, u)
		}
	}
	switch {
	case unknown > 0:
		return "answer now unknown: needs " + abbrev(strings.Join(dedupe(needs), ", "))
	case code == 3:
		var perms []string
		for _, u := range incomplete {
			perms = append(perms, strings.TrimPrefix(u[strings.Index(u, ": ")+2:], "forbidden: the user may not "))
		}
		return "answer; details unknown: needs " + abbrev(strings.Join(dedupe(perms), ", "))
	default:
		return "complete"
	}

}

// permStartup checks one user's startup answer against the admin's; it
// returns the cell of docs/permissions.md's matrix ("" when unreadable).
func permStartup(t *testing.T, where string, code int, out, adminOut string, checks *int) string {
	var r, a startup.StartupReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Errorf("%s: %v", where, err)
		return ""
	}
	_ = json.Unmarshal([]byte(adminOut), &a)
	if r.InitResult != a.InitResult || strings.Join(r.StartOrder, ",") != strings.Join(a.StartOrder, ",") || r.OrderVerdict != a.OrderVerdict {
		t.Errorf("%s: init %q order %v %q; the admin sees init %q order %v %q", where, r.InitResult, r.StartOrder, r.OrderVerdict, a.InitResult, a.StartOrder, a.OrderVerdict)
	}
	if (code == 3) != (len(r.Incomplete) > 0) {
		t.Errorf("%s: exit %d with incomplete %q", where, code, r.Incomplete)
	}
	for _, u := range r.Incomplete {
		if !namedPermission.MatchString(u) {
			t.Errorf("%s: incomplete %q names no permission", where, u)
		}
	}
	*checks += 3
	if code == 3 {
		return "timeline; events unknown: needs list events"
	}
	return "complete"
}

// permIptables checks one user's iptables answer against the admin's; it
// returns the cell of docs/permissions.md's matrix ("" when unreadable).
func permIptables(t *testing.T, where string, code int, out, adminOut string, checks *int) string {
	var r, a captureDoc
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Errorf("%s: %v", where, err)
		return ""
	}
	_ = json.Unmarshal([]byte(adminOut), &a)
	if code != 0 || r.Kind != "CaptureReport" || countRules(r) == 0 || countRules(r) != countRules(a) ||
		len(r.Drift.Missing)+len(r.Drift.Extra) != len(a.Drift.Missing)+len(a.Drift.Extra) {
		t.Errorf("%s: exit %d, kind %q, %d rules (admin %d), drift %d (admin %d)", where, code, r.Kind, countRules(r), countRules(a),
			len(r.Drift.Missing)+len(r.Drift.Extra), len(a.Drift.Missing)+len(a.Drift.Extra))
	}
	*checks += 2
	return "complete"
}

// checkDiagnosis checks one user's diagnosis against the admin's: a check
// the admin passes is passed or unknown, never another answer; an unknown
// check names the permission that would settle it; a check the user passes
// the admin passes too; the exit is 3 exactly when something is unknown and
// nothing failed. It returns the cell of docs/permissions.md's matrix.
func checkDiagnosis(t *testing.T, where string, code int, out, adminOut string, checks *int) string {
	t.Helper()
	var d, a diagnose.Diagnosis
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Errorf("%s: %v", where, err)
		return "?"
	}
	_ = json.Unmarshal([]byte(adminOut), &a)
	if len(d.Checks) != 5 || len(a.Checks) != 5 {
		t.Errorf("%s: %d checks (admin %d), want 5", where, len(d.Checks), len(a.Checks))
		return "?"
	}
	var unknown, needs []string
	for i, c := range d.Checks {
		ac := a.Checks[i]
		switch {
		case c.Status == ac.Status:
		case c.Status == diagnose.Unknown:
			unknown = append(unknown, c.Name)
		default:
			t.Errorf("%s: %s is %q (%s); the admin's is %q (%s)", where, c.Name, c.Status, c.Evidence, ac.Status, ac.Evidence)
		}
		if c.Status == diagnose.Unknown {
			named := false
			for _, n := range c.Needs {
				named = named || namedPermission.MatchString("needs "+n)
				needs = append(needs, inNamespace.ReplaceAllString(n, "in its namespace"))
			}
			if !named && (c.Name == diagnose.CheckInjection || c.Name == diagnose.CheckCapture || c.Name == diagnose.CheckConnections) {
				t.Errorf("%s: %s unknown without naming a permission: %q", where, c.Name, c.Evidence)
			}
		}
		*checks += 2
	}
	wantCode := 0
	switch {
	case d.Status == diagnose.Fail:
		wantCode = 4
	case d.Status == diagnose.Unknown:
		wantCode = 3
	}
	if code != wantCode && !(code == 3 && wantCode == 0) {
		t.Errorf("%s: exit %d, status %q: want exit %d", where, code, d.Status, wantCode)
	}
	if (code == 3) != (len(unknown) > 0 || len(d.Incomplete) > 0) {
		t.Errorf("%s: exit %d, unknown checks %q, incomplete %q", where, code, unknown, d.Incomplete)
	}
	var details []string
	for _, u := range d.Incomplete {
		if !namedPermission.MatchString(u) {
			t.Errorf("%s: incomplete %q names no permission", where, u)
		}
		detail := inNamespace.ReplaceAllString(strings.TrimPrefix(u[strings.Index(u, ": ")+2:], "forbidden: the user may not "), "in its namespace")
		if !containsSub(needs, detail) {
			details = append(details, detail)
		}
	}
	*checks += 2
	cell := "complete"
	if len(unknown) > 0 {
		cell = strings.Join(unknown, ", ") + " unknown: needs " + abbrev(strings.Join(dedupe(needs), ", "))
	}
	if len(details) > 0 {
		if cell == "complete" {
			cell = "every check"
		}
		cell += "; details unknown: needs " + abbrev(strings.Join(dedupe(details), ", "))
	}
	return cell
}

var inNamespace = regexp.MustCompile(`in namespace [a-z0-9-]+`)

func commandNames(cs []struct {
	name string
	args []string
}) []string {
	var out []string
	for _, c := range cs {
		out = append(out, "`"+c.name+"`")
	}
	return out
}

// whyItems reads a why-injected answer: one report or a list.
func whyItems(t *testing.T, where, out string) ([]injection.InjectionReport, []string) {
	t.Helper()
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(out), &head); err != nil {
		t.Errorf("%s: not JSON: %v: %.300s", where, err, out)
		return nil, nil
	}
	if head.Kind == "InjectionReportList" {
		var l listDoc
		_ = json.Unmarshal([]byte(out), &l)
		return l.Items, l.Incomplete
	}
	var d reportDoc
	_ = json.Unmarshal([]byte(out), &d)
	return []injection.InjectionReport{d.InjectionReport}, d.Incomplete
}

// checkAgainstAdmin: what this user knows equals what the admin knows.
func checkAgainstAdmin(t *testing.T, where string, it injection.InjectionReport, admin []injection.InjectionReport) int {
	t.Helper()
	for _, a := range admin {
		if a.Kind != it.Kind || a.Namespace != it.Namespace || a.Name != it.Name {
			continue
		}
		if a.Expected == nil {
			t.Errorf("%s: the admin's answer for %s is unknown: %s", where, a.Name, a.Verdict)
		}
		if fmtBool(it.Injected) != fmtBool(a.Injected) {
			t.Errorf("%s: %s injected %s, the admin sees %s", where, it.Name, fmtBool(it.Injected), fmtBool(a.Injected))
		}
		if it.Expected != nil && fmtBool(it.Expected) != fmtBool(a.Expected) {
			t.Errorf("%s: %s expected %s, the admin sees %s: an unknown became an answer (%s)", where, it.Name, fmtBool(it.Expected), fmtBool(a.Expected), it.Verdict)
		}
		if it.Mismatch != nil && fmtBool(it.Mismatch) != fmtBool(a.Mismatch) {
			t.Errorf("%s: %s mismatch %s, the admin sees %s", where, it.Name, fmtBool(it.Mismatch), fmtBool(a.Mismatch))
		}
		if it.Expected == nil && (it.Fix != "" || it.Mismatch != nil || len(it.Needs) == 0) {
			t.Errorf("%s: %s unknown, yet fix %q mismatch %s needs %q", where, it.Name, it.Fix, fmtBool(it.Mismatch), it.Needs)
		}
		if it.AmbientCapture == injection.EffectUnknown && a.AmbientCapture != injection.EffectUnknown {
			// Whether ambient mode captures it is unknown: no fix rests on it.
			if it.Fix != "" || len(it.Needs) == 0 {
				t.Errorf("%s: %s ambient capture unknown, yet fix %q needs %q", where, it.Name, it.Fix, it.Needs)
			}
		} else if it.Expected != nil && it.Fix != a.Fix {
			t.Errorf("%s: %s fix %q, the admin's %q", where, it.Name, it.Fix, a.Fix)
		}
		return 1
	}
	if it.Namespace == "" || strings.HasPrefix(it.Namespace, "perm-") {
		t.Errorf("%s: %s/%s is not in the admin's answer", where, it.Namespace, it.Name)
	}
	return 0
}

// checkNoContradiction: no row shows a value or an effect for what could not be read.
func checkNoContradiction(t *testing.T, where string, it injection.InjectionReport) int {
	t.Helper()
	rows := map[string]injection.Factor{}
	for _, f := range it.Factors {
		rows[f.Factor] = f
	}
	if f, ok := rows["mutating webhooks"]; ok && f.Effect == injection.EffectUnknown {
		for _, g := range it.Factors {
			if strings.HasPrefix(g.Factor, "webhook ") || strings.Contains(g.Factor, " label ") && g.Effect != injection.EffectUnknown && g.Effect != injection.EffectInfoOnly {
				t.Errorf("%s: %s: webhooks unknown, yet row %q says %q (%s)", where, it.Name, g.Factor, g.Effect, g.Source)
			}
		}
	}
	if f, ok := rows["namespace labels"]; ok && f.Effect == injection.EffectUnknown {
		for _, g := range it.Factors {
			if strings.HasPrefix(g.Factor, "namespace label ") {
				t.Errorf("%s: %s: namespace labels unknown, yet row %q = %q", where, it.Name, g.Factor, g.Value)
			}
		}
	}
	return 1
}

func countRules(d captureDoc) int {
	n := 0
	for _, dump := range d.Dumps {
		for _, t := range dump.Tables {
			for _, c := range t.Chains {
				n += len(c.Rules)
			}
		}
	}
	return n
}

var refusedRE = regexp.MustCompile(`not allowed to ([a-z]+ [a-z/.]+)|may not ([a-z]+ [a-z/.]+)|cannot ([a-z]+) resource "([a-z/]+)"`)

// refusedNeed names the permission a refusal asks for.
func refusedNeed(stderr string) string {
	m := refusedRE.FindStringSubmatch(stderr)
	switch {
	case m == nil:
		return "?"
	case m[1] != "":
		return "needs " + m[1]
	case m[2] != "":
		return "needs " + m[2]
	default:
		return "needs " + m[3] + " " + m[4]
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// abbrev shortens API group suffixes for docs/permissions.md's table (the user is told them in full).
func abbrev(s string) string {
	return strings.NewReplacer(".admissionregistration.k8s.io", "", ".discovery.k8s.io", "", ".apps", "").Replace(s)
}
