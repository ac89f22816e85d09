package apiproxy

import (
	"strconv"
	"sync"
	"time"
)

const (
	// maxSessions bounds the sessions tracked at once. A new session
	// beyond it evicts the least recently seen one without an open turn;
	// when every tracked session has an open turn, the new session's
	// traffic passes through without turn events (its usage is sent).
	maxSessions = 1024
	// maxPending bounds the tool calls per session awaiting a result,
	// maxPendingAll those of all sessions together.
	maxPending    = 256
	maxPendingAll = 4096
	// maxAdmitted bounds the sessions one proxy (one run) takes into its
	// table over its life, re-admissions of evicted ones included: a run
	// that names more (a flood of fresh session ids) has the rest of its
	// traffic passed through without turn events, so that what it can make
	// supervise journal is bounded too. Usage is sent all the same.
	maxAdmitted = 4096
)

// phase is where an open turn is.
type phase int

const (
	phaseModel phase = iota
	phaseTool
	phaseWaiting
)

// session is one session's derived state.
type session struct {
	id      string
	turn    string // the open turn, "" for none
	named   bool   // the CLI named the open turn (Codex's turn_id)
	phase   phase
	n       int                 // turns opened so far (for turn ids)
	pending map[string]struct{} // tool calls of the session awaiting their results
	seen    uint64              // tracker.clock at the last request
}

// tracker turns requests and answers into events. Its methods are safe
// for concurrent use; events of one session are emitted in order, from
// under its lock (the sink must not block).
type tracker struct {
	mu       sync.Mutex
	sessions map[string]*session
	clock    uint64
	prefix   string // turn id prefix
	sink     func(Event)
	dropped  int  // requests of sessions beyond maxSessions or maxAdmitted
	admitted int  // sessions taken into the table so far
	pending  int  // tool calls awaiting results, all sessions
	closed   bool // no more events
	warn     func(msg string, args ...any)
}

// close makes every later event a no-op; it returns once no event is
// being delivered.
func (t *tracker) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

func newTracker(prefix string, sink func(Event)) *tracker {
	return &tracker{sessions: map[string]*session{}, prefix: prefix, sink: sink}
}

// get returns the session id's state, creating it; nil when the table is
// full of sessions with open turns.
func (t *tracker) get(id string) *session {
	t.clock++
	if s, ok := t.sessions[id]; ok {
		s.seen = t.clock
		return s
	}
	if t.admitted >= maxAdmitted {
		t.dropped++
		t.warnf("api proxy: this run named too many sessions: the traffic of new ones passes without events",
			"limit", maxAdmitted)
		return nil
	}
	if len(t.sessions) >= maxSessions {
		var old *session
		for _, s := range t.sessions {
			if s.turn == "" && (old == nil || s.seen < old.seen) {
				old = s
			}
		}
		if old == nil {
			t.dropped++
			t.warnf("api proxy: every tracked session has an open turn: the traffic of new ones passes without events",
				"limit", maxSessions)
			return nil
		}
		t.pending -= len(old.pending)
		delete(t.sessions, old.id)
	}
	t.admitted++
	s := &session{id: id, seen: t.clock, pending: map[string]struct{}{}}
	t.sessions[id] = s
	return s
}

func (t *tracker) emit(s *session, p Provider, e Event) {
	e.Provider, e.Session = p, s.id
	if e.Turn == "" {
		e.Turn = s.turn
	}
	if t.sink != nil && !t.closed {
		t.sink(e)
	}
}

// request takes a model call as it goes upstream.
func (t *tracker) request(p Provider, sid string, r request) {
	if !r.main {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.get(sid)
	if s == nil {
		return
	}
	for _, id := range r.results {
		if _, ok := s.pending[id]; ok {
			delete(s.pending, id)
			t.pending--
		}
	}
	switch {
	case s.turn == "" || (r.turn != "" && s.named && r.turn != s.turn):
		// No turn open, or the CLI names a new one (Codex starts a turn
		// after one the proxy saw no end of: the user interrupted it, or
		// it ended in an error): the new turn begins.
		s.n++
		s.turn, s.named = r.turn, r.turn != ""
		if s.turn == "" {
			s.turn = t.prefix + strconv.Itoa(s.n)
		}
		s.phase = phaseModel
		t.pending -= len(s.pending)
		clear(s.pending)
		t.emit(s, p, Event{Kind: TurnBegin})
	case s.phase != phaseModel:
		s.phase = phaseModel
		t.emit(s, p, Event{Kind: Phase})
	}
}

// answer takes what a model call's answer said, once it ended (complete
// or not).
func (t *tracker) answer(p Provider, sid string, r request, a *answer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.usage && (a.in > 0 || a.out > 0) {
		e := Event{Kind: Usage, Input: max(a.in, 0), Output: max(a.out, 0)}
		if s := t.get(sid); s != nil {
			t.emit(s, p, e)
		} else if t.sink != nil && !t.closed {
			// Tokens are counted whatever the table holds: a flood of
			// fresh session ids never makes answers free. Outside the
			// table the session has no turn.
			e.Provider, e.Session = p, sid
			t.sink(e)
		}
	}
	if !r.main {
		return
	}
	s := t.get(sid)
	if s == nil || s.turn == "" {
		return
	}
	switch {
	case a.limited:
		s.phase = phaseWaiting
		t.emit(s, p, Event{Kind: Waiting})
	case len(a.tools) > 0:
		for _, c := range a.tools {
			if _, ok := s.pending[c.id]; !ok && c.id != "" && len(s.pending) < maxPending && t.pending < maxPendingAll {
				s.pending[c.id] = struct{}{}
				t.pending++
			}
		}
		s.phase = phaseTool
		detail := a.tools[0].detail
		if n := len(a.tools) - 1; n > 0 {
			detail = oneLine(detail + " (and " + strconv.Itoa(n) + " more tool calls)")
		}
		t.emit(s, p, Event{Kind: Phase, Tool: a.tools[0].name, Detail: detail})
	case a.final() && len(s.pending) == 0:
		t.emit(s, p, Event{Kind: TurnEnd, Outcome: "completed"})
		s.turn, s.phase = "", phaseModel
	}
}

// limited takes a main request refused for a limit.
func (t *tracker) limited(p Provider, sid string, r request, at time.Time) {
	if !r.main {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.get(sid)
	if s == nil || s.turn == "" {
		return
	}
	s.phase = phaseWaiting
	t.emit(s, p, Event{Kind: Waiting, RetryAt: at})
}

// stalled reports a stream of the session that stopped sending content:
// only for a session with an open turn (a stream whose upstream never
// answered opened none).
func (t *tracker) stalled(p Provider, sid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sessions[sid]; ok && s.turn != "" {
		t.emit(s, p, Event{Kind: Stall})
	}
}

// refused reports a model call of the session that Config.Refuse refused.
// It changes no turn and admits no session to the table.
func (t *tracker) refused(p Provider, sid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := Event{Kind: Refused, Provider: p, Session: sid}
	if s, ok := t.sessions[sid]; ok {
		e.Turn = s.turn
	}
	if t.sink != nil && !t.closed {
		t.sink(e)
	}
}

// warnf logs through the proxy's rate-limited warn, if any.
func (t *tracker) warnf(msg string, args ...any) {
	if t.warn != nil {
		t.warn(msg, args...)
	}
}
