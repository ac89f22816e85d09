package supervisor

import (
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/journal"
)

// A death is one commit: the heartbeats and session beats the agent sent
// since the last flush go into the death's own commit, before the next
// fork, rather than into a batch started first that the death's commit
// would have to wait for (two fdatasyncs more on every restart of an agent
// that pings).
func TestDeathIsOneCommit(t *testing.T) {
	s := newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"sleep", "60"}})
	r, err := child.NewReaper(s.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	s.reaper = r
	s.launch(s.prepare(t))
	p := s.run.proc
	if p == nil {
		t.Fatal("the child did not start")
	}
	for s.cs.inflight != nil {
		s.committed(<-s.cs.w.out)
	}
	run := s.m.Run.Run
	now := time.Now()        // after the child's start, as a real heartbeat is
	s.in.ping(now)           // a heartbeat since the last flush: the run record changes
	s.in.beat("sess-a", now) // a session's beat
	before := s.cs.commits
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the killed child was not reaped")
	}
	s.reaped()
	if got := s.cs.commits - before; got != 1 {
		t.Errorf("the death took %d commits, want 1 (the death's own, with the heartbeat in it)", got)
	}
	if s.cs.inflight != nil {
		t.Error("a batch is in flight after the death: the heartbeat was not in the death's commit")
	}
	var ping time.Time
	if err := s.db.View(func(tx *journal.Tx) error {
		r, ok, err := tx.Run(run)
		if !ok {
			t.Errorf("run %d is not in the journal", run)
		}
		ping = r.LastHeartbeat
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if ping.IsZero() {
		t.Error("the death's commit does not hold the run's last heartbeat")
	}
}
