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
	// traffic passes through without events.
	maxSessions = 1024
	// maxPending bounds the tool calls per session awaiting a result.
	maxPending = 256
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
	dropped  int  // requests of sessions beyond maxSessions
	closed   bool // no more events
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
	if len(t.sessions) >= maxSessions {
		var old *session
		for _, s := range t.sessions {
			if s.turn == "" && (old == nil || s.seen < old.seen) {
				old = s
			}
		}
		if old == nil {
			t.dropped++
			return nil
		}
		delete(t.sessions, old.id)
	}
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
		delete(s.pending, id)
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
		if s := t.get(sid); s != nil {
			t.emit(s, p, Event{Kind: Usage, Input: max(a.in, 0), Output: max(a.out, 0)})
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
			if c.id != "" && len(s.pending) < maxPending {
				s.pending[c.id] = struct{}{}
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

// stalled reports a stream of the session that stopped sending content.
func (t *tracker) stalled(p Provider, sid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.get(sid); s != nil {
		t.emit(s, p, Event{Kind: Stall})
	}
}
