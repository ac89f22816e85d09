package supervisor

import (
	"os"
	"sync"
	"time"

	"github.com/supervise-dev/supervise/profile"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// In task mode the agent's stderr passes through a pipe on its way to
// supervise's own, and supervise keeps its last few KiB: a one-shot CLI
// that exits at once says why there ("No conversation found with session
// ID ..."), and the death's log, the park reason and the lost-conversation
// rule quote it. Outside task mode the agent inherits supervise's stderr
// (an interactive agent keeps its terminal).

// tailMax bounds what is kept of the agent's stderr: room for a limit's
// words after the records and the stack dump the CLIs print around them
// (Gemini CLI's run to 2.5 KiB, Codex logs a WARN record per model call).
const tailMax = 16 << 10

// tailSettle bounds the wait, after the death, for the pipe to drain: a
// survivor of the tree that holds it open (the sweep kills the rest) must
// not hold up the loop.
const tailSettle = 2 * time.Second

// stderrTail copies one run's stderr pipe through and keeps its tail.
type stderrTail struct {
	lines *lines  // the lines kept in the state dir (agentlog.go); nil: none
	frame *framer // frames the lines written to dst (frame.go); nil: raw
	mu    sync.Mutex
	buf   []byte
	n     int64         // bytes seen in all
	done  chan struct{} // closed at the pipe's end (every writer gone)
}

// startTail returns the write end to hand to the child, and the tail
// reading the other end into dst (nil: os.Stderr).
func startTail(dst *os.File, keep *lines, frame *framer) (*os.File, *stderrTail, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if dst == nil {
		dst = os.Stderr
	}
	t := &stderrTail{done: make(chan struct{}), lines: keep, frame: frame}
	go t.copy(r, dst)
	return w, t, nil
}

func (t *stderrTail) copy(r, dst *os.File) {
	defer close(t.done)
	defer r.Close()
	defer t.lines.end()
	if t.frame != nil {
		defer t.frame.flush(dst)
	}
	b := make([]byte, 16<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			// Best effort: the agent's output is not supervise's to lose
			// sleep over.
			if t.frame != nil {
				t.frame.write(dst, b[:n])
			} else {
				dst.Write(b[:n])
			}
			t.lines.add(b[:n])
			t.mu.Lock()
			t.buf = append(t.buf, b[:n]...)
			t.n += int64(n)
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

// settle waits (bounded) for the pipe to end.
func (t *stderrTail) settle() {
	timer := time.NewTimer(tailSettle) // a bound on I/O, not a rule: real time
	select {
	case <-t.done:
	case <-timer.C:
	}
	timer.Stop()
}

// said waits (bounded) for the pipe to end and returns the telling line
// of the tail: one that says a conversation is lost, else the headline of
// a limit that ended the run, else the last that reads as an error, else
// the last non-empty one; never a log record that is not an error, nor a
// CLI's known chatter (profile.TellingLine).
func (t *stderrTail) said(cli profile.CLI) string {
	if t == nil {
		return ""
	}
	t.settle()
	t.mu.Lock()
	defer t.mu.Unlock()
	return profile.TellingLine(t.buf, cli, profile.LostConversation)
}

// limit waits (bounded) for the pipe to end and reports whether the tail
// says a usage or rate limit ended the run, and its reset if it names one
// (profile.LimitOf; cli from the agent's argv[0], now the death's time).
func (t *stderrTail) limit(cli profile.CLI, now time.Time) (profile.Limit, bool) {
	if t == nil {
		return profile.Limit{}, false
	}
	t.settle()
	t.mu.Lock()
	defer t.mu.Unlock()
	return profile.LimitOf(t.buf, cli, now)
}

// lastLimit reads the limit a run ended on from its stdout and stderr
// tails (task mode), nil when neither says one: the CLI is named by the
// run's argv[0].
func (s *Supervisor) lastLimit(now time.Time) *machine.Limit {
	cli := s.agentCLI()
	for _, t := range []*stderrTail{s.run.tail, s.run.outTail} {
		if l, ok := t.limit(cli, now); ok {
			return &machine.Limit{Reset: l.Reset, Line: l.Line, Usage: l.Usage}
		}
	}
	return nil
}

// outputSigns is what the silence deadline reads of the run's kept output
// at a flush: the bytes written so far, and until when the CLI's words say
// it waits out a limit itself (zero: they do not), measured from when the
// output last grew.
func (s *Supervisor) outputSigns(now time.Time) (int64, time.Time) {
	n := s.run.tail.written() + s.run.outTail.written()
	if n != s.run.written || s.run.grew.IsZero() {
		s.run.written, s.run.grew = n, now
	}
	until, ok := s.run.tail.retrying(s.agentCLI(), s.run.grew)
	if !ok {
		until = time.Time{}
	}
	return n, until
}

// retrying reports, without waiting, whether the agent's stderr so far
// ends with the CLI waiting to retry a refused request itself, and until
// when (profile.Retrying; since: when the tail last grew, or now). For
// the start and silence deadlines: such a CLI is waiting out a limit, not
// hung.
func (t *stderrTail) retrying(cli profile.CLI, since time.Time) (time.Time, bool) {
	if t == nil {
		return time.Time{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return profile.Retrying(t.buf, cli, since)
}

// written is how many bytes the agent has written to stderr so far: the
// silence deadline's "no stream bytes" is no change in it between two
// looks (no clock in the tail).
func (t *stderrTail) written() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// agentCLI is the CLI the current run's argv[0] names (profile.Unknown
// for another agent): its words and chatter are read by its table.
func (s *Supervisor) agentCLI() profile.CLI {
	if argv := s.m.Run.Argv; len(argv) > 0 {
		return profile.CLIOf(argv[0])
	}
	return profile.Unknown
}
