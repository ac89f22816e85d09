package resume

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// The breaker's advice follows the cause: two exits with status 1 and no
// words of why (Gemini's wrapper after a kill of its inner process) are
// not "the agent ended with its own error each time"; with error words
// they are.
func TestBreakerAdviceSilentExit(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := record.Session{ID: "s1", State: record.InTurn, CrashCount: 1, TurnStarted: now}
	for said, want := range map[string]string{
		"":                       "without a word of why",
		"Error: invalid API key": "its own error",
	} {
		d := Decide([]record.Session{s}, Death{Reason: record.ReasonExit, ExitCode: 1, Run: 2, At: now, Said: said}, now, DefaultPolicy())[0]
		if d.Action != Park || !strings.Contains(d.Session.Reason, want) {
			t.Errorf("said %q: %v %q, want a park saying %q", said, d.Action, d.Session.Reason, want)
		}
	}
}

// A limit: waiting with the continuation until the reset, counted apart
// from crashes; due at the reset; parked past the cap.
func TestLimited(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := record.Session{ID: "s1", State: record.InTurn, CrashCount: 1, TurnStarted: now}
	d := LimitDeath{Death: Death{Reason: record.ReasonLimit, Run: 1, At: now}, Reset: now.Add(time.Hour), Line: "429", Max: 1}
	dec, ok := Limited(s, d, now, DefaultPolicy())
	if !ok || dec.Session.State != record.Waiting || dec.Session.Wait != record.WaitLimit || dec.Session.CrashCount != 1 ||
		!dec.Session.RetryAt.Equal(d.Reset) || !strings.Contains(dec.Session.Resume.Message, "limit") {
		t.Fatalf("%v %+v", ok, dec.Session)
	}
	if _, due := LimitDue(dec.Session, now.Add(59*time.Minute)); due {
		t.Fatal("due before the reset")
	}
	r, due := LimitDue(dec.Session, d.Reset)
	if !due || r.State != record.ResumePending || r.Resume == nil {
		t.Fatalf("at the reset: %v %+v", due, r)
	}
	r.Resume.Run = 2
	d.Run = 2
	dec, _ = Limited(r, d, now, DefaultPolicy())
	if dec.Action != Park || dec.Session.ParkedBy != record.ParkedByLimit {
		t.Fatalf("past the cap: %+v", dec)
	}
	if _, ok := Limited(record.Session{ID: "s2", State: record.Idle}, d, now, DefaultPolicy()); ok {
		t.Fatal("an idle session waits out a limit")
	}
}
