package machine

import (
	"slices"
	"strconv"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// A death goes through ordered stages, each reading what the ones before
// it decided (a death), and together they record the end of the current
// run and decide what follows: how it ended, its record, a lost
// conversation, the sessions' decisions, the backoff, the death's commit
// (before anything that follows it), what is said, and then a relaunch
// (after a backoff) or the end.

// death is one death under way: the event, and what each stage decided.
type death struct {
	*Machine
	o   *out
	e   Exited
	now time.Time
	// r is the run as it ended; dirty is the same before a limit renamed
	// it (what the sessions not mid-turn see), limited says it did.
	r, dirty record.Run
	limited  bool
	// restart: the run ended by a requested restart: what follows is a
	// relaunch at once, never counted.
	restart bool
	decs    []resume.Decision
	dec     crashloop.Decision
	// lostID is the session the lost stage decided (its conversation is
	// lost): changed by the death as the decisions' sessions are.
	lostID string
}

// deathStages are a death's stages, in order.
var deathStages = [...]func(*death){
	(*death).classify,
	(*death).record,
	(*death).lost,
	(*death).decideSessions,
	(*death).backoff,
	(*death).commit,
	(*death).say,
	(*death).follow,
}

// exited records the end of the current run and decides what follows.
func (m *Machine) exited(o *out, e Exited, now time.Time) {
	d := death{Machine: m, o: o, e: e, now: now}
	for _, stage := range deathStages {
		stage(&d)
	}
}

// classify names how the run ended, whether the death is dirty (as the
// reason table says), and whether a limit ended it.
func (d *death) classify() {
	e := d.e
	if d.Stop != nil && d.Stop.FromTTY && !d.stopRequested(e, d.Config.StopTimeout) {
		d.Stop = nil // the Ctrl-C was for the agent, which carried on; this is a new death
	}
	r := d.Run
	if e.ExecFailed {
		r = record.Run{Run: d.launching, Started: e.Started, Argv: e.Argv}
	}
	r.PID, r.Ended, r.ExitCode, r.Signal = e.PID, e.Ended, e.Code, e.Signal
	r.Reason = d.reasonOf()
	row, ok := r.Reason.Row()
	if d.Stop != nil && d.Stop.Restart && row.Requested {
		d.restart, d.Stop = true, nil // not the end: a relaunch
	}
	r.Dirty = !ok || row.DirtyFor(e.Code) // a reason not in the table is dirty: fail closed
	if r.Dirty && row.OOMRenames && e.OOMKills > 0 {
		d.o.warn("the kernel's OOM killer killed processes of the agent's cgroup", "oom_kills", e.OOMKills)
		r.Reason = record.ReasonOOM
	}
	d.limited = d.limitDeath(r)
	d.dirty = r
	if d.limited {
		r.Reason, r.Dirty = record.ReasonLimit, false
	}
	d.r = r
}

// reasonOf names how the run ended.
func (d *death) reasonOf() record.Reason {
	e := d.e
	switch {
	case d.Abort != nil && (d.Stop == nil || d.Abort.At.Before(d.Stop.At)):
		return d.Abort.Reason
	case d.stopRequested(e, d.Config.StopTimeout):
		return record.ReasonStopped
	case e.ExecFailed:
		return record.ReasonExecFailed
	case e.Signal != 0, e.Code != 0 && e.InnerSignal != 0:
		return record.ReasonSignal
	case e.Code != 0:
		return record.ReasonExit
	case d.openTurn():
		return record.ReasonTurnOpen
	}
	return record.ReasonExit
}

// limitDeath reports whether run r ended on a usage or rate limit: an
// exit by the agent itself (not 0, or 0 mid-turn) that its words, its
// hooks or the proxy say a limit caused.
//
// The limit is seen when the agent's words said so (e.Limit), or a session
// was waiting on the model API when it exited (the proxy saw a 429/529, or
// the hooks said the turn stopped on a rate limit: Claude Code's
// StopFailure "rate_limit"). The agent's words concern only the sessions
// that were mid-turn in the run (in_turn, waiting on the model API, or
// handed the run's resume): with none, the words change nothing and the
// death is what it is.
func (d *death) limitDeath(r record.Run) bool {
	if row, _ := r.Reason.Row(); d.e.ExecFailed || !r.Dirty || !row.ByItself {
		return false
	}
	words := false
	for _, id := range sortedKeys(d.open) {
		sess := d.Sessions[id]
		switch {
		case sess == nil:
		case sess.State == record.Waiting && sess.Wait == WaitReconnect:
			return true
		case sess.State == record.InTurn, sess.State == record.ResumePending && sess.Resume != nil && sess.Resume.Run == r.Run && r.Run != 0:
			words = true
		}
	}
	return words && d.e.Limit != nil
}

// record makes the run the last exit, and counts a dirty death in the
// crash-loop guard and the metrics.
func (d *death) record() {
	r := d.r
	last := r
	d.Run, d.LastExit, d.Abort = r, &last, nil
	d.on(onExited)
	d.Grace.Armed, d.deadlineArmed = false, false
	if !r.Dirty {
		return
	}
	if !d.e.ExecFailed {
		// Only a run that started a child chains: one that could not
		// start backs off, and holds no turn a resume could kill.
		d.Guard = d.Config.Guard.Death(d.Guard, r.Ended)
	}
	d.o.add(Count{Metric: "death", Label: string(r.Reason)})
	if row, _ := r.Reason.Row(); row.Counter != "" {
		d.o.add(Count{Metric: row.Counter})
	}
}

// lost handles, before the death's decisions, a --resume-exec launch that
// exited by itself before any marker, the CLI saying the conversation is
// unknown (Exited.Lost). The session handed to it is taken out of the
// decisions: its resume can never work, and the death is not the turn's
// doing. Nothing of the task ran when no tool phase nor effect was seen:
// the task starts again once, as a new session; otherwise the session is
// parked with the CLI's words.
func (d *death) lost() {
	e, r, o := d.e, d.r, d.o
	if row, _ := r.Reason.Row(); !d.Policy.LostConversations || !r.Dirty || !row.ByItself || r.ExitCode == 0 || d.Task.runMarkers || !e.Lost {
		return
	}
	var sess *record.Session
	for _, id := range d.sessionIDs() {
		if s := d.Sessions[id]; s.State == record.ResumePending && s.Resume != nil && s.Resume.Run == r.Run {
			sess = s // --resume-exec hands one session to a run
			break
		}
	}
	if sess == nil {
		return
	}
	said := strconv.Quote(e.Said) + " (exit status " + strconv.Itoa(r.ExitCode) + ")"
	sess.Resume = nil
	d.lostID = sess.ID
	lostWhy := lostReason + said
	if d.Policy.LostAnew {
		d.lostAnew(sess, lostWhy)
		return
	}
	if sess.ToolRan || d.Task.reran {
		why := "a tool had run in the interrupted turn, so the task is not started again by itself"
		if !sess.ToolRan {
			why = "the task was already started again once for a lost conversation"
		}
		sess.State, sess.ParkedBy = record.Parked, record.ParkedByLost
		sess.Reason = lostWhy + "; " + why
		o.save(sess.ID)
		o.add(Count{Metric: "park", Label: record.ParkedByLost})
		o.warn("session parked: the CLI cannot resume its conversation, and "+why, "session", sess.ID,
			"turn", sess.Turn, "cli_said", e.Said, "exit_code", r.ExitCode)
		return
	}
	sess.State = record.Closed
	sess.Reason = lostWhy + "; nothing had run in the interrupted turn, so the task was started again as a new session"
	d.Task.reran, d.Task.rerunDue, d.Task.inherit = true, true, sess.CrashCount
	o.save(sess.ID)
	o.warn("the CLI cannot resume the session: its conversation was lost before any tool ran; starting the task again once, as a new session",
		"session", sess.ID, "turn", sess.Turn, "cli_said", e.Said, "exit_code", r.ExitCode, "crash_count", sess.CrashCount)
	d.tellLost(sess)
}

// lostAnew: an interactive CLI asked to resume a conversation it never
// saved (killed in the first turn of a new conversation). The person is
// kept in the CLI: it is started again once as a new conversation (the
// plain argv, no resume), never parked, and told plainly. The session is
// closed, its reason saying its conversation was lost (KnownLost): no
// notice, report or status offers a resume of it, which cannot work. The
// bound: the new conversation's first session takes the lost one's crash
// count (inheritRerun), so a turn that keeps killing the CLI before it
// saves reaches the breaker as any turn that keeps dying; every such death
// chains in the crash-loop guard too.
func (d *death) lostAnew(sess *record.Session, lostWhy string) {
	o := d.o
	sess.State = record.Closed
	sess.Reason = lostWhy + "; " + lostAnewWords
	if sess.ToolRan {
		sess.Reason += "; a tool had run in the interrupted turn: check what it did before asking again"
	}
	d.Task.rerunDue, d.Task.inherit = true, max(d.Task.inherit, sess.CrashCount)
	o.save(sess.ID)
	o.warn("interactive: the session's conversation was lost before the CLI saved it (it cannot be resumed); starting the CLI again as a new conversation",
		"session", sess.ID, "turn", sess.Turn, "cli_said", d.e.Said, "exit_code", d.r.ExitCode, "crash_count", sess.CrashCount)
	d.tellLost(sess)
}

// tellLost tells a person of a session whose conversation is lost: what
// happened and where to look, never a resume.
func (d *death) tellLost(sess *record.Session) {
	d.o.add(Notice{Event: NoticeLost, Session: sess.ID, Turn: sess.Turn, Reason: sess.Reason,
		Command: "supervise status --state-dir " + ShellQuote(d.Config.StateDir) + " --session " + ShellQuote(sess.ID)})
}

// decideSessions decides for each session what the death means for it.
func (d *death) decideSessions() {
	e, r := d.e, d.r
	switch {
	case d.limited:
		d.decs = d.decideLimit(resume.Death{Reason: d.dirty.Reason, Signal: e.signal(), ExitCode: r.ExitCode,
			Run: r.Run, At: r.Ended, Said: e.Said})
	case !e.ExecFailed:
		row, _ := r.Reason.Row()
		requested := row.Requested && !r.Dirty
		d.decs = d.Book.decide(d.o, resume.Death{Reason: r.Reason, Signal: e.signal(), ExitCode: r.ExitCode, Requested: requested, Restart: d.restart,
			Clean: !r.Dirty && !requested, Run: r.Run, At: r.Ended, Said: e.Said}, d.now, d.Config.Resume, d.Config.Fingerprint)
	}
}

// limitHit reports whether the limit that ended the run concerns sess: a
// limit concerns only the session it was reported for. The proxy (a 429 or
// 529) and the hooks (Claude Code's StopFailure rate_limit) report it for
// one session, which waits on the model API; the agent's words name no
// session, so they concern the sessions mid-turn in the run (in_turn, or
// handed its resume) only when neither reported a limit for any session
// (then the words are that session's, most likely the same 429 told
// twice). A session already waiting out a limit is not concerned again.
func (d *death) limitHit(sess *record.Session, reported bool) bool {
	switch {
	case sess.State == record.Waiting && sess.Wait == WaitReconnect:
		return true
	case d.e.Limit == nil || reported:
		return false
	}
	return sess.State == record.InTurn || handedTo(sess, d.r.Run) && d.r.Run != 0
}

// limitReported reports whether the proxy or the hooks reported a limit
// for some session: one waits on the model API.
func (b *Book) limitReported() bool {
	for _, sess := range b.Sessions {
		if sess.State == record.Waiting && sess.Wait == WaitReconnect {
			return true
		}
	}
	return false
}

// decideLimit applies a limit's death to the sessions: those the limit
// concerns (limitHit) wait out the limit or are parked past the cap; the
// rest are decided as the death rest is without the limit (another
// session mid-turn is resumed as at any dirty death, counted; one waiting
// for a person is parked as at any dirty death).
func (d *death) decideLimit(rest resume.Death) []resume.Decision {
	e, r, o, now := d.e, d.r, d.o, d.now
	var changed []resume.Decision
	var ids []string
	var others []record.Session
	line := e.Said
	if e.Limit != nil && e.Limit.Line != "" {
		line = e.Limit.Line
	}
	reported := d.limitReported()
	for _, id := range d.sessionIDs() {
		sess := d.Sessions[id]
		if !sess.State.Open() {
			continue
		}
		if !d.limitHit(sess, reported) {
			others = append(others, *sess)
			continue
		}
		reset, how := d.Config.Limit.reset(sess, e.Limit, e.Random, now)
		ld := resume.LimitDeath{Death: resume.Death{Reason: r.Reason, ExitCode: r.ExitCode, Signal: r.Signal, Run: r.Run, At: r.Ended},
			Reset: reset, Line: line, Max: d.Config.Limit.resumes()}
		dec, ok := resume.Limited(*sess, ld, now, d.Config.Resume)
		if !ok {
			others = append(others, *sess)
			continue
		}
		s := dec.Session
		if dec.Action == resume.Park {
			o.add(Count{Metric: "park", Label: record.ParkedByLimit})
		} else {
			s.Reason += "; " + how
			o.info("a limit's wait: "+how, "session", id, "retry_at", reset.UTC().Format(time.RFC3339))
		}
		d.Sessions[id] = &s
		ids = append(ids, id)
		changed = append(changed, dec)
	}
	for _, dec := range resume.Decide(others, rest, now, d.Config.Resume) {
		if dec.Action == resume.Keep {
			continue
		}
		if dec.Action == resume.Park {
			o.add(Count{Metric: "park", Label: dec.Session.ParkedBy})
		}
		s := dec.Session
		d.Sessions[s.ID] = &s
		ids = append(ids, s.ID)
		changed = append(changed, dec)
	}
	if len(ids) > 0 {
		o.save(ids...)
	}
	return changed
}

// backoff decides, by the restart policy, what follows at the process
// level: a relaunch (after a delay), the end, or giving up. A limit is not
// a crash: the backoff does not count it, and what follows is the wait for
// the reset (or, with --restart never, the end). Nor is a restart: the
// relaunch comes at once.
func (d *death) backoff() {
	r := d.r
	dec, st := d.Config.Policy.Next(d.Backoff, crashloop.Run{Started: r.Started, Ended: r.Ended,
		Dirty: r.Dirty, ExecFailed: d.e.ExecFailed, Proven: d.TurnDone}, d.e.jitter())
	switch {
	case d.restart:
		// A person asked for it: relaunched at once, not counted.
		dec = crashloop.Decision{Action: crashloop.Relaunch}
	case d.limited:
		dec = crashloop.Decision{Action: crashloop.Relaunch}
		if d.Policy.ByRestart && d.Config.Policy.Restart == crashloop.Never {
			dec.Action = crashloop.Exit
		}
	default:
		d.Backoff = st
	}
	d.dec = dec
}

// commit records the death, with every decision before it, in one commit
// before anything that follows; an immediate relaunch's delivery is folded
// into it.
func (d *death) commit() {
	dec, o := d.dec, d.o
	var reserve uint64
	if d.Stop == nil && dec.Action != crashloop.GiveUp {
		reserve = d.nextRun
	}
	if d.Stop == nil && dec.Action == crashloop.Relaunch && d.Policy.Fold && reserve != 0 &&
		d.retryDelay(dec.Delay, d.e.Ended) == 0 {
		d.fold(o, d.pending(), reserve)
	}
	o.add(Commit{Kind: CommitDeath, Run: d.r, Reserve: reserve, Why: "recording the child's death"})
	if d.Stop == nil && dec.Action == crashloop.Relaunch && dec.Delay == 0 && d.Policy.HoldLogs {
		// The death is committed and the relaunch is immediate: what
		// follows is only said, and is written once the next child is
		// forked (or as soon as the loop waits or ends).
		o.add(HoldLogs{})
	}
}

// say logs the death and the decisions, and tells the observer.
func (d *death) say() {
	o := d.o
	d.logDeath()
	logDecisions(o, d.decs, d.Hold(), d.Config.StateDir)
	changed := make([]string, 0, len(d.decs)+1)
	for _, dec := range d.decs {
		changed = append(changed, dec.Session.ID)
	}
	if d.lostID != "" && !slices.Contains(changed, d.lostID) {
		changed = append(changed, d.lostID) // the observer words it (a lost conversation)
	}
	o.add(ObserveDeath{Run: d.r, Changed: changed})
	if d.Guard.Open {
		o.warn("crash-loop guard is open: automatic resumes are held until a run proves healthy", "chain", d.Guard.Chain)
	}
	o.add(Publish{})
}

// logDeath says how the run ended and what follows, as follow decides it.
func (d *death) logDeath() {
	e, r, dec := d.e, d.r, d.dec
	next := dec.Action.String()
	switch {
	case d.launches == 1 && e.ExecFailed:
		next = "end" // the very first launch cannot start: not retried
	case d.Stop != nil:
		next = "stop"
	case !d.Policy.ByRestart && dec.Action != crashloop.GiveUp:
		next = d.taskNextWords()
	case dec.Action == crashloop.Relaunch && dec.Delay > 0:
		next = "relaunch in " + dec.Delay.Round(time.Millisecond).String()
	case dec.Action == crashloop.Relaunch:
		next = "relaunch now"
	}
	level := LevelInfo
	if r.Dirty {
		level = LevelWarn
	}
	attrs := []any{"run", r.Run, "pid", r.PID, "how", e.How,
		"exit_code", r.ExitCode, "signal", r.Signal, "reason", r.Reason, "dirty", r.Dirty,
		"uptime", e.Ended.Sub(e.Started).Round(time.Millisecond), "next", next}
	if e.Said != "" {
		attrs = append(attrs, "agent_said", e.Said)
	}
	d.o.log(level, "child exited", attrs...)
}

// follow decides what follows a death whose record is committed.
func (d *death) follow() {
	e, dec, o := d.e, d.dec, d.o
	switch {
	case d.launches == 1 && e.ExecFailed:
		// The very first launch failing is a configuration error: say so
		// and stop, rather than retry a binary that is not there.
		o.add(End{Code: e.Code, Err: "agent could not be started: " + e.ExecErr})
	case d.Stop != nil:
		d.endStopped(o)
	case d.restart && !d.Policy.ByRestart && len(d.pending()) == 0:
		// A task is never started again by supervise: a restart with
		// nothing to resume ends as the stop it began with.
		o.info("restart: the task had no session to resume, and a task is never started again: stopped")
		d.endStopped(o)
	case dec.Action == crashloop.GiveUp:
		o.error("giving up: the agent keeps dying", "failures", dec.Failures,
			"limit", d.Config.Policy.GiveUp, "exit_code", ExitGaveUp)
		o.add(Notice{Event: NoticeGaveUp, Reason: "the agent keeps dying: " + strconv.Itoa(dec.Failures) + " failures in a row",
			Command: "supervise status --state-dir " + ShellQuote(d.Config.StateDir)}, End{Code: ExitGaveUp})
	case !d.Policy.ByRestart:
		d.taskNext()
	case dec.Action == crashloop.Exit:
		o.add(End{Code: e.Code})
	case d.limited && len(d.pending()) == 0 && d.waitLimit(o, e.Ended):
	default:
		d.wait(o, d.waitForRetry(dec.Delay), false)
	}
}

// waitForRetry is the relaunch delay, stretched to the rate limit's reset
// time of a session it would resume (retryDelay), and says so.
func (d *death) waitForRetry(delay time.Duration) time.Duration {
	w := d.retryDelay(delay, d.e.Ended)
	if w > delay {
		d.o.info("the resume waits for the model API's rate limit to reset", "delay", w.Round(time.Millisecond))
	}
	return w
}

// taskNextWords says in the death's log line what follows in task mode
// (taskNext): a resume launch, or the end, also when the resume launch
// could not start.
func (d *death) taskNextWords() string {
	switch {
	case d.e.ExecFailed:
		return "end of task"
	case len(d.pending()) == 0 && len(d.limitWaiters()) > 0:
		return d.limitWords(d.Hold() != "")
	case len(d.pending()) == 0 && d.hungAtStart() && !d.hang.startRetried && d.Policy.Task:
		return "the task again (it hung at start)"
	case len(d.pending()) == 0 && d.Task.rerunDue && d.Policy.LostAnew:
		return "the CLI again as a new conversation"
	case len(d.pending()) == 0 && d.Task.rerunDue:
		return "the task again as a new session"
	case len(d.pending()) == 0:
		return "end of task"
	}
	if d.dec.Action == crashloop.Relaunch && d.dec.Delay > 0 {
		return "resume launch in " + d.dec.Delay.Round(time.Millisecond).String()
	}
	return "resume launch now"
}

// taskNext decides what follows a death in task mode: a resume launch for
// a pending session, or the end of supervise with its code.
func (d *death) taskNext() {
	e, o := d.e, d.o
	if e.ExecFailed {
		// A resume launch whose command cannot start: retrying it cannot
		// help, and the session stays owed its resume.
		o.error("the --resume-exec command could not be started: ending the task; the session stays owed its resume",
			"err", e.ExecErr)
		d.Task.report(o, &d.Book, &d.Config, d.Hold())
		o.add(End{Code: e.Code})
		return
	}
	// Park here, not at the launch, a session whose id the template refuses:
	// with none left, the launch would be the task itself again.
	for _, sess := range d.pending() {
		if _, ok := templated(o, d.Config.Task.Exec, sess); ok {
			o.info("task mode: relaunching as --resume-exec for a pending session", "session", sess.ID)
			d.wait(o, d.waitForRetry(d.dec.Delay), false)
			return
		}
	}
	if d.waitLimit(o, e.Ended) {
		return
	}
	if d.Task.rerunDue {
		d.Task.rerunDue = false
		if d.Policy.LostAnew {
			o.info("interactive: starting the CLI again as a new conversation (the conversation was lost before the CLI saved it)")
		} else {
			o.info("task mode: starting the task again as a new session (its conversation was lost)")
		}
		d.wait(o, d.dec.Delay, false)
		return
	}
	if d.startHangRerun() {
		d.wait(o, d.dec.Delay, false)
		return
	}
	o.add(End{Code: d.taskEnd()})
}

// hungAtStart reports whether the run hung before it said anything.
func (d *death) hungAtStart() bool {
	row, _ := d.Run.Reason.Row()
	return row.HungAtStart
}

// startHangRerun: a task whose own launch hung at start, with no session
// seen, is started again once: nothing ran.
func (d *death) startHangRerun() bool {
	if !d.hungAtStart() || !d.Policy.Task || d.hang.startRetried || len(d.pending()) > 0 {
		return false
	}
	d.hang.startRetried = true
	d.o.warn("task mode: the agent hung at start before any marker or model request; starting it again once")
	return true
}

// taskEnd returns supervise's exit code at the end of a task and tells the
// person what they must know.
func (d *death) taskEnd() int {
	o, e := d.o, d.e
	stuck := d.Task.report(o, &d.Book, &d.Config, d.Hold())
	switch {
	case stuck > 0:
		o.warn("task ended with a session that needs a person", "exit_code", ExitParked)
		return ExitParked
	case d.Task.outcome == marker.OutcomeCompleted:
		o.info("task ended: its last turn completed", "exit_code", ExitOK)
		return ExitOK
	}
	o.info("task ended: exiting with the agent's own status", "exit_code", e.Code,
		"last_outcome", string(d.Task.outcome))
	return e.Code
}
