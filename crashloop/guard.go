package crashloop

import "time"

// Guard detects crash loops independently of their period: dirty deaths whose
// gaps are each at most MaxGap form a chain, and a chain of Trip deaths opens
// the guard. While the guard is open the process is still relaunched (fail
// open for the process) but automatic resumes are held (fail closed for
// turns). A 150 s loop of "wedged, watchdog kill, relaunch, resume" chains
// exactly like a 10 s one, which a fixed window would miss.
//
// The defaults follow hermes-agent's restart-loop guard: three deaths with
// gaps of at most five minutes.
type Guard struct {
	MaxGap time.Duration
	// Trip is the chain length that opens the guard; 0 disables the guard.
	Trip int
}

// DefaultGuard returns the documented defaults: trip at 3, gaps up to 5m
// (the run flags' defaults).
func DefaultGuard() Guard { return Guard{MaxGap: 5 * time.Minute, Trip: 3} }

// GuardState is the guard's memory. It must be journaled before the
// supervisor acts on it, so that a kill -9 of the supervisor cannot reset it.
type GuardState struct {
	// Chain counts the dirty deaths in the current chain.
	Chain int `json:"chain"`
	// Last is when the last death of the chain happened.
	Last time.Time `json:"last"`
	// Open is true while automatic resumes are held.
	Open bool `json:"open"`
}

// Death records a dirty death at time at and returns the new state.
func (g Guard) Death(s GuardState, at time.Time) GuardState {
	if g.Trip <= 0 {
		return GuardState{}
	}
	if s.Chain > 0 && !at.Before(s.Last) && at.Sub(s.Last) <= g.MaxGap {
		s.Chain++
	} else {
		s.Chain = 1
	}
	s.Last = at
	if s.Chain >= g.Trip {
		s.Open = true
	}
	return s
}

// Healthy records proof that the agent works again (a completed turn, or a
// run that outlived MaxGap) and returns the cleared state.
func (g Guard) Healthy(GuardState) GuardState { return GuardState{} }

// Proven reports whether a run that started at started has, by now, lived
// long enough to clear the guard on its own: past MaxGap no later death can
// chain to the earlier ones anyway.
func (g Guard) Proven(started, now time.Time) bool {
	return g.Trip > 0 && now.Sub(started) > g.MaxGap
}
