package machine

import (
	"sort"
	"strconv"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// Book is the session book: every session held in memory, the index of the
// open ones, and the counts of what was refused of them. Its methods read
// and mark sessions; what a death or a marker decides for them is the
// machine's.
type Book struct {
	// Sessions are the sessions held in memory: every open one, and
	// settled ones until evicted.
	Sessions map[string]*record.Session
	// open holds the ids of the open sessions, kept by Step from the
	// sessions its effects save: every change of a session is saved.
	open map[string]bool
	// parkSaid holds the parked sessions whose refusal was logged (once
	// per session and park).
	parkSaid map[string]bool
	// hooked is the session the agent's own markers last named in this
	// run: traffic that names none is taken for it (Traffic.Invented).
	hooked string
	// beatBorn counts the sessions a heartbeat brought into being in this
	// run (a heartbeat naming an id never seen): at most the cap, so a
	// flood of fresh ids grows neither memory nor the journal; BeatsDropped
	// counts those past it, beatLog rate-limits saying so.
	beatBorn     int
	BeatsDropped uint64
	beatLog      rateLimit
	// Refused counts turn-begins refused at --max-open-sessions.
	Refused    uint64
	refusedLog rateLimit
	// OutOfSequence counts markers that contradicted their session's turn.
	OutOfSequence uint64
	seqLog        rateLimit
	// RefusedParked counts markers and model traffic refused because
	// their session is parked.
	RefusedParked uint64
	// now is the time of the event being stepped: what is due (a
	// journaled retry_at) is judged against it.
	now time.Time
	// announced is what a person was last told of each session that
	// needs or awaits one (Notice): parked, budget, waiting, limit.
	announced map[string]string
}

// personStatus is what a person may need to hear of sess: the Notice its
// state is, "" for none.
func personStatus(sess *record.Session) string {
	switch {
	case sess == nil:
	case sess.State == record.Parked && sess.ParkedBy == record.ParkedByBudget:
		return NoticeBudget
	case sess.State == record.Parked:
		return NoticeParked
	case sess.State == record.Waiting && sess.Wait == record.WaitLimit:
		return NoticeLimit
	case sess.State == record.Waiting && sess.Wait != WaitReconnect:
		return NoticeWaiting
	}
	return ""
}

// noticeEnds is the event that says a status is over, "" when none is told.
var noticeEnds = map[string]string{NoticeWaiting: NoticeWaitingEnd, NoticeLimit: NoticeLimitEnd}

// announce returns what a person must be told of session id, which a step
// saved: the end of what it was (a wait for a person, a limit's wait), and
// the start of what it is now, if that changed.
func (b *Book) announce(id string, sess *record.Session, stateDir string) []Notice {
	was, now := b.announced[id], personStatus(sess)
	if was == now {
		return nil
	}
	if now == "" {
		delete(b.announced, id)
	} else {
		if b.announced == nil {
			b.announced = map[string]string{}
		}
		b.announced[id] = now
	}
	var out []Notice
	if end := noticeEnds[was]; end != "" {
		out = append(out, Notice{Event: end, Session: id, Command: "supervise status --state-dir " + ShellQuote(stateDir) + " --session " + ShellQuote(id)})
	}
	if now != "" {
		n := Notice{Event: now, Session: id, Turn: sess.Turn, Reason: sess.Reason, Command: ResumeCommand(stateDir, id)}
		if now == NoticeWaiting {
			n.Reason = "waiting for " + sess.Wait + ": answer it in the agent"
			n.Command = "supervise status --state-dir " + ShellQuote(stateDir) + " --session " + ShellQuote(id)
		}
		out = append(out, n)
	}
	return out
}

// sessionIDs returns the ids of the sessions held, sorted: Step visits
// sessions in this fixed order wherever the visit has effects, so the same
// state and event give the same effects in the same order (and a seed
// replays a bug).
func (b *Book) sessionIDs() []string { return sortedKeys(b.Sessions) }

// Held reports whether the book holds session id in memory.
func (b *Book) Held(id string) bool { _, ok := b.Sessions[id]; return ok }

// Hooked is the session the agent's own markers last named in this run.
func (b *Book) Hooked() string { return b.hooked }

// track keeps the open index and the park log for a session a step saved.
func (b *Book) track(id string, sess *record.Session) {
	if sess != nil && sess.State.Open() {
		b.open[id] = true
	} else {
		delete(b.open, id)
	}
	if sess == nil || sess.State != record.Parked {
		delete(b.parkSaid, id) // a new park is said again
	}
}

// openTurn reports whether some session was mid-turn.
func (b *Book) openTurn() bool {
	for _, sess := range b.Sessions {
		if sess.State == record.InTurn || sess.State == record.Waiting {
			return true
		}
	}
	return false
}

// silentTurn names a session mid-turn (in_turn: not waiting for a person
// or a limit), "" when none is.
func (b *Book) silentTurn() string {
	for _, id := range sortedKeys(b.open) {
		if sess := b.Sessions[id]; sess != nil && sess.State == record.InTurn {
			return id
		}
	}
	return ""
}

// anyHandedTo reports whether a session's resume is recorded as handed to
// run: a run reserved before its fork may have taken it.
func (b *Book) anyHandedTo(run uint64) bool {
	for _, id := range sortedKeys(b.open) {
		if handedTo(b.Sessions[id], run) {
			return true
		}
	}
	return false
}

// notDue reports whether sess, owed a resume, waits for a journaled
// retry_at still to come (the model API asked the agent to wait until then,
// and it died waiting): its resume is not dispatched before it, across any
// number of deaths of the agent or of supervise. A person's resume does
// not wait.
func (b *Book) notDue(sess *record.Session) bool {
	return sess.RetryAt.After(b.now) && (sess.Resume == nil || !sess.Resume.Manual)
}

// dispatchable returns the sessions owed a resume that may be dispatched
// now: automatic ones unless held, manual ones always, none before its
// retry_at. Oldest first, at most limit of them (one run is never handed
// more).
func (b *Book) dispatchable(held bool, limit int) []*record.Session {
	var out []*record.Session
	for _, sess := range b.Sessions {
		if sess.State == record.ResumePending && sess.Resume != nil && (sess.Resume.Manual || !held) && !b.notDue(sess) {
			out = append(out, sess)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Resume.Since.Equal(out[j].Resume.Since) {
			return out[i].ID < out[j].ID
		}
		return out[i].Resume.Since.Before(out[j].Resume.Since)
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// owed lists the sessions owed a resume, held or not.
func (b *Book) owed() []*record.Session {
	var out []*record.Session
	for _, sess := range b.Sessions {
		if sess.State == record.ResumePending && sess.Resume != nil {
			out = append(out, sess)
		}
	}
	return out
}

// heldBack lists the sessions whose automatic resume is held back.
func (b *Book) heldBack() []string {
	var ids []string
	for _, sess := range b.Sessions {
		if sess.State == record.ResumePending && sess.Resume != nil && !sess.Resume.Manual {
			ids = append(ids, sess.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

// waiters returns the sessions waiting out a limit, soonest first: those
// waiting with wait limit, and, unless held, those owed a resume that
// waits for a journaled retry_at (notDue).
func (b *Book) waiters(held bool) []*record.Session {
	var out []*record.Session
	for _, id := range sortedKeys(b.open) {
		sess := b.Sessions[id]
		switch {
		case sess == nil || sess.Resume == nil:
		case sess.State == record.Waiting && sess.Wait == record.WaitLimit,
			sess.State == record.ResumePending && !held && b.notDue(sess):
			out = append(out, sess)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].RetryAt.Before(out[j].RetryAt) })
	return out
}

// limitWords says, for the death's log line, when the soonest limit resets.
func (b *Book) limitWords(held bool) string {
	w := b.waiters(held)
	if len(w) == 0 {
		return "end of task"
	}
	return "wait for the limit's reset at " + w[0].RetryAt.UTC().Format(time.RFC3339) + " (" + strconv.Itoa(len(w)) + " waiting)"
}

// born counts a session a heartbeat brings into being, and reports
// whether it may be: past limit in this run it is not (counted, and
// logged at most once a second). A session begins with what it does; a
// flood of heartbeats naming fresh ids, an agent's bug or its attack, must
// not grow the sessions held nor the journal.
func (b *Book) born(o *out, id string, now time.Time, limit int) bool {
	if b.beatBorn < limit {
		b.beatBorn++
		return true
	}
	b.BeatsDropped++
	if n, ok := b.beatLog.allow(now); ok {
		o.warn("heartbeats for new sessions past --max-open-sessions in this run: not kept",
			"session", id, "limit", limit, "suppressed", n)
	}
	return false
}

// refuseParked counts a marker (or model traffic) refused because its
// session is parked, and says so once per session and park, with the
// command that lifts it.
func (b *Book) refuseParked(o *out, sess *record.Session, what, stateDir string) {
	b.RefusedParked++
	o.add(Count{Metric: "refused", Label: "parked"})
	if b.parkSaid == nil {
		b.parkSaid = map[string]bool{}
	}
	if b.parkSaid[sess.ID] {
		return
	}
	b.parkSaid[sess.ID] = true
	o.warn("refused: the session is parked, and only a person lifts a park",
		"session", sess.ID, "event", what, "reason", sess.Reason, "parked_by", sess.ParkedBy,
		"resume_with", ResumeCommand(stateDir, sess.ID))
}

// sayOutOfSequence counts a marker that contradicts its session's turn,
// and says so (rate-limited).
func (b *Book) sayOutOfSequence(o *out, sess *record.Session, msg marker.Message, why string, ignored bool, now time.Time) {
	b.OutOfSequence++
	n, ok := b.seqLog.allow(now)
	if !ok {
		return
	}
	text := "turn marker out of sequence: applied"
	if ignored {
		text = "turn marker out of sequence: ignored"
	}
	o.warn(text, "session", sess.ID, "event", string(msg.Event), "turn", msg.Turn,
		"session_turn", sess.Turn, "state", string(sess.State), "why", why, "suppressed", n)
}

// evict drops settled sessions whose last change is committed.
func (b *Book) evict(e Evict) {
	if len(b.Sessions) <= e.Keep {
		return
	}
	for id, sess := range b.Sessions {
		if !sess.State.Open() && !e.Busy(id) {
			delete(b.Sessions, id)
		}
	}
}
