package supervisor

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/supervisor/machine"
)

// In task mode the agent's stderr passes through a pipe on its way to
// supervise's own, and supervise keeps its last few KiB: a one-shot CLI
// that exits at once says why there ("No conversation found with session
// ID ..."), and the death's log, the park reason and the lost-conversation
// rule quote it. Outside task mode the agent inherits supervise's stderr
// (an interactive agent keeps its terminal).

// tailMax bounds what is kept of the agent's stderr.
const tailMax = 4096

// tailSettle bounds the wait, after the death, for the pipe to drain: a
// survivor of the tree that holds it open (the sweep kills the rest) must
// not hold up the loop.
const tailSettle = 2 * time.Second

// stderrTail copies one run's stderr pipe through and keeps its tail.
type stderrTail struct {
	mu   sync.Mutex
	buf  []byte
	done chan struct{} // closed at the pipe's end (every writer gone)
}

// startTail returns the write end to hand to the child, and the tail
// reading the other end into dst (nil: os.Stderr).
func startTail(dst *os.File) (*os.File, *stderrTail, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if dst == nil {
		dst = os.Stderr
	}
	t := &stderrTail{done: make(chan struct{})}
	go t.copy(r, dst)
	return w, t, nil
}

func (t *stderrTail) copy(r, dst *os.File) {
	defer close(t.done)
	defer r.Close()
	b := make([]byte, 16<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			dst.Write(b[:n]) // best effort: the agent's output is not supervise's to lose sleep over
			t.mu.Lock()
			t.buf = append(t.buf, b[:n]...)
			if len(t.buf) > tailMax {
				t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
			}
			t.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// said waits (bounded) for the pipe to end and returns the telling line
// of the tail: one that says a conversation is lost, else the last that
// reads as an error, else the last non-empty one.
func (t *stderrTail) said() string {
	if t == nil {
		return ""
	}
	timer := time.NewTimer(tailSettle) // a bound on I/O, not a rule: real time
	select {
	case <-t.done:
	case <-timer.C:
	}
	timer.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	return tellingLine(t.buf)
}

// tellingLine picks the line of an agent's stderr tail that says most,
// cleaned to one bounded line of printable text.
func tellingLine(tail []byte) string {
	var last, errLine string
	for _, raw := range bytes.Split(tail, []byte("\n")) {
		line := cleanLine(raw)
		if line == "" || backtraceLine(line) {
			continue
		}
		if machine.LostConversation(line) {
			return line
		}
		last = line
		if strings.Contains(strings.ToLower(line), "error") {
			errLine = line
		}
	}
	if errLine != "" {
		return errLine
	}
	return last
}

// backtraceLine: a frame of a stack dump ("  3: <unknown>", "at f (x.js:1)").
func backtraceLine(l string) bool {
	if strings.HasPrefix(l, "at ") || l == "Stack backtrace:" {
		return true
	}
	i := strings.IndexByte(l, ':')
	return i > 0 && strings.Trim(l[:i], "0123456789") == ""
}

// cleanLine drops terminal escapes and control bytes, trims, and bounds.
func cleanLine(raw []byte) string {
	var b strings.Builder
	s := string(raw)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b: // ESC [ ... final byte
			i += n
			if i < len(s) && s[i] == '[' {
				i++
				for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
					i++
				}
				i++
			}
			continue
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0x7f:
		default:
			b.WriteRune(r)
		}
		i += n
	}
	out := strings.TrimSpace(b.String())
	if len(out) > 300 {
		cut := 300
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "..."
	}
	return out
}
