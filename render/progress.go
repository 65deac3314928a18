package render

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress is a one-line counter on a terminal's stderr for long
// operations: "what: done/total, rate/s, about N s left". It shows only on
// a terminal, and only once the operation has run for a while (a quick one
// prints nothing); Finish clears it.
type Progress struct {
	mu          sync.Mutex
	out         io.Writer
	what        string
	done, total int
	start, last time.Time
	shown       bool
}

// progressAfter is how long an operation runs before it shows a line.
const progressAfter = 1500 * time.Millisecond

// NewProgress counts total steps of what on w (nothing unless w is a terminal).
func NewProgress(w io.Writer, what string, total int) *Progress {
	pr := &Progress{what: what, total: total, start: time.Now()}
	if IsTerminal(w) {
		pr.out = w
	}
	return pr
}

// Add counts n steps done.
func (pr *Progress) Add(n int) {
	if pr == nil || pr.out == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.done += n
	now := time.Now()
	if now.Sub(pr.start) < progressAfter || now.Sub(pr.last) < 100*time.Millisecond && pr.done < pr.total {
		return
	}
	pr.last, pr.shown = now, true
	fmt.Fprintf(pr.out, "\r%s", ProgressLine(pr.what, pr.done, pr.total, now.Sub(pr.start)))
}

// Finish clears the line.
func (pr *Progress) Finish() {
	if pr == nil || pr.out == nil {
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.shown {
		fmt.Fprintf(pr.out, "\r%s\r", strings.Repeat(" ", 72))
	}
}

// ProgressLine is the line: done/total, the rate, and the time left at it.
func ProgressLine(what string, done, total int, took time.Duration) string {
	line := fmt.Sprintf("%s: %d/%d", what, done, total)
	if s := took.Seconds(); s > 0 && done > 0 {
		rate := float64(done) / s
		line += fmt.Sprintf(", %.0f/s", rate)
		if left := total - done; left > 0 {
			line += fmt.Sprintf(", about %s left", time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second))
		}
	}
	return line
}
