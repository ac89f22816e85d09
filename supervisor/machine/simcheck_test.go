package machine

import (
	"strings"
	"time"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// What the simulation checks after every step (docs/design.md lists them):
//
//   - no Launch before the Commit of the death that decided it, and every
//     session a death decided is saved before that Commit;
//   - a run is forked only once the delivery of every resume handed to it
//     is committed;
//   - a parked session leaves its park only by a manual resume of it, or
//     (a breaker's park) a launch under a changed fingerprint;
//   - a session over its budget is parked and its model calls refused;
//     nothing is refused that is not over a budget;
//   - no turn is resumed automatically more than --resume-limit
//     consecutive times;
//   - heartbeats bring at most --max-open-sessions sessions into being
//     in one run (a flood of fresh ids is not kept);
//   - every change of a session is in a Save of the step that made it (the
//     runner commits saves before it acknowledges a barrier);
//   - no resume is dispatched (a Launch's or a live delivery's sessions)
//     before its journaled retry_at but by a person, across any number
//     of deaths of the agent or of supervise;
//   - the crash-loop guard's chain counts only deaths of runs that
//     started a child: a boot (supervise's own death, a run reserved and
//     never launched) and an exec failure never lengthen it;
//   - a limit concerns only its own session: a session enters a limit's
//     wait at a death only when the proxy or the hooks reported the limit
//     for it, or (none reported) the words said one while it was mid-turn;
//   - a lost session (the CLI, asked to resume it, has no such
//     conversation) is never handed an automatic resume, holds none, and
//     in interactive mode never parks: it is closed and told (a Notice
//     lost, never a resume command);
//   - one cap on a believed reset: no session's retry_at, from the words
//     or the proxy, is set past MaxWordsWait (plus the jitter) from now;
//   - the agent's words at a death (a limit with any reset, a lost
//     conversation, noise) never skip a park: a session waiting for a
//     person at a dirty death is parked, words or not;
//   - no deadline is held off by the agent's words past MaxWordsWait: the
//     hang deadlines' last sign of life is never later than that;
//   - a death that is not dirty (a stop, a restart, a clean exit) raises no
//     crash count and leaves the guard as it was; a restart never ends a
//     service (supervise restart relaunches it at once);
//   - a park is told (Notice) in the step that made it, and only a park;
//   - the same seed gives the same effects (TestSimulationDeterministic).

// simKey is what the checker compares of a session.
type simKey struct {
	State                                                                    record.SessionState
	Turn, Phase, Tool, Detail, Prompt, Reason, Outcome, ParkedBy, Wait, Task string
	TurnAlias                                                                string
	ToolRan                                                                  bool
	CrashCount                                                               int
	Run                                                                      uint64
	TurnStarted, LastHeartbeat, Updated, RetryAt                             time.Time
	ClockFrom, PhaseStarted, TurnExtended, PhaseExtended                     time.Time
	Effects                                                                  int
	Tokens                                                                   record.Tokens
	HasTokens, HasResume, HasFP                                              bool
	Resume                                                                   record.Resume
	FP                                                                       string
}

func keyOf(s *record.Session) simKey {
	k := simKey{State: s.State, Turn: s.Turn, Phase: s.Phase, Tool: s.Tool, Detail: s.Detail, Prompt: s.Prompt,
		Reason: s.Reason, Outcome: s.Outcome, ParkedBy: s.ParkedBy, Wait: s.Wait, Task: s.Task, TurnAlias: s.TurnAlias,
		ToolRan: s.ToolRan, CrashCount: s.CrashCount, Run: s.Run, TurnStarted: s.TurnStarted,
		LastHeartbeat: s.LastHeartbeat, Updated: s.Updated, RetryAt: s.RetryAt, ClockFrom: s.ClockFrom,
		PhaseStarted: s.PhaseStarted, TurnExtended: s.TurnExtended, PhaseExtended: s.PhaseExtended, Effects: len(s.Effects)}
	if s.Tokens != nil {
		k.Tokens, k.HasTokens = *s.Tokens, true
	}
	if s.Resume != nil {
		k.Resume, k.HasResume = *s.Resume, true
	}
	if s.Fingerprint != nil {
		k.FP, k.HasFP = s.Fingerprint.Sum, true
	}
	return k
}

// simSnap is the sessions' keys before a step: a few sessions, so a
// slice (a map of large values allocates each).
type simSnap struct {
	ids   []string
	keys  []simKey
	abort *Abort
}

func (p *simSnap) get(id string) (simKey, bool) {
	for i, x := range p.ids {
		if x == id {
			return p.keys[i], true
		}
	}
	return simKey{}, false
}

func (s *sim) snapshot() *simSnap {
	p := &s.snaps[s.depth%len(s.snaps)]
	s.depth++
	p.ids, p.keys, p.abort = p.ids[:0], p.keys[:0], nil
	if a := s.m.Abort; a != nil {
		c := *a
		p.abort = &c
	}
	for id, sess := range s.m.Sessions {
		p.ids = append(p.ids, id)
		p.keys = append(p.keys, keyOf(sess))
	}
	return p
}

// storedOf is the journal's record an event hands the machine for id.
func storedOf(ev Event, id string) *record.Session {
	switch e := ev.(type) {
	case Marker:
		if e.Msg.Session == id {
			return e.Stored
		}
	case Traffic:
		if e.Session == id {
			return e.Stored
		}
	case ManualResume:
		if e.ID == id {
			return e.Stored
		}
	case Beats:
		if st, ok := e.Stored[id]; ok {
			return &st
		}
	}
	return nil
}

func (s *sim) check(ev Event, before *simSnap, fx []Effect) {
	s.t.Helper()
	m := s.m
	saved := map[string]int{} // id -> index of its first Save
	deathAt := -1
	for i, e := range fx {
		switch e := e.(type) {
		case Save:
			for _, id := range e.IDs {
				if _, ok := saved[id]; !ok {
					saved[id] = i
				}
			}
		case Commit:
			if e.Kind == CommitDeath && deathAt < 0 {
				deathAt = i
			}
		case Count:
			if e.Metric == "refused" && e.Label == "parked" {
				s.refusedParked++
			}
		}
	}
	// The hang deadlines: a start timeout only past --start-timeout of a
	// launch that saw no marker nor model request; a silence only with a
	// session in_turn, past --silence-timeout of the run's last life sign.
	if a := m.Abort; a != nil && (before.abort == nil || *before.abort != *a) {
		switch a.Reason {
		case record.ReasonStartTimeout:
			if m.Config.StartTimeout == 0 || s.now.Sub(m.Run.Started) < m.Config.StartTimeout || m.hang.spoke {
				s.fail(ev, "a start timeout at %s for a run started %s (--start-timeout %s, spoke %v)", s.now, m.Run.Started, m.Config.StartTimeout, m.hang.spoke)
			}
		case record.ReasonSilence:
			if m.Config.SilenceTimeout == 0 || s.now.Sub(m.hang.alive) < m.Config.SilenceTimeout || m.silentTurn() == "" {
				s.fail(ev, "a silence timeout at %s, last life %s (--silence-timeout %s)", s.now, m.hang.alive, m.Config.SilenceTimeout)
			}
		}
	}
	boot, booted := ev.(Booted)
	exited, isExit := ev.(Exited)
	// No resume before its journaled retry_at but a person's.
	for _, e := range fx {
		var ids []string
		switch e := e.(type) {
		case Launch:
			ids = e.IDs
		case DeliverLive:
			ids = e.Fresh
		}
		for _, id := range ids {
			if sess := m.Sessions[id]; sess != nil && sess.Resume != nil && !sess.Resume.Manual && sess.RetryAt.After(s.now) {
				s.fail(ev, "session %s dispatched at %s, before its journaled retry_at %s", id, s.now, sess.RetryAt)
			}
		}
	}
	// The guard chains only deaths of runs that started a child.
	if booted && (m.Guard.Chain > boot.Guard.Chain || m.Guard.Open && !boot.Guard.Open) {
		s.fail(ev, "a boot lengthened the crash-loop guard's chain: %+v, journaled %+v", m.Guard, boot.Guard)
	}
	if isExit && exited.ExecFailed && m.Guard.Chain > s.guardBefore.Chain {
		s.fail(ev, "a run that never started chained in the guard: %+v, was %+v", m.Guard, s.guardBefore)
	}
	// A death that is not dirty (a stop, a restart, a clean exit) counts
	// nothing: no crash count rises and the guard does not move; a
	// restart never ends a service, and a stop asked during it wins.
	if isExit && !exited.ExecFailed && !m.Run.Dirty && m.Run.Reason != record.ReasonLimit {
		if m.Guard != s.guardBefore {
			s.fail(ev, "a death that is not dirty (%s) moved the guard: %+v, was %+v", m.Run.Reason, m.Guard, s.guardBefore)
		}
		for _, id := range before.ids {
			if b, _ := before.get(id); m.Sessions[id] != nil && m.Sessions[id].CrashCount > b.CrashCount {
				s.fail(ev, "session %s's crash count rose at a death that is not dirty (%s)", id, m.Run.Reason)
			}
		}
		if _, end := find[End](fx); end && s.restartAsked && m.Run.Reason == record.ReasonStopped && m.Policy.ByRestart {
			s.fail(ev, "a restart ended supervise: %#v", fx)
		}
	}
	// The words hold off no deadline past the cap.
	if m.hang.alive.After(s.now.Add(MaxWordsWait)) {
		s.fail(ev, "the hang deadlines count the agent alive until %s, past now %s plus MaxWordsWait", m.hang.alive, s.now)
	}
	if isExit {
		if deathAt < 0 {
			s.fail(ev, "a death without its Commit: %#v", fx)
		}
		for i, e := range fx {
			switch e.(type) {
			case Backoff, End, Launch:
				if i < deathAt {
					s.fail(ev, "%T before the death's Commit", e)
				}
			}
		}
		s.died = true
		s.deaths++
		_ = exited
	}
	for id, sess := range m.Sessions {
		k := keyOf(sess)
		b, held := before.get(id)
		if !held {
			if st := storedOf(ev, id); st != nil {
				b, held = keyOf(st), true
			}
		}
		if !booted && (!held || b != k) {
			at, ok := saved[id]
			if !ok {
				s.fail(ev, "session %s changed and was not saved:\nbefore %+v\nafter  %+v", id, b, k)
			}
			if isExit && !committedBeforeNext(fx, at) {
				s.fail(ev, "session %s decided by a death is not committed before what follows it: %#v", id, fx)
			}
		}
		// A park is lifted only by a person or a changed agent.
		if held && b.State == record.Parked && k.State != record.Parked {
			switch e := ev.(type) {
			case ManualResume:
				if e.ID == id {
					s.lifts++
					break
				}
				s.fail(ev, "parked session %s lifted by another's manual resume: %+v", id, k)
			case LaunchDue:
				if e.Fingerprint == nil || b.ParkedBy != record.ParkedByBreaker || !b.HasFP || b.FP == "" ||
					b.FP == e.Fingerprint.Sum {
					s.fail(ev, "parked session %s (by %q, fingerprint %q) lifted at a launch: %+v", id, b.ParkedBy, b.FP, k)
				}
			default:
				s.fail(ev, "parked session %s (by %q) left its park: %+v", id, b.ParkedBy, k)
			}
		}
		// A lost session is never handed a resume (but by a person), and
		// in interactive mode never parks: it is closed, told (a Notice
		// with no resume command) and the CLI started again as a new
		// conversation.
		wasLost := (b.State == record.Closed || b.State == record.Parked) && strings.HasPrefix(b.Reason, lostReason)
		if held && wasLost && sess.State == record.ResumePending && (sess.Resume == nil || !sess.Resume.Manual) {
			s.fail(ev, "session %s, whose conversation is lost, was handed an automatic resume: %+v", id, k)
		}
		if KnownLost(*sess) && sess.State == record.Closed && sess.Resume != nil {
			s.fail(ev, "session %s, whose conversation is lost, still holds a resume: %+v", id, k)
		}
		if m.Policy.Interactive && sess.State == record.Parked && strings.HasPrefix(sess.Reason, lostReason) {
			s.fail(ev, "interactive session %s, whose conversation was lost, parked: %+v", id, k)
		}
		// Said by the event, not by the machine's own reason: an
		// interactive run handed this session's resume that exits by
		// itself with a failure, before any marker, the CLI saying the
		// conversation is lost, leaves it closed, never parked (a limit
		// said at the same death is waited out first: the next resume
		// finds the loss).
		row, _ := m.Run.Reason.Row()
		handed := b.State == record.ResumePending && b.HasResume && b.Resume.Run == m.Run.Run && m.Run.Run != 0
		if isExit && exited.Lost && m.Policy.Interactive && held && handed && row.ByItself &&
			exited.Code != 0 && !m.Task.runMarkers && sess.State != record.Closed {
			s.fail(ev, "interactive session %s's conversation was lost and it is %s, not closed and started anew: %+v", id, sess.State, k)
		}
		if isExit && m.Policy.Interactive && KnownLost(*sess) && !wasLost && !noticed(fx, id, NoticeLost) {
			s.fail(ev, "interactive session %s's conversation was lost and no Notice told of it: %#v", id, fx)
		}
		for _, e := range fx {
			if n, ok := e.(Notice); ok && n.Session == id && KnownLost(*sess) && sess.State == record.Closed &&
				(n.Event == NoticeParked || strings.Contains(n.Command, "resume")) {
				s.fail(ev, "a notice offers a resume of session %s, whose conversation is lost: %+v", id, n)
			}
		}
		// A park is told once, when it happens: a Notice in the step that
		// parked the session, none for a session that is not parked.
		if !booted && sess.State == record.Parked && (!held || b.State != record.Parked) && !noticed(fx, id, NoticeParked, NoticeBudget) {
			s.fail(ev, "session %s parked (%s) and no Notice told of it: %#v", id, sess.ParkedBy, fx)
		}
		if sess.State != record.Parked && noticed(fx, id, NoticeParked, NoticeBudget) {
			s.fail(ev, "a park of session %s told while it is %s", id, sess.State)
		}
		// Budgets.
		over := m.Config.MaxTokens > 0 && sess.Tokens != nil && sess.Tokens.Spent() > m.Config.MaxTokens
		refused := m.budgetParked[id] || m.TotalSpent() // what Refusal answers, without its words
		if over && (sess.State != record.Parked || !refused) {
			s.fail(ev, "session %s is over its budget (%+v) yet %s, refused %v", id, *sess.Tokens, sess.State, refused)
		}
		budgetParked := sess.State == record.Parked && sess.ParkedBy == record.ParkedByBudget
		if refused && !budgetParked && !m.TotalSpent() {
			s.fail(ev, "session %s refused while under every budget: %+v", id, k)
		}
		// A limit's wait: never resumed before its retry_at but by a
		// person, never past --limit-resumes, never counted as a crash.
		if b.State == record.Waiting && b.Wait == record.WaitLimit && sess.State == record.ResumePending &&
			(sess.Resume == nil || !sess.Resume.Manual) && s.now.Before(b.RetryAt) {
			s.fail(ev, "session %s resumed before its limit's retry_at %s (now %s)", id, b.RetryAt, s.now)
		}
		// Words never skip a park: a session waiting for a person at a
		// dirty death of a run that started is parked.
		if isExit && !exited.ExecFailed && held && m.Run.Dirty == (m.Run.Reason != record.ReasonLimit) && m.Run.Reason != record.ReasonStopped &&
			b.State == record.Waiting && b.Wait != record.WaitLimit && b.Wait != WaitReconnect && sess.State != record.Parked {
			s.fail(ev, "session %s waited for a person (%s) at a dirty death (words: limit %v, lost %v) and is %s, not parked",
				id, b.Wait, exited.Limit != nil, exited.Lost, sess.State)
		}
		// One cap on a believed reset, whatever its source (the words, the
		// proxy's retry_at): no session waits past MaxWordsWait (and the
		// jitter) from when it was told.
		if k.RetryAt != b.RetryAt && k.RetryAt.After(s.now.Add(MaxWordsWait+limitJitterMax)) {
			s.fail(ev, "session %s waits until %s, past now %s plus the cap %s", id, k.RetryAt, s.now, MaxWordsWait)
		}
		if sess.Limits > s.m.Config.Limit.resumes() && sess.State != record.Parked {
			s.fail(ev, "session %s resumed after a limit %d times, past --limit-resumes %d", id, sess.Limits, s.m.Config.Limit.resumes())
		}
		limitWait := (sess.State == record.Waiting && sess.Wait == record.WaitLimit) || (sess.State == record.Parked && sess.ParkedBy == record.ParkedByLimit)
		// A limit concerns only the session it was reported for: a
		// session enters a limit's wait (or its park) at a death only
		// when the proxy or the hooks reported the limit for it, or the
		// words said one and reported none for any session while it was
		// mid-turn in the run.
		wasLimited := b.State == record.Waiting && b.Wait == record.WaitLimit || b.State == record.Parked && b.ParkedBy == record.ParkedByLimit
		if isExit && held && limitWait && !wasLimited {
			handed := b.State == record.ResumePending && b.HasResume && b.Resume.Run == m.Run.Run && m.Run.Run != 0
			proxy := b.State == record.Waiting && b.Wait == WaitReconnect
			words := exited.Limit != nil && !limitReportedIn(before) && (b.State == record.InTurn || handed)
			if !proxy && !words {
				s.fail(ev, "session %s (%s %s) put into a limit's wait it never hit (words %v, another's limit reported %v): %+v",
					id, b.State, b.Wait, exited.Limit != nil, limitReportedIn(before), k)
			}
		}
		if isExit && s.m.Run.Reason == record.ReasonLimit && limitWait && sess.CrashCount > b.CrashCount {
			s.fail(ev, "session %s's crash count rose at a limit's death: %d to %d\nbefore %+v\nafter %+v", id, b.CrashCount, sess.CrashCount, b, keyOf(sess))
		}
		// The breaker's limit.
		if sess.State == record.ResumePending && sess.Resume != nil && !sess.Resume.Manual && sess.Resume.Reason != resume.LiftReason &&
			sess.Resume.Reason != string(record.ReasonLimit) {
			limit := m.Config.Resume.Limit
			if sess.Resume.Attempt > limit || sess.CrashCount > limit {
				s.fail(ev, "session %s resumed at attempt %d, crash count %d, past --resume-limit %d", id,
					sess.Resume.Attempt, sess.CrashCount, limit)
			}
			if !b.HasResume || b.Resume.Since != sess.Resume.Since || b.State != record.ResumePending {
				s.autoResumes[id]++
				if s.autoResumes[id] > limit {
					s.fail(ev, "session %s resumed automatically %d consecutive times, past --resume-limit %d", id,
						s.autoResumes[id], limit)
				}
			}
		}
		if sess.CrashCount == 0 || (sess.Resume != nil && (sess.Resume.Manual || sess.Resume.Reason == resume.LiftReason)) {
			s.autoResumes[id] = 0
		}
	}
	if m.beatBorn > m.Config.MaxOpenSessions {
		s.fail(ev, "heartbeats brought %d sessions into being in one run, past --max-open-sessions %d", m.beatBorn, m.Config.MaxOpenSessions)
	}
	if m.TotalSpent() {
		if _, refused := m.Refusal("never-seen"); !refused {
			s.fail(ev, "the state dir's budget is spent (%+v) and a new session's call is forwarded", m.Budget)
		}
	}
	for i, id := range before.ids {
		b := before.keys[i]
		if _, ok := m.Sessions[id]; !ok {
			if _, evict := ev.(Evict); !evict && !booted {
				s.fail(ev, "session %s dropped from memory by a %T", id, ev)
			}
			if b.State.Open() {
				s.fail(ev, "open session %s (%s) evicted", id, b.State)
			}
		}
	}
	// A parked session's turn-begin is refused.
	if mk, ok := ev.(Marker); ok && mk.Msg.Session != "" && !mk.Msg.Barrier {
		if b, held := before.get(mk.Msg.Session); held && b.State == record.Parked && parkHolds(mk.Msg.Event) {
			if _, ok := find[Refuse](fx); !ok {
				s.fail(ev, "a %s for parked session %s was not refused", mk.Msg.Event, mk.Msg.Session)
			}
		}
	}
}

// limitReportedIn reports whether a session waited on the model API before the
// step: the proxy or the hooks reported a limit for it.
func limitReportedIn(before *simSnap) bool {
	for _, k := range before.keys {
		if k.State == record.Waiting && k.Wait == WaitReconnect {
			return true
		}
	}
	return false
}

// committedBeforeNext reports whether a Commit follows fx[at] before any
// Backoff, Launch or End.
func committedBeforeNext(fx []Effect, at int) bool {
	for _, e := range fx[at+1:] {
		switch e.(type) {
		case Commit:
			return true
		case Backoff, Launch, End:
			return false
		}
	}
	return false
}

// checkStarted: a run is forked only once every resume handed to it is
// recorded as delivered to it in the journal.
func (s *sim) checkStarted(st Started) {
	s.t.Helper()
	for _, id := range s.deliveredIDs {
		j, ok := s.journal[id]
		if !ok || j.State != record.ResumePending || j.Resume == nil || j.Resume.Run != st.Run {
			var jr, mr record.Resume
			if j.Resume != nil {
				jr = *j.Resume
			}
			if r := s.m.Sessions[id].Resume; r != nil {
				mr = *r
			}
			s.fail(st, "run %d forked before the delivery of %s was committed: journal has %s %+v, memory %+v", st.Run, id, j.State, jr, mr)
		}
	}
	s.deliveredIDs = nil
}

// noticed reports whether fx tells of session id with one of events.
func noticed(fx []Effect, id string, events ...string) bool {
	for _, e := range fx {
		if n, ok := e.(Notice); ok && n.Session == id {
			for _, ev := range events {
				if n.Event == ev {
					return true
				}
			}
		}
	}
	return false
}
