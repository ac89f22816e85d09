package supervisor

import (
	"fmt"
	"testing"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Settled, committed sessions are evicted once too many are held; open
// and uncommitted ones stay, and an evicted one reloads from the journal.
func TestEvictSettled(t *testing.T) {
	s := newTestSupervisor(t)
	if err := s.db.Update(func(tx *journal.Tx) error {
		return tx.PutSession(record.Session{ID: "old", State: record.Idle, Turn: "t9"})
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < machine.KeptSettled+5; i++ {
		id := fmt.Sprintf("s%d", i)
		s.m.Sessions[id] = &record.Session{ID: id, State: record.Closed}
	}
	s.m.Sessions["open"] = &record.Session{ID: "open", State: record.InTurn}
	s.m.Sessions["dirty"] = &record.Session{ID: "dirty", State: record.Idle}
	s.cs.dirty["dirty"] = true
	s.evictSettled()
	if _, ok := s.m.Sessions["open"]; !ok {
		t.Error("an open session was evicted")
	}
	if _, ok := s.m.Sessions["dirty"]; !ok {
		t.Error("a session with an uncommitted change was evicted")
	}
	if len(s.m.Sessions) != 2 {
		t.Errorf("%d sessions left, want the open and the dirty one", len(s.m.Sessions))
	}
	s.take(inMsg{Message: marker.Message{PID: 100, Session: "old"}})
	if sess := s.m.Sessions["old"]; sess == nil || sess.Turn != "t9" {
		t.Errorf("an evicted session did not reload from the journal: %+v", sess)
	}
	// The sessions of a batch in flight stay (a failed commit re-queues
	// them by id); the others go, so a busy writer cannot block eviction.
	for i := 0; i < machine.KeptSettled+5; i++ {
		id := fmt.Sprintf("s%d", i)
		s.m.Sessions[id] = &record.Session{ID: id, State: record.Closed}
	}
	s.cs.inflight = &batch{sessions: []record.Session{{ID: "s1", State: record.Closed}}}
	s.evictSettled()
	if _, ok := s.m.Sessions["s1"]; !ok {
		t.Error("a session of the batch in flight was evicted")
	}
	if len(s.m.Sessions) > 10 {
		t.Errorf("%d sessions held while a batch was in flight, want the settled ones evicted", len(s.m.Sessions))
	}
	s.cs.inflight = nil
}
