package supervisor

import (
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// evictSettled drops settled sessions whose last change is committed, once
// more than machine.KeptSettled are held.
func (s *Supervisor) evictSettled() {
	if len(s.m.Sessions) <= machine.KeptSettled {
		return
	}
	// The batch in flight may be re-queued by id (a failed commit), so its
	// sessions must still be here then; a batch waiting to be retried is
	// in dirty already.
	busy := map[string]bool{}
	if b := s.cs.inflight; b != nil {
		for _, x := range b.sessions {
			busy[x.ID] = true
		}
	}
	s.step(machine.Evict{Keep: machine.KeptSettled, Busy: func(id string) bool { return s.cs.dirty[id] || busy[id] }})
}

// take applies a datagram handed to the loop, unless it came from a tree
// that died after the datagram was accepted: the death was decided without
// it, and the next run must not be charged with it. Fences (supervise's own
// datagrams) are the caller's.
func (s *Supervisor) take(x inMsg) {
	now := s.clock.Now()
	if x.run != 0 && !s.current(x.run) {
		s.lateLogs.debug(s.log, now, "notify: dropped a datagram from a run that has died", "run", x.run, "pid", x.PID)
		closeBare(x.Message)
		return
	}
	ev := machine.Marker{Msg: x.Message}
	if id := x.Session; id != "" && !x.Barrier && !s.m.Held(id) {
		ev.Stored = s.stored(id)
	}
	if s.cs.failing != nil {
		ev.Failing = s.cs.failing.Error()
	}
	s.step(ev)
	if x.Barrier {
		s.barrier(x.Message)
	}
}

// stored returns session id as the journal holds it, nil when it does not.
func (s *Supervisor) stored(id string) *record.Session {
	var sess record.Session
	var found bool
	err := s.db.View(func(tx *journal.Tx) (err error) {
		sess, found, err = tx.Session(id)
		return err
	})
	if err != nil {
		s.log.Error("journal: reading a session failed", "session", id, "err", err)
	}
	if !found {
		return nil
	}
	return &sess
}

// flushBeats hands the heartbeats gathered by intake to the machine; the
// next batch commits them (at most about once a second).
func (s *Supervisor) flushBeats() {
	ev := machine.Beats{Sessions: s.in.take()}
	for id := range ev.Sessions {
		if !s.m.Held(id) {
			if sess := s.stored(id); sess != nil {
				if ev.Stored == nil {
					ev.Stored = map[string]record.Session{}
				}
				ev.Stored[id] = *sess
			}
		}
	}
	if s.m.Run.Run != 0 && s.in.pings.Load() > s.run.pingsAtLaunch {
		ev.Ping = s.in.lastPingTime()
	}
	if len(ev.Sessions) == 0 && ev.Ping.IsZero() {
		return
	}
	s.step(ev)
}
