package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// flushAt moves the clock to at and gives the once-a-second look.
func (r *rig) flushAt(at time.Time, written int64, retrying time.Time) []Effect {
	r.now = at
	return r.step(TimerFired{Timer: TimerFlush, Written: written, RetryingUntil: retrying})
}

// aborted reports the reason of the kill supervise started, "" for none.
func (r *rig) aborted() record.Reason {
	if r.m.Abort == nil {
		return ""
	}
	return r.m.Abort.Reason
}

// --start-timeout: no marker and no model request since the launch. The
// deadline is the launch plus D, to the flush; a marker before it, or
// model traffic, disarms it for the run.
func TestStartTimeout(t *testing.T) {
	cfg := taskConfig()
	cfg.StartTimeout = time.Minute
	r := newRig(t, cfg)
	r.launch()
	start := r.now
	r.flushAt(start.Add(59*time.Second), 100, time.Time{}) // output is no marker
	if r.aborted() != "" {
		t.Fatalf("aborted %q before --start-timeout", r.aborted())
	}
	fx := r.flushAt(start.Add(time.Minute), 100, time.Time{})
	if r.aborted() != record.ReasonStartTimeout {
		t.Fatalf("abort %q at --start-timeout, want start-timeout: %#v", r.aborted(), fx)
	}
	if _, ok := find[Signal](fx); !ok {
		t.Fatal("no stop signal")
	}
	fx = r.die(0, 143, 0)
	if r.m.Run.Reason != record.ReasonStartTimeout || !r.m.Run.Dirty {
		t.Fatalf("run %q dirty %v", r.m.Run.Reason, r.m.Run.Dirty)
	}
	if n := nextOf(t, fx); !n.relaunch {
		t.Fatalf("a task that hung at start with no session is not started again once: %+v", n)
	}
	r.launch()
	r.flushAt(r.now.Add(time.Minute), 0, time.Time{})
	fx = r.die(0, 143, 0)
	if n := nextOf(t, fx); !n.end {
		t.Fatalf("a second hang at start: %+v, want the end", n)
	}

	// A marker before the deadline: never a start timeout in that run.
	r = newRig(t, cfg)
	r.launch()
	r.advance(30 * time.Second)
	r.begin("s1", "t1")
	r.end("s1", "t1", marker.OutcomeCompleted)
	r.flushAt(r.now.Add(time.Hour), 0, time.Time{})
	if r.aborted() != "" {
		t.Fatalf("aborted %q after a marker", r.aborted())
	}
}

// --silence-timeout: an open turn with no marker, no model traffic and no
// output for D; output resets the clock; a wait for a person is not
// silence; a CLI that waits out a limit itself is not silent until then.
// The death is a hang: resumed once.
func TestSilenceTimeout(t *testing.T) {
	cfg := taskConfig()
	cfg.SilenceTimeout = time.Minute
	r := newRig(t, cfg)
	r.launch()
	r.begin("s1", "t1")
	t1 := r.now
	r.flushAt(t1.Add(50*time.Second), 10, time.Time{}) // output at +50 s
	r.flushAt(t1.Add(100*time.Second), 10, time.Time{})
	if r.aborted() != "" {
		t.Fatalf("aborted %q 50 s after output", r.aborted())
	}
	// The CLI says it waits out a limit until +20 min: not silent.
	until := t1.Add(20 * time.Minute)
	r.flushAt(t1.Add(109*time.Second), 10, until)
	r.flushAt(t1.Add(15*time.Minute), 10, until)
	if r.aborted() != "" {
		t.Fatalf("aborted %q while the CLI waits out a limit", r.aborted())
	}
	r.flushAt(until.Add(59*time.Second), 10, time.Time{})
	if r.aborted() != "" {
		t.Fatalf("aborted %q before --silence-timeout after the wait", r.aborted())
	}
	r.flushAt(until.Add(time.Minute), 10, time.Time{})
	if r.aborted() != record.ReasonSilence {
		t.Fatalf("abort %q, want silence-timeout", r.aborted())
	}
	r.die(0, 143, 0)
	if s := r.sess("s1"); s.State != record.ResumePending || s.CrashCount != 1 {
		t.Fatalf("session %+v, want resume_pending at crash count 1 (a hang, resumed once)", s)
	}

	// Waiting for a person: never silence.
	r = newRig(t, cfg)
	r.launch()
	r.begin("s1", "t1")
	r.marker(marker.Message{Session: "s1", Event: marker.EventWaiting, Turn: "t1", Wait: marker.WaitApproval})
	r.flushAt(r.now.Add(time.Hour), 0, time.Time{})
	if r.aborted() != "" {
		t.Fatalf("aborted %q while waiting for a person", r.aborted())
	}
}
