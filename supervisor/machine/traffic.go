package machine

import (
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// The model-API proxy (--api-proxy on) sees what the agent does without its
// cooperation: a request that offers tools opens a turn, an answer with
// tool calls is a tool phase, a final answer ends the turn, a 429 or 529 is
// a wait for the API until retry_at, and the usage it returns is counted.
// The runner hands each as a Traffic event. Turn markers become the same
// markers hooks send, applied through the same path, so a death is decided
// exactly as with hooks; a proxy marker that only restates what the
// session's state already says (hooks and proxy both running) changes and
// journals nothing.

// TrafficKind is what the proxy saw.
type TrafficKind int

const (
	TrafficTurnBegin TrafficKind = iota // a main request, no turn open
	TrafficTool                         // an answer calling a tool
	TrafficModel                        // a request after a tool's result, or after a limit wait
	TrafficTurnEnd                      // a final answer (Outcome)
	TrafficLimited                      // a 429/529 with a reset time (RetryAt)
	TrafficUsage                        // tokens an answer reported (Input, Output)
	TrafficStall                        // a stream sent no content for --stream-stall (Stalled)
)

// Traffic is one thing the API proxy saw of a session.
type Traffic struct {
	Kind         TrafficKind
	Session      string
	Turn         string // TrafficTurnBegin: the proxy's turn id
	Tool, Detail string
	Outcome      marker.Outcome
	RetryAt      time.Time
	Input        int64
	Output       int64
	Stalled      time.Duration
	// Invented: the traffic named no session (Gemini CLI with an API
	// key), and Session is the proxy's own name for it. When the agent's
	// hooks reported a session in this run, the traffic is that
	// session's: hooks and proxy then tell of one session, not two.
	Invented bool
	// Stored is the session as the journal holds it, when the machine
	// does not hold it (nil: not in the journal).
	Stored *record.Session
}

// traffic applies what the proxy saw.
func (m *Machine) traffic(o *out, e Traffic, now time.Time) {
	if !m.Running() {
		return
	}
	if e.Invented && m.hooked != "" {
		e.Session, e.Stored = m.hooked, nil
	}
	if c, cut := capReset(e.RetryAt, now); cut && e.Kind == TrafficLimited {
		o.warn("the model API named a reset past supervise's cap: the session waits only to the cap", "session", e.Session,
			"retry_at_named", e.RetryAt.UTC().Format(time.RFC3339), "cap", MaxWordsWait)
		e.RetryAt = c
	}
	switch e.Kind {
	case TrafficStall:
		if m.Stop == nil && m.Abort == nil {
			m.trip(o, guardStall, "", now, "session", e.Session, "stalled", e.Stalled)
		}
		return
	case TrafficUsage:
		m.usage(o, e, now)
		return
	}
	if sess := m.trafficSession(e); sess != nil && sess.State == record.Parked {
		// The agent's model calls never lift a park, nor open a turn in it.
		m.refuseParked(o, sess, "model traffic", m.Config.StateDir)
		return
	}
	msg, ok := m.trafficMarker(e, m.Run)
	if !ok {
		return
	}
	m.marker(o, Marker{Msg: msg, Stored: e.Stored}, now)
	if sess := m.Sessions[e.Session]; sess != nil && e.Kind == TrafficLimited && sess.State == record.Waiting {
		sess.RetryAt = e.RetryAt
		o.save(sess.ID)
		o.info("the model API asked the agent to wait: the session waits for it, its deadlines paused",
			"session", sess.ID, "retry_at", e.RetryAt.UTC().Format(time.RFC3339))
	}
}

// trafficSession is the session e names, held or as the journal holds it;
// nil when neither has it.
func (b *Book) trafficSession(e Traffic) *record.Session {
	if sess := b.Sessions[e.Session]; sess != nil {
		return sess
	}
	return e.Stored
}

// trafficMarker turns e into the marker hooks would send, false when it
// would only restate the session's state: run is the current run.
func (b *Book) trafficMarker(e Traffic, run record.Run) (marker.Message, bool) {
	msg := marker.Message{PID: int32(run.PID), Session: e.Session}
	sess := b.Sessions[e.Session]
	if sess == nil && e.Stored != nil {
		sess = e.Stored
	}
	state := record.Idle
	if sess != nil {
		state = sess.State
	}
	open := state == record.InTurn || state == record.Waiting
	switch e.Kind {
	case TrafficTurnBegin:
		switch {
		case open:
			return msg, false
		case state == record.ResumePending && sess.Resume != nil && sess.Resume.Run == run.Run:
			// The relaunched agent calls the model for the session it was
			// handed: it took the resume.
			msg.Event = marker.EventResumed
		default:
			msg.Event, msg.Turn = marker.EventTurnBegin, e.Turn
		}
	case TrafficTool:
		if !open || (sess.Phase == string(marker.PhaseTool) && sess.Tool == e.Tool && sess.Detail == e.Detail && state == record.InTurn) {
			return msg, false
		}
		msg.Event, msg.Phase, msg.Tool, msg.Detail = marker.EventPhase, marker.PhaseTool, e.Tool, e.Detail
	case TrafficModel:
		if !open || (state == record.InTurn && sess.Phase == string(marker.PhaseModel)) {
			return msg, false
		}
		msg.Event, msg.Phase = marker.EventPhase, marker.PhaseModel
	case TrafficTurnEnd:
		if !open {
			return msg, false
		}
		msg.Event, msg.Outcome = marker.EventTurnEnd, e.Outcome
	case TrafficLimited:
		if !open || (state == record.Waiting && sess.RetryAt.Equal(e.RetryAt)) {
			return msg, false
		}
		msg.Event, msg.Wait = marker.EventWaiting, marker.WaitReconnect
	default:
		return msg, false
	}
	return msg, true
}

// retryDelay is the relaunch delay, stretched to the soonest journaled
// retry_at when no resume may be dispatched before it (notDue).
func (m *Machine) retryDelay(delay time.Duration, now time.Time) time.Duration {
	if len(m.pending()) > 0 {
		return delay
	}
	for _, sess := range m.limitWaiters() {
		if sess.State == record.ResumePending {
			return max(delay, sess.RetryAt.Sub(now))
		}
	}
	return delay
}

func (Traffic) event() {}
