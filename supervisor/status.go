package supervisor

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Status is what `supervise status --json` prints. Field names are a public
// contract (docs/design.md, Status); add fields, never rename them.
type Status struct {
	Name       string               `json:"name"`
	StateDir   string               `json:"state_dir"`
	Supervisor SupervisorStatus     `json:"supervisor"`
	Child      ChildStatus          `json:"child"`
	Guard      crashloop.GuardState `json:"crash_loop_guard"`
	Sessions   []SessionStatus      `json:"sessions"`
	// SessionCounts counts every session by state; SessionsTotal is their
	// number, SessionsOmitted how many Sessions leaves out (by default the
	// settled ones but the latest; status --all lists every one).
	SessionCounts   map[string]int `json:"session_counts"`
	SessionsTotal   int            `json:"sessions_total"`
	SessionsOmitted int            `json:"sessions_omitted"`
	Runs            []RunStatus    `json:"runs"`
	// TokenBudget is the state dir's token spend (--max-tokens-total), as
	// journaled; absent before any spend was recorded.
	TokenBudget *TokenBudgetStatus `json:"token_budget,omitempty"`
	// Notify and Journal are set only by a running supervise.
	Notify  *NotifyStatus  `json:"notify,omitempty"`
	Journal *JournalStatus `json:"journal,omitempty"`
}

// TokenBudgetStatus is the state dir's token spend: every session's usage
// the API proxy saw, across runs and restarts of supervise.
type TokenBudgetStatus struct {
	// Spent is every token counted; SinceLift what counts against
	// MaxTokensTotal (since a person last lifted the spent budget).
	Spent     int64 `json:"spent"`
	SinceLift int64 `json:"since_lift"`
	// MaxTokensTotal is the running supervise's --max-tokens-total (0:
	// none, or read offline); Exhausted: no model call is forwarded.
	MaxTokensTotal int64 `json:"max_tokens_total,omitempty"`
	Exhausted      bool  `json:"exhausted,omitempty"`
	// Parked is the session parked when the budget ran out.
	Parked string `json:"parked,omitempty"`
}

func tokenBudgetStatus(b machine.Budget, limit int64) *TokenBudgetStatus {
	if b.Spent == 0 && limit == 0 {
		return nil
	}
	return &TokenBudgetStatus{Spent: b.Spent, SinceLift: b.Since(), MaxTokensTotal: limit,
		Exhausted: b.Over(limit), Parked: b.Parked}
}

// NotifyStatus counts what arrived on the notify socket since supervise
// started.
type NotifyStatus struct {
	Socket   string            `json:"socket"`
	Accepted uint64            `json:"accepted"`
	Pings    uint64            `json:"pings"`
	Dropped  map[string]uint64 `json:"dropped"`
	// OutOfSequence counts turn markers that contradicted the session's
	// turn (a repeated or replayed begin, an end for another turn or a
	// repeated end) and were applied as no-ops.
	OutOfSequence uint64 `json:"out_of_sequence"`
	// RefusedOpenSessions counts turn-begins refused because they would
	// have opened more than --max-open-sessions sessions.
	RefusedOpenSessions uint64 `json:"refused_open_sessions"`
	// RefusedParked counts markers (and model calls seen by the proxy)
	// refused because their session is parked: only a person lifts a park.
	RefusedParked uint64 `json:"refused_parked"`
	// AcksUnsent counts barriers answered with no byte because the fd the
	// agent handed over would have blocked, or was not a pipe or socket.
	AcksUnsent uint64 `json:"acks_unsent"`
}

// JournalStatus counts the journal commits of this supervise.
type JournalStatus struct {
	Path         string `json:"path"`
	Commits      uint64 `json:"commits"`
	CommitErrors uint64 `json:"commit_errors"`
}

// SupervisorStatus describes the supervise process itself.
type SupervisorStatus struct {
	// Running is true when the status came live from a running supervise.
	Running bool      `json:"running"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// CleanShutdown is false while a supervise runs, and after one died
	// without shutting down.
	CleanShutdown bool `json:"clean_shutdown"`
	// UnreplayedCommit, read offline only: the last supervise stopped
	// between a death's commit reaching the journal's redo slot and
	// journal.db (journal/redo.go). The next start replays it; until then
	// this status shows the state before that death.
	UnreplayedCommit bool `json:"unreplayed_commit,omitempty"`
}

// ChildStatus describes the agent process.
type ChildStatus struct {
	PID int `json:"pid"`
	// State is starting, running, stopping, backoff (waiting to relaunch),
	// exited, or not-running (no supervise runs).
	State    string     `json:"state"`
	Run      uint64     `json:"run"`
	Started  *time.Time `json:"started"`
	Restarts uint64     `json:"restarts"`
	LastExit *RunStatus `json:"last_exit"`
	// Ready is true once the agent sent READY=1 in this run; StatusText
	// is its last STATUS= line.
	Ready      bool   `json:"ready"`
	StatusText string `json:"status_text,omitempty"`
	// Watchdog is the hang-detection period in effect, "" when off.
	Watchdog string `json:"watchdog,omitempty"`
	// Cgroup is the run's own cgroup directory, "" when it has none.
	Cgroup string `json:"cgroup,omitempty"`
	// OOMNamed is true when the run's cgroup counts OOM kills (memory
	// controller delegated): a death with one has reason oom.
	OOMNamed bool `json:"oom_named,omitempty"`
}

// SessionStatus is one session.
type SessionStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// ParkedBy is a parked session's kind of park (record.Parks), and
	// LiftedBy who can lift it: a person always, a changed agent for the
	// breaker's.
	ParkedBy      string     `json:"parked_by,omitempty"`
	LiftedBy      string     `json:"lifted_by,omitempty"`
	CrashCount    int        `json:"crash_count"`
	Reason        string     `json:"reason"`
	Turn          string     `json:"turn"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
	Phase         string     `json:"phase,omitempty"`
	Tool          string     `json:"tool,omitempty"`
	Detail        string     `json:"detail,omitempty"`
	// LastOutcome is how the session's last turn ended: completed, failed
	// or cancelled (its turn-end); "" while no turn has ended since its
	// last turn-begin.
	LastOutcome string `json:"last_outcome,omitempty"`
	// ResumeCommand is the command that resumes a parked or stopped session.
	ResumeCommand string `json:"resume_command,omitempty"`
	// Resume describes the continuation owed to a resume_pending session.
	Resume *ResumeStatus `json:"resume,omitempty"`
	// Wait is what a waiting session waits for: input, approval or
	// reconnect.
	Wait string `json:"wait,omitempty"`
	// Deadline is the session's earliest turn or phase deadline, while a
	// supervise with --turn-timeout or --phase-timeout runs it.
	Deadline *DeadlineStatus `json:"deadline,omitempty"`
	// Fingerprint is the agent's fingerprint when the crash breaker parked
	// the session: a launch with a different one lifts the park once.
	Fingerprint *record.Fingerprint `json:"fingerprint,omitempty"`
	// Effects are the side effects the current (or interrupted) turn
	// declared done (X_SUPERVISE_EVENT=effect), oldest first.
	Effects []string `json:"effects,omitempty"`
	// Tokens is the session's model-API usage across its resumes, as the
	// API proxy counted it.
	Tokens *record.Tokens `json:"tokens,omitempty"`
	// RetryAt is when a session waiting out a rate limit may call the
	// model API again (RFC 3339).
	RetryAt *time.Time `json:"retry_at,omitempty"`
}

// DeadlineStatus is a turn or phase deadline.
type DeadlineStatus struct {
	// Kind is "turn", "model phase" or "tool phase".
	Kind  string    `json:"kind"`
	Limit string    `json:"limit"`
	At    time.Time `json:"at"`
	// Since is when its clock started (turn-begin, resumed, phase marker).
	Since time.Time `json:"since"`
	// Extended is true when EXTEND_TIMEOUT_USEC moved it (capped at twice
	// Limit).
	Extended bool `json:"extended"`
}

// ResumeStatus is a continuation owed to a session.
type ResumeStatus struct {
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
	Manual  bool   `json:"manual"`
	// DeliveredToRun is the run it was last handed to, 0 if not yet.
	DeliveredToRun uint64 `json:"delivered_to_run"`
	// Held says why it is not being dispatched, "" if it is.
	Held    string `json:"held,omitempty"`
	Message string `json:"message"`
}

// RunStatus is one child run.
type RunStatus struct {
	Run           uint64        `json:"run"`
	PID           int           `json:"pid"`
	Started       time.Time     `json:"started"`
	Ended         *time.Time    `json:"ended"`
	ExitCode      int           `json:"exit_code"`
	Signal        int           `json:"signal"`
	Reason        record.Reason `json:"reason"`
	Dirty         bool          `json:"dirty"`
	LastHeartbeat *time.Time    `json:"last_heartbeat"`
}

// statusRuns is how many recent runs status shows.
const statusRuns = 10

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func runStatus(r record.Run) RunStatus {
	return RunStatus{Run: r.Run, PID: r.PID, Started: r.Started, Ended: timePtr(r.Ended),
		ExitCode: r.ExitCode, Signal: r.Signal, Reason: r.Reason, Dirty: r.Dirty,
		LastHeartbeat: timePtr(r.LastHeartbeat)}
}

func sessionStatus(s record.Session, stateDir, held string) SessionStatus {
	st := SessionStatus{ID: s.ID, State: string(s.State), CrashCount: s.CrashCount, Reason: s.Reason,
		Turn: s.Turn, LastHeartbeat: timePtr(s.LastHeartbeat), Phase: s.Phase, Tool: s.Tool, Detail: s.Detail,
		LastOutcome: s.Outcome, Tokens: s.Tokens, Effects: s.Effects}
	if s.State == record.Waiting && !s.RetryAt.IsZero() {
		st.RetryAt = timePtr(s.RetryAt.UTC())
	}
	if s.State == record.Parked || s.State == record.Stopped {
		st.ResumeCommand = ResumeCommand(stateDir, s.ID)
	}
	if s.State == record.Waiting {
		st.Wait = s.Wait
	}
	if s.State == record.Parked {
		st.Fingerprint = s.Fingerprint
		st.ParkedBy, st.LiftedBy = s.ParkedBy, record.LookupPark(s.ParkedBy).Lift
	}
	if r := s.Resume; r != nil && s.State == record.ResumePending {
		st.Resume = &ResumeStatus{Attempt: r.Attempt, Reason: r.Reason, Manual: r.Manual, DeliveredToRun: r.Run, Message: r.Message}
		if !r.Manual {
			st.Resume.Held = held
		}
	}
	return st
}

// ResumeCommand is the exact command that resumes session id.
func ResumeCommand(stateDir, id string) string { return machine.ResumeCommand(stateDir, id) }

func sortSessions(ss []SessionStatus) {
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
}

// ReadStatus builds the status of a supervise that is not running, from its
// journal (opened read-only): the open sessions, the latest settled ones and
// counts per state, or with all every session (held in memory: to print
// every session of a large journal as JSON, use WriteStatusJSON, which
// streams).
func ReadStatus(db *journal.DB, name, stateDir string, all bool) (Status, error) {
	return ReadStatusView(db, name, stateDir, View{All: all})
}

// ReadStatusView is ReadStatus with a View.
func ReadStatusView(db *journal.DB, name, stateDir string, v View) (Status, error) {
	sn, err := readSnapshot(db, name, stateDir)
	if err != nil {
		return sn.st, err
	}
	if !v.All {
		err = sn.collect(db, v)
		return sn.st, err
	}
	st := &sn.st
	st.Sessions = []SessionStatus{}
	st.SessionCounts = map[string]int{}
	err = sn.every(db, func(s SessionStatus) error {
		st.Sessions = append(st.Sessions, s)
		return nil
	})
	return sn.st, err
}

// WriteStatusJSON writes the status of a supervise that is not running as
// JSON, streaming every session with v.All.
func WriteStatusJSON(w io.Writer, db *journal.DB, name, stateDir string, v View) error {
	sn, err := readSnapshot(db, name, stateDir)
	if err != nil {
		return err
	}
	return sn.writeJSON(w, db, v)
}

// readHeader reads everything status shows but the sessions.
func readHeader(db *journal.DB, name, stateDir string) (Status, error) {
	st := Status{Name: name, StateDir: stateDir, Sessions: []SessionStatus{}, Runs: []RunStatus{}}
	err := db.View(func(tx *journal.Tx) error {
		st.Supervisor.CleanShutdown = tx.Clean()
		st.Supervisor.UnreplayedCommit = db.Unreplayed()
		if o, ok, err := tx.Owner(); err != nil {
			return err
		} else if ok {
			st.Supervisor.PID, st.Supervisor.Started = o.PID, o.Started
		}
		st.Child.State = "not-running"
		st.Child.Restarts = tx.Restarts()
		if c, ok, err := tx.Child(); err != nil {
			return err
		} else if ok {
			// Only after a supervise died: the child may or may not be alive.
			st.Child.PID, st.Child.Run, st.Child.Started = c.PID, c.Run, timePtr(c.Started)
			st.Child.State = "unknown"
		}
		if _, err := tx.State(policyGuard, &st.Guard); err != nil {
			return err
		}
		var b machine.Budget
		if _, err := tx.State(policyBudget, &b); err != nil {
			return err
		}
		st.TokenBudget = tokenBudgetStatus(b, 0)
		runs, err := tx.LastRuns(statusRuns)
		if err != nil {
			return err
		}
		for _, r := range runs {
			st.Runs = append(st.Runs, runStatus(r))
		}
		if len(runs) > 0 && !runs[0].Ended.IsZero() {
			last := runStatus(runs[0])
			st.Child.LastExit = &last
		}
		return nil
	})
	return st, err
}

// status builds the live status header and copies the sessions the loop
// holds; it runs on the loop goroutine. The sessions are listed by the
// caller, off the loop (statusSnap.collect, writeJSON).
func (s *Supervisor) status() (statusSnap, error) {
	st, err := readHeader(s.db, s.cfg.Name, s.cfg.StateDir)
	if err != nil {
		return statusSnap{}, err
	}
	m, p := s.m, s.run.proc
	st.Supervisor = SupervisorStatus{Running: true, PID: osGetpid(), Started: s.id.started}
	st.Child.State, st.Child.Restarts = m.Child(), m.Restarts
	st.Child.PID, st.Child.Run, st.Child.Started = 0, 0, nil
	if p != nil {
		st.Child.PID, st.Child.Run, st.Child.Started = p.PID(), m.Run.Run, timePtr(p.Started())
	}
	st.Child.LastExit = nil
	if m.LastExit != nil {
		last := runStatus(*m.LastExit)
		st.Child.LastExit = &last
	}
	st.Child.Ready, st.Child.StatusText = m.Ready, m.StatusText
	st.TokenBudget = tokenBudgetStatus(m.Budget, m.Config.MaxTokensTotal)
	if m.Watchdog.Period > 0 && p != nil {
		st.Child.Watchdog = m.Watchdog.Period.String()
	}
	if s.cg.run != nil && p != nil {
		st.Child.Cgroup = s.cg.run.Dir()
		st.Child.OOMNamed = s.cg.all.Memory()
	}
	st.Guard = m.Guard
	ns := s.notify.Stats()
	st.Notify = &NotifyStatus{Socket: s.notify.Path(), Accepted: ns.Accepted, Pings: s.in.pings.Load(),
		Dropped: map[string]uint64{}, OutOfSequence: m.OutOfSequence, RefusedOpenSessions: m.Refused,
		RefusedParked: m.RefusedParked, AcksUnsent: s.cs.acksUnsent}
	for reason, n := range ns.Dropped.All() {
		st.Notify.Dropped[reason] = n
	}
	st.Journal = &JournalStatus{Path: s.db.Path(), Commits: s.cs.commits, CommitErrors: s.cs.errors}
	mem := make(map[string]record.Session, len(m.Sessions))
	deadlines := map[string]*DeadlineStatus{}
	for id, sess := range m.Sessions {
		mem[id] = *sess
		if dl, ok := machine.SessionDeadline(sess, s.cfg.Deadlines); ok && p != nil {
			deadlines[id] = &DeadlineStatus{Kind: dl.Kind, Limit: dl.Limit.String(), At: dl.At.Round(0), Since: dl.From.Round(0), Extended: dl.Extended}
		}
	}
	return statusSnap{st: st, mem: mem, held: m.Hold(), deadlines: deadlines}, nil
}

// WriteText prints st for a person.
func WriteText(w io.Writer, st Status, now time.Time) error {
	ago := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return now.Sub(*t).Round(time.Second).String() + " ago"
	}
	b := &strings.Builder{}
	writeHeader(b, st, now, ago)
	tw := tabwriter.NewWriter(b, 0, 2, 2, ' ', 0)
	if len(st.Sessions) > 0 {
		fmt.Fprintln(b, "\nsessions:")
		fmt.Fprintln(tw, "  ID\tSTATE\tCRASHES\tTURN\tLAST\tHEARTBEAT\tPHASE/TOOL\tREASON")
		for _, s := range st.Sessions {
			pt := s.Phase
			if s.Tool != "" {
				pt += "/" + s.Tool
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", cell(s.ID), stateCell(s, now), s.CrashCount, dash(cell(s.Turn)), dash(s.LastOutcome),
				ago(s.LastHeartbeat), dash(cell(pt)), dash(s.Reason))
		}
		tw.Flush()
		for _, s := range st.Sessions {
			writeSessionNotes(b, s, now)
		}
	}
	if st.SessionsOmitted > 0 {
		fmt.Fprintf(b, "  (%d more settled sessions not listed: supervise status --all lists every one)\n", st.SessionsOmitted)
	}
	if st.SessionsTotal > 0 {
		states := make([]string, 0, len(st.SessionCounts))
		for state := range st.SessionCounts {
			states = append(states, state)
		}
		sort.Strings(states)
		fmt.Fprintf(b, "sessions by state (%d in all):", st.SessionsTotal)
		for _, state := range states {
			fmt.Fprintf(b, " %s %d", state, st.SessionCounts[state])
		}
		fmt.Fprintln(b)
	}
	if len(st.Runs) > 0 {
		fmt.Fprintln(b, "\nrecent runs:")
		fmt.Fprintln(tw, "  RUN\tPID\tSTARTED\tENDED\tEXIT\tSIGNAL\tREASON\tDIRTY")
		for _, r := range st.Runs {
			ended := "running"
			if r.Ended != nil {
				ended = ago(r.Ended)
			}
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%d\t%d\t%s\t%v\n", r.Run, r.PID, ago(&r.Started), ended, r.ExitCode, r.Signal, r.Reason, r.Dirty)
		}
		tw.Flush()
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func describeExit(r RunStatus) string {
	switch {
	case r.Signal != 0:
		return fmt.Sprintf("killed by signal %d", r.Signal)
	case r.ExitCode < 0:
		return "ended (status unknown)"
	}
	return fmt.Sprintf("exited %d", r.ExitCode)
}

func dirtyWord(d bool) string {
	if d {
		return "dirty"
	}
	return "clean"
}

// maxCell is the widest an agent-given value (a session or turn id, a
// tool) is shown in the status table: ids may be 256 bytes, and one such
// would push every column off the screen. The JSON keeps them whole.
const maxCell = 40

// cell shortens s to maxCell characters, the last an ellipsis.
func cell(s string) string {
	if utf8.RuneCountInString(s) <= maxCell {
		return s
	}
	r := []rune(s)
	return string(r[:maxCell-1]) + "…"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeSessionNotes adds what the table cannot say of one session: how to
// resume it, its resume, deadline, wait and fingerprint.
func writeSessionNotes(b *strings.Builder, s SessionStatus, now time.Time) {
	id := cell(s.ID) // the resume command keeps it whole
	limit := s.Wait == record.WaitLimit && s.RetryAt != nil
	switch {
	case s.ResumeCommand != "":
		fmt.Fprintf(b, "  %s is %s; resume it with: %s\n", id, s.State, s.ResumeCommand)
	case limit && !s.RetryAt.After(now):
		fmt.Fprintf(b, "  %s: a usage or rate limit ended its turn; it reset at %s: resumed at the next start\n", id, s.RetryAt.Format(time.RFC3339))
	case limit:
		fmt.Fprintf(b, "  %s: a usage or rate limit ended its turn; resumed when it resets at %s (in %s), or sooner with supervise resume\n",
			id, s.RetryAt.Format(time.RFC3339), s.RetryAt.Sub(now).Round(time.Second))
	case s.Resume != nil && s.Resume.Held != "":
		fmt.Fprintf(b, "  %s: resume attempt %d held (%s)\n", id, s.Resume.Attempt, s.Resume.Held)
	case s.Resume != nil && s.Resume.DeliveredToRun > 0:
		fmt.Fprintf(b, "  %s: resume attempt %d delivered to run %d, not yet taken by the agent\n", id, s.Resume.Attempt, s.Resume.DeliveredToRun)
	case s.Resume != nil:
		fmt.Fprintf(b, "  %s: resume attempt %d waiting for the next start\n", id, s.Resume.Attempt)
	}
	if d := s.Deadline; d != nil {
		ext := ""
		if d.Extended {
			ext = ", extended"
		}
		fmt.Fprintf(b, "  %s: %s deadline (%s%s) in %s\n", id, d.Kind, d.Limit, ext, d.At.Sub(now).Round(time.Second))
	}
	switch {
	case limit:
	case s.Wait != "" && s.RetryAt != nil:
		fmt.Fprintf(b, "  %s: waiting for %s: the model API's rate limit resets at %s (in %s); deadlines paused\n",
			id, s.Wait, s.RetryAt.Format(time.RFC3339), s.RetryAt.Sub(now).Round(time.Second))
	case s.Wait != "":
		fmt.Fprintf(b, "  %s: waiting for %s\n", id, s.Wait)
	}
	if len(s.Effects) > 0 {
		fmt.Fprintf(b, "  %s: %d side effects of the turn declared done: %s\n", id, len(s.Effects), strings.Join(s.Effects, ", "))
	}
	if t := s.Tokens; t != nil {
		fmt.Fprintf(b, "  %s: %d tokens (%d in, %d out)\n", id, t.Input+t.Output, t.Input, t.Output)
	}
	if f := s.Fingerprint; f != nil && len(f.Files) > 0 {
		a := f.Files[0]
		fmt.Fprintf(b, "  %s: parked under agent %s (%d bytes, modified %s, sha256 %s); a changed agent lifts the park once\n",
			id, a.Path, a.Size, a.MTime.Format(time.RFC3339), short(a.SHA256))
	}
}

// writeHeader writes the supervisor, child, cgroup, last exit and guard lines.
func writeHeader(b *strings.Builder, st Status, now time.Time, ago func(*time.Time) string) {
	fmt.Fprintf(b, "supervise %q (state dir %s)\n", st.Name, st.StateDir)
	switch {
	case st.Supervisor.Running:
		fmt.Fprintf(b, "supervisor: running, pid %d, up %s\n", st.Supervisor.PID, now.Sub(st.Supervisor.Started).Round(time.Second))
	case st.Supervisor.CleanShutdown:
		fmt.Fprintf(b, "supervisor: not running (last one shut down cleanly)\n")
	default:
		fmt.Fprintf(b, "supervisor: not running; the last one (pid %d) died without shutting down\n", st.Supervisor.PID)
	}
	if st.Supervisor.UnreplayedCommit {
		fmt.Fprintf(b, "journal: the last death's commit is in journal.db.redo, not yet in journal.db: the next start replays it; until then this shows the state before it\n")
	}
	c := st.Child
	switch {
	case c.PID > 0:
		fmt.Fprintf(b, "child: %s, pid %d, run %d, started %s, restarts %d\n", c.State, c.PID, c.Run, ago(c.Started), c.Restarts)
	default:
		fmt.Fprintf(b, "child: %s, restarts %d\n", c.State, c.Restarts)
	}
	if c.Cgroup != "" {
		oom := "an OOM kill cannot be named (no memory controller)"
		if c.OOMNamed {
			oom = "OOM kills are named"
		}
		fmt.Fprintf(b, "cgroup: %s; %s\n", c.Cgroup, oom)
	}
	if tb := st.TokenBudget; tb != nil {
		switch {
		case tb.Exhausted:
			fmt.Fprintf(b, "token budget: spent, %d tokens of --max-tokens-total %d: no model call is forwarded; lift it with: %s\n",
				tb.SinceLift, tb.MaxTokensTotal, ResumeCommand(st.StateDir, dash(tb.Parked)))
		case tb.MaxTokensTotal > 0:
			fmt.Fprintf(b, "token budget: %d of --max-tokens-total %d used\n", tb.SinceLift, tb.MaxTokensTotal)
		default:
			fmt.Fprintf(b, "tokens: %d used in this state dir\n", tb.Spent)
		}
	}
	if c.StatusText != "" {
		fmt.Fprintf(b, "agent status: %s\n", c.StatusText)
	}
	if l := c.LastExit; l != nil {
		fmt.Fprintf(b, "last exit: run %d %s (reason %s, %s) %s\n", l.Run, describeExit(*l), l.Reason, dirtyWord(l.Dirty), ago(l.Ended))
	}
	if st.Guard.Open {
		fmt.Fprintf(b, "crash-loop guard: OPEN after %d chained dirty deaths: automatic resumes are held\n", st.Guard.Chain)
	}
}

// stateCell is a session's STATE in the table: with its wait and, for a
// wait with a retry_at, the countdown to it ("waiting (limit, 4m10s)").
func stateCell(s SessionStatus, now time.Time) string {
	switch {
	case s.Wait != "" && s.RetryAt != nil && s.RetryAt.After(now):
		return s.State + " (" + s.Wait + ", " + s.RetryAt.Sub(now).Round(time.Second).String() + ")"
	case s.Wait != "" && s.RetryAt != nil:
		return s.State + " (" + s.Wait + ", due)"
	case s.Wait != "":
		return s.State + " (" + s.Wait + ")"
	}
	return s.State
}
