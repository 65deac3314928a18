package cmd

import (
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// hostile is text a cluster object or a dump could carry (an event message,
// a webhook's denial, a chain name): a screen clear, the alternate screen, a
// window-title OSC, a hyperlink OSC, a blink SGR we never emit, a C1 CSI,
// a bell, a backspace and a carriage return.
const hostile = "x\x1b[2J\x1b[?1049h\x1b]0;pwned\x07\x1b]8;;http://evil/\x1b\\link\x1b[5m\u009b31m\b\rEND"

// ourSGR is the only escape sequence human output may contain: the colours
// and bold of the printer (lipgloss), with colour on.
var ourSGR = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// fillHostile sets every string reachable from v to hostile, every slice to
// two elements, every map to one entry, every pointer to a value: each field
// a renderer could print holds the payload.
func fillHostile(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillHostile(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 23, 6, 0, 0, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				fillHostile(f, depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fillHostile(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		fillHostile(k, depth+1)
		fillHostile(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(hostile)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeOf(time.Duration(0)) {
			v.SetInt(int64(3 * time.Second))
		} else {
			v.SetInt(1)
		}
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	}
}

// checkNoControl fails when out holds a control character other than a
// newline, or an escape sequence other than the printer's own colours.
func checkNoControl(t *testing.T, what, out string) {
	t.Helper()
	if rawControl(t, what, out) {
		return
	}
	if !strings.Contains(out, `\x1b[2J`) {
		t.Errorf("%s: the hostile text is not shown escaped", what)
	}
}

// Every human renderer, colour forced on, given reports whose every string
// field is hostile: nothing reaches the terminal unescaped (and nothing panics).
func TestRenderersEscapeHostileText(t *testing.T) {
	views := map[string]func(p *render.Printer){}

	var ir injection.InjectionReport
	fillHostile(reflect.ValueOf(&ir).Elem(), 0)
	ir2 := ir
	ir2.Kind = "Pod"
	views["why-injected (one pod)"] = func(p *render.Printer) {
		r := ir
		render.Sanitize(&r)
		render.FactorTable(p, &r, true)
	}
	views["why-injected (rows)"] = func(p *render.Printer) {
		a, b := ir, ir2
		render.Sanitize(&a)
		render.Sanitize(&b)
		if err := printPodRows(p, []*injection.InjectionReport{&a, &b}, &injection.ClusterFacts{}); err != nil {
			t.Fatal(err)
		}
	}

	var sr startup.StartupReport
	fillHostile(reflect.ValueOf(&sr).Elem(), 0)
	views["startup (one pod)"] = func(p *render.Printer) {
		r := sr
		render.Sanitize(&r)
		render.Startup(p, &r)
	}
	views["startup (rows)"] = func(p *render.Printer) {
		r := sr
		render.Sanitize(&r)
		render.StartupRows(p, []*startup.StartupReport{&r}, []*diagnose.Diagnosis{{Status: diagnose.Fail, First: diagnose.CheckInit, Code: "KM-INIT-003"}})
	}

	var cr capture.CaptureReport
	fillHostile(reflect.ValueOf(&cr).Elem(), 0)
	views["iptables"] = func(p *render.Printer) {
		r := cr
		render.Sanitize(&r)
		render.Capture(p, &r)
	}

	for name, fn := range views {
		var out bytes.Buffer
		fn(&render.Printer{Out: &out, Color: true})
		if !ourSGR.MatchString(out.String()) {
			t.Errorf("%s: colour was forced on, yet the output has no colour", name)
		}
		checkNoControl(t, name, out.String())
	}

	var errOut bytes.Buffer
	exitCode(errors.New("admission webhook denied the request: "+hostile+"\nsecond line"), &errOut)
	checkNoControl(t, "error text", errOut.String())
	if !strings.Contains(errOut.String(), "\nsecond line") {
		t.Errorf("an error's own line breaks are kept: %q", errOut.String())
	}
}

// rawControl reports (and fails on) a control character in out other than a
// newline or the printer's own colour sequences.
func rawControl(t *testing.T, what, out string) bool {
	t.Helper()
	rest := ourSGR.ReplaceAllString(out, "")
	for i, r := range rest {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			lo := max(0, i-40)
			t.Errorf("%s: raw control character %U in the output near %q", what, r, rest[lo:min(len(rest), i+40)])
			return true
		}
	}
	return false
}
