package resume

import (
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/record"
)

func TestBreakerParkIsMarked(t *testing.T) {
	p := DefaultPolicy()
	d := Decide([]record.Session{sess(record.InTurn, 1)}, kill9, now, p)[0]
	if d.Action != Park || d.Session.ParkedBy != record.ParkedByBreaker {
		t.Fatalf("breaker park: %v parked_by %q", d.Action, d.Session.ParkedBy)
	}
	stale := sess(record.InTurn, 0)
	stale.TurnStarted = now.Add(-2 * p.MaxAge)
	for name, c := range map[string]struct {
		s  record.Session
		by string
	}{"waiting": {sess(record.Waiting, 0), record.ParkedByWait}, "stale": {stale, record.ParkedByStale}} {
		s := c.s
		s.ParkedBy = record.ParkedByBreaker // left over from an earlier park
		d := Decide([]record.Session{s}, kill9, now, p)[0]
		if d.Action != Park || d.Session.ParkedBy != c.by {
			t.Errorf("%s park: %v parked_by %q, want a park not marked as the breaker's", name, d.Action, d.Session.ParkedBy)
		}
	}
}

func TestLift(t *testing.T) {
	parked := sess(record.Parked, 2)
	parked.ParkedBy = record.ParkedByBreaker
	parked.Fingerprint = &record.Fingerprint{Sum: "aaa"}
	if Liftable(parked, "aaa") {
		t.Error("liftable under the same fingerprint")
	}
	if Liftable(parked, "") {
		t.Error("liftable without a current fingerprint")
	}
	if !Liftable(parked, "bbb") {
		t.Fatal("not liftable under a changed fingerprint")
	}
	for name, s := range map[string]record.Session{
		"waiting park":   func() record.Session { s := parked; s.ParkedBy = ""; return s }(),
		"no fingerprint": func() record.Session { s := parked; s.Fingerprint = nil; return s }(),
		"not parked":     func() record.Session { s := parked; s.State = record.ResumePending; return s }(),
	} {
		if Liftable(s, "bbb") {
			t.Errorf("%s: liftable", name)
		}
	}
	for _, limit := range []int{1, 3} {
		p := Policy{Limit: limit}
		got := Lift(parked, now, p)
		if got.State != record.ResumePending || got.CrashCount != limit-1 || got.Reason != LiftReason {
			t.Errorf("limit %d: lifted to %s crash_count %d reason %q", limit, got.State, got.CrashCount, got.Reason)
		}
		if got.Resume == nil || got.Resume.Manual || !strings.Contains(got.Resume.Message, "rename the package") {
			t.Errorf("limit %d: resume %+v", limit, got.Resume)
		}
		if Liftable(got, "ccc") || got.Fingerprint != nil {
			t.Errorf("limit %d: a lifted session can lift again", limit)
		}
		// The lifted resume handed to a run that dies: counted from
		// limit-1, so one more death resumes and the next parks.
		got.Resume.Run = 7
		d := Decide([]record.Session{got}, kill9, now, p)[0]
		if d.Action != Resume || d.Session.CrashCount != limit {
			t.Errorf("limit %d: first death after the lift: %v crash_count %d", limit, d.Action, d.Session.CrashCount)
		}
		d.Session.Resume.Run = 8
		d = Decide([]record.Session{d.Session}, Death{Reason: kill9.Reason, Signal: 9, Run: 8, At: now}, now, p)[0]
		if d.Action != Park || d.Session.ParkedBy != record.ParkedByBreaker {
			t.Errorf("limit %d: second death after the lift: %v parked_by %q", limit, d.Action, d.Session.ParkedBy)
		}
	}
}
