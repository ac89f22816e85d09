package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// The seams between supervise's own deaths, the agent's and the agent's
// words (issue 43): supervise's death is not the agent's, and the words
// only delay.

// reboot is supervise killed with -9 and started again: a new machine
// booted from what the journal holds (the sessions, the guard and the
// backoff as committed) and the run it left behind, as the runner hands
// it over: a run it had launched (orphan), or one it had reserved and
// never launched (PID 0).
func (r *rig) reboot(orphan *record.Run) []Effect {
	r.t.Helper()
	var sessions []record.Session
	for _, id := range sortedKeys(r.m.Sessions) {
		sessions = append(sessions, cloneSession(*r.m.Sessions[id]))
	}
	next := r.m.nextRun
	if orphan != nil && orphan.PID == 0 {
		next = orphan.Run
	}
	guard, backoff := r.m.Guard, r.m.Backoff
	r.m = New(r.m.Config)
	return r.step(Booted{NextRun: next, Sessions: sessions, Orphan: orphan, Guard: guard, Backoff: backoff})
}

// reserved is the run a supervise killed between runs leaves: reserved
// before its fork, never recorded as launched.
func (r *rig) reserved() *record.Run {
	return &record.Run{Run: r.m.nextRun, Started: r.now, Ended: r.now, ExitCode: -1,
		Reason: record.ReasonSupervisorDied, Dirty: true}
}

// Three kill -9 of supervise during a task's limit wait, each followed by
// the same command: no run that never started is a death, the guard never
// opens, and at the reset the session is resumed and the task ends 0.
// Before: each restart's reservation became a dirty supervisor-died death,
// the third opened the guard, and the task ended 5 with the resume held.
func TestSupervisorDeathsDuringLimitWait(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("s1", "t1")
	reset := r.now.Add(41 * time.Second)
	r.limited(reset, 0)
	retryAt := r.sess("s1").RetryAt
	for i := range 3 {
		r.advance(5 * time.Second)
		fx := r.reboot(r.reserved())
		if c, _ := find[Commit](fx); c.Orphan != nil {
			t.Fatalf("restart %d: the reserved run that never started is journaled as a death: %+v", i+1, *c.Orphan)
		}
		fx = r.step(LaunchDue{})
		if _, ok := find[Launch](fx); ok {
			t.Fatalf("restart %d: launched before the reset: %#v", i+1, fx)
		}
		if b, ok := find[Backoff](fx); !ok || b.Delay != retryAt.Sub(r.now) {
			t.Fatalf("restart %d: %#v, want the wait until %s", i+1, fx, retryAt)
		}
		if r.m.Guard.Chain != 0 || r.m.Guard.Open {
			t.Fatalf("restart %d: the guard counted supervise's death: %+v", i+1, r.m.Guard)
		}
	}
	r.now = retryAt
	l := r.launch()
	if len(l.IDs) != 1 || l.IDs[0] != "s1" || !l.Task {
		t.Fatalf("at the reset: %+v, want s1 resumed by --resume-exec", l)
	}
	r.marker(marker.Message{Session: "s1", Event: marker.EventResumed})
	r.end("s1", "t1", marker.OutcomeCompleted)
	fx := r.die(time.Second, 0, 0)
	if n := nextOf(t, fx); !n.end || n.code != ExitOK {
		t.Fatalf("after the resumed turn completed: %+v, want the end with 0", n)
	}
}

// Supervise's own death while the agent ran is decided for the sessions in
// the run (resumed once), but never chains in the agent's crash-loop
// guard, however often.
func TestSupervisorDeathsNeverOpenTheGuard(t *testing.T) {
	cfg := testConfig()
	cfg.Resume.Limit = 10
	r := newRig(t, cfg)
	for i := range 5 {
		r.launch()
		if i == 0 {
			r.begin("s1", "t1")
		} else {
			r.marker(marker.Message{Session: "s1", Event: marker.EventResumed})
		}
		r.advance(time.Second)
		orphan := r.m.Run
		orphan.Ended, orphan.Reason, orphan.Dirty, orphan.ExitCode = r.now, record.ReasonSupervisorDied, true, -1
		r.reboot(&orphan)
		if r.m.Guard.Chain != 0 || r.m.Guard.Open {
			t.Fatalf("death %d of supervise chained in the guard: %+v", i+1, r.m.Guard)
		}
		if s := r.sess("s1"); s.State != record.ResumePending || s.CrashCount != i+1 {
			t.Fatalf("death %d: s1 %s crash count %d, want resume_pending at %d", i+1, s.State, s.CrashCount, i+1)
		}
	}
}

// A run reserved and recorded as handed a resume (the death's commit
// folds the delivery before the fork) may have forked: it is decided as a
// death for that session, fail closed, and still not chained in the guard.
func TestReservedRunHandedAResumeIsADeath(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.die(time.Minute, 128+sigKILL, sigKILL) // healthy: relaunched at once, s1's delivery folded into the death's commit
	if s := r.sess("s1"); s.Resume == nil || s.Resume.Run != r.m.nextRun {
		t.Fatalf("s1's delivery not folded for run %d: %+v", r.m.nextRun, s.Resume)
	}
	fx := r.reboot(r.reserved())
	if c, _ := find[Commit](fx); c.Orphan == nil {
		t.Fatal("a reserved run handed a resume is not decided as a death")
	}
	if s := r.sess("s1"); s.State != record.Parked || s.ParkedBy != record.ParkedByBreaker {
		t.Fatalf("s1 %s (%s), want parked by the breaker at its second death", s.State, s.ParkedBy)
	}
	if r.m.Guard.Chain != 1 {
		t.Fatalf("guard %+v: the agent's kill chains once, supervise's death not", r.m.Guard)
	}
}

// A retry_at the model API named (through the proxy) holds across a kill
// -9 of supervise: the resume is not delivered before it. Before: the
// orphan's decision made the session resume_pending and the first launch
// delivered it at once, 39 s early.
func TestRetryAtHoldsAcrossSupervisorDeath(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.step(Traffic{Kind: TrafficTurnBegin, Session: "s1", Turn: "p1"})
	retryAt := r.now.Add(45 * time.Second)
	r.step(Traffic{Kind: TrafficLimited, Session: "s1", RetryAt: retryAt})
	if s := r.sess("s1"); s.State != record.Waiting || !s.RetryAt.Equal(retryAt) {
		t.Fatalf("s1 %s retry_at %s, want waiting until %s", s.State, s.RetryAt, retryAt)
	}
	r.advance(6 * time.Second)
	orphan := r.m.Run
	orphan.Ended, orphan.Reason, orphan.Dirty, orphan.ExitCode = r.now, record.ReasonSupervisorDied, true, -1
	r.reboot(&orphan)
	fx := r.step(LaunchDue{})
	if l, ok := find[Launch](fx); ok {
		t.Fatalf("launched %v at %s, before retry_at %s", l.IDs, r.now, retryAt)
	}
	if b, ok := find[Backoff](fx); !ok || b.Delay != retryAt.Sub(r.now) {
		t.Fatalf("%#v, want the wait until retry_at", fx)
	}
	r.now = retryAt
	if l := r.launch(); len(l.IDs) != 1 || l.IDs[0] != "s1" {
		t.Fatalf("at retry_at: %+v, want s1 resumed", l)
	}
	// A person does not wait.
	r2 := newRig(t, taskConfig())
	r2.launch()
	r2.step(Traffic{Kind: TrafficTurnBegin, Session: "s1", Turn: "p1"})
	r2.step(Traffic{Kind: TrafficLimited, Session: "s1", RetryAt: r2.now.Add(time.Hour)})
	orphan = r2.m.Run
	orphan.Ended, orphan.Reason, orphan.Dirty = r2.now, record.ReasonSupervisorDied, true
	r2.reboot(&orphan)
	r2.step(ManualResume{ID: "s1"})
	if l := r2.launch(); len(l.IDs) != 1 {
		t.Fatalf("a person's resume waited for retry_at: %+v", l)
	}
}

// The agent's quota words at a death concern only the sessions mid-turn:
// a session waiting for a person is parked as without them, and the task
// ends 5. Before: the death became a limit for every session, the waiting
// one was left as it was, and the task ended 0.
func TestWordsAtDeathDoNotSkipAPark(t *testing.T) {
	for _, words := range []bool{false, true} {
		r := newRig(t, taskConfig())
		r.launch()
		r.begin("s1", "t1")
		r.marker(marker.Message{Session: "victim", Event: marker.EventWaiting, Turn: "t9", Wait: marker.WaitInput})
		e := Exited{PID: 1000 + int(r.run), Code: 1, Started: r.m.Run.Started, Ended: r.now}
		if words {
			e.Said = "Error: You have exhausted your capacity on this model. Please retry in 2s."
			e.Limit = &Limit{Reset: r.now.Add(2 * time.Second), Line: e.Said, Usage: true}
		}
		r.step(e)
		if s := r.sess("victim"); s.State != record.Parked || s.ParkedBy != record.ParkedByWait {
			t.Fatalf("words %v: victim %s (%s), want parked: was waiting for a person", words, s.State, s.ParkedBy)
		}
		if !words {
			continue
		}
		if s := r.sess("s1"); s.State != record.Waiting || s.Wait != record.WaitLimit {
			t.Fatalf("s1 %s %s, want waiting out the limit", s.State, s.Wait)
		}
		r.now = r.sess("s1").RetryAt
		r.launch()
		r.marker(marker.Message{Session: "s1", Event: marker.EventResumed})
		r.end("s1", "t1", marker.OutcomeCompleted)
		if n := nextOf(t, r.die(time.Second, 0, 0)); !n.end || n.code != ExitParked {
			t.Fatalf("the task's end: %+v, want 5: victim is parked", n)
		}
	}
	// Quota words with no session mid-turn change nothing: a dirty death,
	// counted and backed off.
	r := newRig(t, testConfig())
	r.launch()
	r.marker(marker.Message{Session: "victim", Event: marker.EventWaiting, Turn: "t9", Wait: marker.WaitApproval})
	r.step(Exited{PID: 1000 + int(r.run), Code: 1, Started: r.m.Run.Started, Ended: r.now,
		Limit: &Limit{Reset: r.now.Add(time.Hour), Line: "Please retry in 3600s."}})
	if r.m.Run.Reason == record.ReasonLimit || !r.m.Run.Dirty || r.sess("victim").State != record.Parked {
		t.Fatalf("run %s dirty %v, victim %s: want a dirty death that parks victim", r.m.Run.Reason, r.m.Run.Dirty, r.sess("victim").State)
	}
}

// A limit's reset the agent names is believed up to MaxWordsWait.
func TestWordsResetCapped(t *testing.T) {
	for _, far := range []time.Duration{30_000_000 * time.Second, 9_000_000_000 * time.Second} {
		r := newRig(t, taskConfig())
		r.launch()
		r.begin("s1", "t1")
		r.limited(r.now.Add(far), 0)
		if s := r.sess("s1"); s.RetryAt.After(r.now.Add(MaxWordsWait)) {
			t.Fatalf("a reset %s ahead waits until %s, past MaxWordsWait", far, s.RetryAt)
		}
	}
}

// A retry record naming 3e7 s or 9e9 s does not keep --silence-timeout
// from stopping a turn that hangs; one naming 90 s holds it off for 90 s.
func TestWordsRetryingCapped(t *testing.T) {
	for _, c := range []struct {
		wait  time.Duration
		abort bool
	}{
		{30_000_000 * time.Second, true},
		{9_000_000_000 * time.Second, true},
		{90 * time.Second, false},
	} {
		cfg := taskConfig()
		cfg.SilenceTimeout = 2 * time.Second
		r := newRig(t, cfg)
		r.launch()
		r.begin("s1", "t1")
		start := r.now
		for i := 1; i <= 12; i++ {
			r.flushAt(start.Add(time.Duration(i)*time.Second), 0, start.Add(c.wait))
		}
		if got := r.aborted() == record.ReasonSilence; got != c.abort {
			t.Errorf("a retry record naming %s: stopped for silence %v, want %v", c.wait, got, c.abort)
		}
	}
}
