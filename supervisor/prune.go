package supervisor

import (
	"sync"
	"sync/atomic"
	"time"
)

// pruneEvery is how often settled sessions beyond --keep-sessions are
// pruned from the journal, and pruneBatch how many one transaction deletes.
const (
	pruneEvery = time.Minute
	pruneBatch = 1000
)

// pruner runs PruneSessions in the background, one pass at a time: the
// scan reads every session, which must not hold up the loop.
type pruner struct {
	running atomic.Bool
	last    time.Time // loop goroutine only
	wg      sync.WaitGroup
}

// maybePrune starts a pass when --keep-sessions is set, none is running
// and the last one started more than pruneEvery ago (or never).
func (s *Supervisor) maybePrune(now time.Time) {
	keep := s.cfg.KeepSessions
	if keep <= 0 || (!s.prune.last.IsZero() && now.Sub(s.prune.last) < pruneEvery) || !s.prune.running.CompareAndSwap(false, true) {
		return
	}
	s.prune.last = now
	s.prune.wg.Add(1)
	go func() {
		defer s.prune.wg.Done()
		defer s.prune.running.Store(false)
		start := time.Now()
		n, err := s.db.PruneSessions(keep, pruneBatch)
		switch {
		case err != nil:
			s.log.Error("journal: pruning settled sessions failed", "err", err, "pruned", n)
		case n > 0:
			s.log.Info("pruned settled sessions beyond --keep-sessions, oldest first", "pruned", n,
				"keep", keep, "took", time.Since(start).Round(time.Millisecond))
		}
	}()
}

// pruneWait waits for a pass in progress, before the journal closes.
func (s *Supervisor) pruneWait() { s.prune.wg.Wait() }
