package supervisor

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/resume"
)

func newTestSupervisor(t *testing.T) *Supervisor {
	t.Helper()
	return newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"}})
}

// Settled, committed sessions are evicted once too many are held; open
// and uncommitted ones stay, and an evicted one reloads from the journal.
func TestEvictSettled(t *testing.T) {
	s := newTestSupervisor(t)
	now := time.Now()
	if err := s.db.Update(func(tx *journal.Tx) error {
		return tx.PutSession(journal.Session{ID: "old", State: journal.Idle, Turn: "t9"})
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < keptSettled+5; i++ {
		id := fmt.Sprintf("s%d", i)
		s.sessions[id] = &journal.Session{ID: id, State: journal.Closed}
	}
	s.sessions["open"] = &journal.Session{ID: "open", State: journal.InTurn}
	s.sessions["dirty"] = &journal.Session{ID: "dirty", State: journal.Idle}
	s.markDirty("dirty")
	s.evictSettled()
	if _, ok := s.sessions["open"]; !ok {
		t.Error("an open session was evicted")
	}
	if _, ok := s.sessions["dirty"]; !ok {
		t.Error("a session with an uncommitted change was evicted")
	}
	if len(s.sessions) != 2 {
		t.Errorf("%d sessions left, want the open and the dirty one", len(s.sessions))
	}
	if sess := s.session("old", now); sess == nil || sess.Turn != "t9" {
		t.Errorf("an evicted session did not reload from the journal: %+v", sess)
	}
	// The sessions of a batch in flight stay (a failed commit re-queues
	// them by id); the others go, so a busy writer cannot block eviction.
	for i := 0; i < keptSettled+5; i++ {
		id := fmt.Sprintf("s%d", i)
		s.sessions[id] = &journal.Session{ID: id, State: journal.Closed}
	}
	s.cs.inflight = &batch{sessions: []journal.Session{{ID: "s1", State: journal.Closed}}}
	s.evictSettled()
	if _, ok := s.sessions["s1"]; !ok {
		t.Error("a session of the batch in flight was evicted")
	}
	if len(s.sessions) > 10 {
		t.Errorf("%d sessions held while a batch was in flight, want the settled ones evicted", len(s.sessions))
	}
	s.cs.inflight = nil
}

// A death that decides for thousands of sessions logs a bounded number of
// lines: maxDecisionLines one by one, then one summary with the counts.
func TestLogDecisionsBounded(t *testing.T) {
	s := newTestSupervisor(t)
	var buf bytes.Buffer
	s.log = slog.New(slog.NewTextHandler(&buf, nil))
	var decs []resume.Decision
	for i := range 3000 {
		decs = append(decs, resume.Decision{Action: resume.Park, Session: journal.Session{ID: fmt.Sprintf("s%d", i), State: journal.Parked}})
	}
	decs = append(decs, resume.Decision{Action: resume.Keep, Session: journal.Session{ID: "idle"}})
	s.logDecisions(decs)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != maxDecisionLines+1 {
		t.Fatalf("%d log lines for 3000 parks, want %d", len(lines), maxDecisionLines+1)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "parked=2980") || !strings.Contains(last, "logged=20") {
		t.Errorf("summary line = %s", last)
	}
}
