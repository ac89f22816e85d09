// Package statecmd holds the commands that read or change the state of
// agents supervise runs or ran, from outside: `supervise status`, `supervise
// resume` and `supervise ls`. Each asks the running supervise over its
// control socket, else reads (or, for resume, updates) the journal, through
// package supervisor. They never create a state dir.
package statecmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// `supervise ls`: every agent under the state root, live or not, in one
// table (or JSON). Each state dir is asked as `supervise status` asks one:
// its running supervise over the control socket, else its journal,
// read-only. Nothing there can stall the list: the control socket has
// lsLiveTimeout to answer, a journal locked by a process without a control
// socket is given up after the journal's lock timeout (100 ms) and shown
// as locked, and a journal that cannot be read is shown as damaged. State
// dirs are read lsWorkers at a time. A state dir this user may not read
// is listed as no-access, never an error of the whole list.
//
// What ls adds beyond the counts is bounded at any size: at most
// lsActsPerAgent sessions that need a person are kept per agent (the JSON's
// needs_person; needs_person_total counts them all), and the table prints
// the commands of at most lsActLines of them, then one line for the rest.
const (
	lsLiveTimeout = 3 * time.Second
	lsWorkers     = 8
	// lsWidth is the widest line of the table (a command under it is
	// printed whole: cut, it would not run).
	lsWidth        = 100
	lsActsPerAgent = 10
	lsActLines     = 4
)

// SystemRoot holds the state dirs of agents installed as system services
// (supervise unit systemd writes --state-dir=/var/lib/supervise/NAME): ls
// lists it by default, beside the user's state root, when it exists. A
// variable for tests.
var SystemRoot = "/var/lib/supervise"

// The states of an agent in `supervise ls`.
const (
	lsLive         = "live"      // a supervise runs it and answered
	lsStopped      = "stopped"   // no supervise runs it; the last one shut down cleanly
	lsDied         = "died"      // no supervise runs it; the last one died without shutting down
	lsLocked       = "locked"    // its journal is held by a process that does not answer on the control socket
	lsUnresponsive = "no-answer" // its control socket took the connection but gave no status in time
	lsDamaged      = "damaged"   // its journal cannot be read
	lsNoAccess     = "no-access" // this user may not read its state dir or journal
)

// lsList is what `supervise ls --json` prints. Field names are a public
// contract (README, supervise ls): add fields, never rename them.
type lsList struct {
	// Root is the user's state root (or --root).
	Root string `json:"root"`
	// Roots are every directory ls looked in: Root, then the system root
	// of unit-installed agents (/var/lib/supervise) when --root is not
	// given.
	Roots  []lsRoot  `json:"roots"`
	Agents []lsAgent `json:"agents"`
}

// lsRoot is a directory ls looked in for state dirs.
type lsRoot struct {
	Path string `json:"path"`
	// Agents is how many state dirs ls found there.
	Agents int `json:"agents"`
	// Error says why none could be listed: the directory does not exist,
	// or this user may not read it.
	Error string `json:"error,omitempty"`
	// Owner is whose it is when this user may not read it (access.go).
	Owner *lsOwner `json:"owner,omitempty"`
}

// lsAct is a session that needs a person, and the command that acts.
type lsAct struct {
	Session string `json:"session"`
	// State is parked, stopped or waiting (for input or approval: Wait).
	State  string `json:"state"`
	Wait   string `json:"wait,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Command acts on it: supervise resume for a parked or stopped
	// session, as supervise status gives it; for a session waiting for a
	// person (who answers in the agent itself) the status command that
	// shows it.
	Command string `json:"command"`
}

// lsAgent is one state dir.
type lsAgent struct {
	Name     string `json:"name"`
	StateDir string `json:"state_dir"`
	// State is live, stopped, died, locked, no-answer or damaged.
	State string `json:"state"`
	// Error says why the state is locked, unresponsive, damaged or
	// no-access.
	Error string `json:"error,omitempty"`
	// Owner is whose the state dir is when this user may not read it
	// (no-access; access.go).
	Owner      *lsOwner     `json:"owner,omitempty"`
	Supervisor lsSupervisor `json:"supervisor"`
	Child      lsChild      `json:"child"`
	Sessions   lsSessions   `json:"sessions"`
	// LastDeath is the latest run that ended, nil when none has.
	LastDeath *supervisor.RunStatus `json:"last_death"`
	// Tokens sums the model-API usage of the sessions status lists (every
	// open one and the latest settled ones).
	Tokens record.Tokens `json:"tokens"`
	// NeedsPerson are the sessions only a person moves on (parked,
	// stopped, waiting for input or approval), with the command that acts:
	// at most lsActsPerAgent of them, parked first; NeedsPersonTotal
	// counts every one.
	NeedsPerson      []lsAct `json:"needs_person"`
	NeedsPersonTotal int     `json:"needs_person_total"`
}

// lsSupervisor is the supervise process of a state dir: the running one,
// or the last one.
type lsSupervisor struct {
	Live bool `json:"live"`
	// PID is the running supervise's pid, or the last one's (0 when not
	// known).
	PID     int        `json:"pid"`
	Started *time.Time `json:"started"`
	// UptimeSeconds is how long the running supervise has run (0 when none
	// runs).
	UptimeSeconds float64 `json:"uptime_seconds"`
}

// lsChild is the agent process.
type lsChild struct {
	State string `json:"state"`
	PID   int    `json:"pid"`
}

// lsSessions counts sessions: Open every open one (in_turn, waiting,
// resume_pending, parked, stopped), Parked and Waiting those states.
type lsSessions struct {
	Open    int `json:"open"`
	Parked  int `json:"parked"`
	Waiting int `json:"waiting"`
	Total   int `json:"total"`
	// EarliestRetryAt is the earliest retry_at of the sessions waiting out
	// a rate limit, nil when none is.
	EarliestRetryAt *time.Time `json:"earliest_retry_at"`
}

// Ls is `supervise ls [--json] [--root DIR]`, and returns its exit status.
func Ls(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON: {root, agents: [{name, state_dir, state, supervisor, child, sessions, last_death, tokens}]}")
	root := fs.String("root", "", "the directory holding the state dirs, and only it (default $XDG_STATE_HOME/supervise, else ~/.local/state/supervise, and "+SystemRoot+" where units install agents, if it exists)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: supervise ls [--json] [--root DIR]

Every agent supervise runs or ran under the state root (and, by default,
under `+SystemRoot+`, where supervise unit installs them), live or not: its
supervise (live, stopped, died; locked, damaged or no-access when its journal
cannot be read), pid and uptime, the child's state, its open sessions, what
needs a person (PARKED, STOPPED, INPUT or APPROVAL and how many), the earliest
retry_at, the last death and its reason, and tokens. Under the table, the
command that acts for each session that needs a person (a few, then where to
look for the rest).`)
		fs.PrintDefaults()
	}
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return runflags.ExitCode(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "supervise ls: unexpected argument %q\n", fs.Arg(0))
		return exitcode.Usage
	}
	dir := *root
	if set["root"] && strings.TrimSpace(dir) == "" {
		fmt.Fprintln(stderr, "supervise ls: --root is empty: give a directory, or leave the flag out for the default")
		return exitcode.Usage
	}
	var extra []string
	if dir == "" {
		if dir, err = runflags.StateRoot(); err != nil {
			fmt.Fprintf(stderr, "supervise ls: %v\n", err)
			return exitcode.Usage
		}
		extra = append(extra, SystemRoot)
	}
	return printList(ctx, dir, *asJSON, stdout, stderr, extra...)
}

// printList prints the agents under root, and under each of also that
// exists, as a table or JSON.
func printList(ctx context.Context, root string, asJSON bool, stdout, stderr io.Writer, also ...string) int {
	root, err := filepath.Abs(root)
	if err != nil {
		fmt.Fprintf(stderr, "supervise ls: %v\n", err)
		return exitcode.Usage
	}
	list := listAgents(ctx, root, also...)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			fmt.Fprintf(stderr, "supervise ls: %v\n", err)
			return exitcode.Internal
		}
	} else if _, err := io.WriteString(stdout, lsTable(list, time.Now())); err != nil {
		fmt.Fprintf(stderr, "supervise ls: %v\n", err)
		return exitcode.Internal
	}
	if why := unreadable(list); why != "" {
		fmt.Fprintf(stderr, "supervise ls: %s\n", why)
		return exitNoAccess
	}
	return exitcode.OK
}

// unreadable says what under list's own root this user may not read (the
// root itself, or state dirs in it), "" if nothing: then ls exits
// exitNoAccess (access.go). The state dirs of the other roots (the system
// root, looked in by default) do not count.
func unreadable(list lsList) string {
	for _, r := range list.Roots {
		if r.Path == list.Root && r.Owner != nil {
			return "this user may not list the state root " + r.Path + ", which belongs to " + r.Owner.String() +
				": nothing under it could be read, and none of its agents is listed"
		}
	}
	var names []string
	var owner *lsOwner
	for _, a := range list.Agents {
		if a.State == lsNoAccess && filepath.Dir(a.StateDir) == list.Root {
			if owner == nil {
				owner = a.Owner
			}
			names = append(names, a.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	shown := strings.Join(names[:min(len(names), 5)], ", ")
	if len(names) > 5 {
		shown += fmt.Sprintf(" and %d more", len(names)-5)
	}
	return fmt.Sprintf("%d state dir(s) under %s may not be read by this user (uid %d): %s (the first belongs to %s); they are listed as no-access, with their owner",
		len(names), list.Root, os.Geteuid(), shown, owner)
}

// listAgents reads every state dir under root and under each of also (a
// missing root lists none; the same directory is looked in once).
func listAgents(ctx context.Context, root string, also ...string) lsList {
	list := lsList{Root: root, Roots: []lsRoot{}, Agents: []lsAgent{}}
	seen := map[string]bool{}
	for _, r := range append([]string{root}, also...) {
		if seen[r] {
			continue
		}
		seen[r] = true
		dirs, err := stateDirs(r)
		lr := lsRoot{Path: r, Agents: len(dirs)}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			lr.Error = "does not exist"
		case errors.Is(err, fs.ErrPermission):
			lr.Owner = whose(r)
			lr.Error = noAccessWords("the state root", r, lr.Owner) + ": " + lr.Owner.asWhom() + "supervise ls --root " + r + " lists it"
		case err != nil:
			lr.Error = err.Error()
		}
		list.Roots = append(list.Roots, lr)
		list.Agents = append(list.Agents, dirs...)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(lsWorkers, len(list.Agents)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				a := &list.Agents[i]
				if a.State == "" {
					*a = readAgent(ctx, a.Name, a.StateDir, time.Now())
				}
			}
		}()
	}
	for i := range list.Agents {
		work <- i
	}
	close(work)
	wg.Wait()
	return list
}

// stateDirs lists the state dirs under root, sorted by name: every
// directory holding a journal, and every one this user may not look into
// (already no-access: under a state root, it is most likely another user's
// agent).
func stateDirs(root string) ([]lsAgent, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var dirs []lsAgent
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		a := newAgent(e.Name(), filepath.Join(root, e.Name()))
		_, err := os.Stat(statedir.JournalPath(a.StateDir))
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrPermission):
			a.noAccess(err)
		default:
			continue
		}
		dirs = append(dirs, a)
	}
	return dirs, nil // os.ReadDir sorts by name
}

func newAgent(name, dir string) lsAgent {
	return lsAgent{Name: name, StateDir: dir, NeedsPerson: []lsAct{}}
}

// noAccess marks a as a state dir this user may not read, and says whose
// it is.
func (a *lsAgent) noAccess(err error) {
	a.State = lsNoAccess
	a.Owner = whose(a.StateDir)
	a.Error = noAccessWords("the state dir", a.StateDir, a.Owner) + ": " + readsIt(a.Owner, a.StateDir)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		a.Error += " (" + pe.Op + " " + pe.Path + ")"
	}
}

// readAgent is one state dir's entry.
func readAgent(ctx context.Context, name, dir string, now time.Time) lsAgent {
	a := newAgent(name, dir)
	cctx, cancel := context.WithTimeout(ctx, lsLiveTimeout)
	defer cancel()
	st, err := supervisor.FetchStatusView(cctx, dir, supervisor.View{})
	if errors.Is(err, fs.ErrPermission) {
		a.noAccess(err)
		return a
	}
	if errors.Is(err, supervisor.ErrNoSupervisor) {
		// Read from the journal; the control socket is dialled once more,
		// and refused at once again.
		st, err = supervisor.LoadStatusView(cctx, dir, name, supervisor.View{})
		switch {
		case errors.Is(err, fs.ErrPermission):
			a.noAccess(err)
			return a
		case errors.Is(err, journal.ErrLocked):
			a.State, a.Error = lsLocked, err.Error()
			var le *journal.LockedError
			if errors.As(err, &le) {
				a.Supervisor.PID = le.PID
			}
			return a
		case err != nil:
			a.State, a.Error = lsDamaged, err.Error()
			return a
		}
	} else if err != nil {
		a.State, a.Error = lsUnresponsive, err.Error()
		return a
	}
	a.fill(st, now)
	return a
}

// fill sets a's fields from a status.
func (a *lsAgent) fill(st supervisor.Status, now time.Time) {
	sv := st.Supervisor
	a.Supervisor = lsSupervisor{Live: sv.Running, PID: sv.PID}
	if !sv.Started.IsZero() {
		t := sv.Started
		a.Supervisor.Started = &t
	}
	switch {
	case sv.Running:
		a.State = lsLive
		if !sv.Started.IsZero() {
			a.Supervisor.UptimeSeconds = max(0, now.Sub(sv.Started).Seconds())
		}
	case sv.CleanShutdown:
		a.State = lsStopped
	default:
		a.State = lsDied
	}
	a.Child = lsChild{State: st.Child.State, PID: st.Child.PID}
	for state, n := range st.SessionCounts {
		if record.SessionState(state).Open() {
			a.Sessions.Open += n
		}
	}
	a.Sessions.Parked = st.SessionCounts[string(record.Parked)]
	a.Sessions.Waiting = st.SessionCounts[string(record.Waiting)]
	a.Sessions.Total = st.SessionsTotal
	for _, s := range st.Sessions {
		if s.RetryAt != nil && (a.Sessions.EarliestRetryAt == nil || s.RetryAt.Before(*a.Sessions.EarliestRetryAt)) {
			t := *s.RetryAt
			a.Sessions.EarliestRetryAt = &t
		}
		if s.Tokens != nil {
			a.Tokens.Input = satAdd(a.Tokens.Input, s.Tokens.Input)
			a.Tokens.Output = satAdd(a.Tokens.Output, s.Tokens.Output)
		}
		if act, ok := needsPerson(s, a.StateDir); ok {
			a.NeedsPersonTotal++
			a.NeedsPerson = append(a.NeedsPerson, act)
		}
	}
	// Parked first, then stopped, then waiting; by session within each;
	// at most lsActsPerAgent kept.
	sort.SliceStable(a.NeedsPerson, func(i, j int) bool {
		x, y := a.NeedsPerson[i], a.NeedsPerson[j]
		if actRank(x) != actRank(y) {
			return actRank(x) < actRank(y)
		}
		return x.Session < y.Session
	})
	if len(a.NeedsPerson) > lsActsPerAgent {
		a.NeedsPerson = a.NeedsPerson[:lsActsPerAgent:lsActsPerAgent]
	}
	a.LastDeath = lastDeath(st)
}

// needsPerson says whether session s waits for a person, and what acts:
// a parked or stopped session is resumed by hand (the command status
// gives); one waiting for input or approval is answered in the agent,
// and its status shows it.
func needsPerson(s supervisor.SessionStatus, dir string) (lsAct, bool) {
	act := lsAct{Session: s.ID, State: s.State, Reason: s.Reason}
	switch {
	case s.ResumeCommand != "":
		act.Command = s.ResumeCommand
	case s.State == string(record.Waiting) && (s.Wait == string(marker.WaitInput) || s.Wait == string(marker.WaitApproval)):
		act.Wait = s.Wait
		act.Command = "supervise status --state-dir " + machine.ShellQuote(dir) + " --session " + machine.ShellQuote(s.ID)
	default:
		return act, false
	}
	return act, true
}

// actRank orders the sessions that need a person: parked, stopped,
// waiting for approval, waiting for input.
func actRank(a lsAct) int {
	switch {
	case a.State == string(record.Parked):
		return 0
	case a.State == string(record.Stopped):
		return 1
	case a.Wait == string(marker.WaitApproval):
		return 2
	}
	return 3
}

// needsWord is the NEEDS cell of an agent's row: what its most pressing
// sessions wait for, in capitals, and how many are in that state
// ("PARKED 2"); "-" when none.
func needsWord(a lsAgent) string {
	if a.NeedsPersonTotal == 0 || len(a.NeedsPerson) == 0 {
		return "-"
	}
	first := a.NeedsPerson[0]
	word := strings.ToUpper(first.State)
	n := 0
	switch first.State {
	case string(record.Parked):
		n = a.Sessions.Parked
	case string(record.Waiting):
		word = strings.ToUpper(first.Wait)
		for _, x := range a.NeedsPerson {
			if x.Wait == first.Wait {
				n++
			}
		}
	default:
		for _, x := range a.NeedsPerson {
			if x.State == first.State {
				n++
			}
		}
	}
	if n <= 0 {
		n = 1
	}
	return fmt.Sprintf("%s %d", word, n)
}

// lastDeath is the latest run of st that ended.
func lastDeath(st supervisor.Status) *supervisor.RunStatus {
	var last *supervisor.RunStatus
	for i := range st.Runs {
		r := &st.Runs[i]
		if r.Ended != nil && (last == nil || r.Run > last.Run) {
			last = r
		}
	}
	if last == nil && st.Child.LastExit != nil && st.Child.LastExit.Ended != nil {
		last = st.Child.LastExit
	}
	if last == nil {
		return nil
	}
	r := *last
	return &r
}

// satAdd adds token counts without wrapping (the journal's counts are the
// agent's word, via its API traffic); a negative count adds nothing.
func satAdd(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	if a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}

// lsTable is the table `supervise ls` prints: one line per agent, no line
// wider than lsWidth columns, then the commands that act for the sessions
// that need a person (lsActLines of them at most).
func lsTable(list lsList, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state root: %s\n", list.Root)
	for _, r := range list.Roots {
		switch {
		case r.Path == list.Root && r.Error == "":
		case r.Path == list.Root:
			fmt.Fprintf(&b, "  (%s)\n", r.Error)
		case r.Error != "":
			fmt.Fprintf(&b, "also looked in %s (unit-installed agents): %s\n", clip(r.Path, 4096), r.Error)
		default:
			fmt.Fprintf(&b, "and unit-installed agents: %s\n", clip(r.Path, 4096))
		}
	}
	if len(list.Agents) == 0 && len(list.Roots) > 0 && list.Roots[0].Owner != nil {
		b.WriteString("no agent could be listed: this user may not read the state root\n")
		return b.String()
	}
	if len(list.Agents) == 0 {
		b.WriteString("no supervised agents here (supervise ls --root DIR looks elsewhere)\n")
		return b.String()
	}
	const format = "%-16s %-9s %-7s %-6s %-11s %4s %-10s %-8s %-14s %6s"
	line := func(cols ...any) {
		s := fmt.Sprintf(format, cols...)
		s = strings.TrimRight(s, " ")
		b.WriteString(clip(s, lsWidth))
		b.WriteByte('\n')
	}
	line("NAME", "SUPERVISE", "PID", "UP", "CHILD", "OPEN", "NEEDS", "RETRY", "LAST DEATH", "TOKENS")
	var notes []string
	for _, a := range list.Agents {
		pid, up := "-", "-"
		if a.Supervisor.PID > 0 {
			pid = fmt.Sprint(a.Supervisor.PID)
		}
		if a.Supervisor.Live {
			up = shortDuration(time.Duration(a.Supervisor.UptimeSeconds * float64(time.Second)))
		}
		child, open, needs, retry, death, tokens := "-", "-", "-", "-", "-", "-"
		switch a.State {
		case lsLocked, lsUnresponsive, lsDamaged, lsNoAccess:
			notes = append(notes, fmt.Sprintf("%s: %s: %s", a.Name, a.State, a.Error))
		default:
			child = clip(a.Child.State, 11)
			open, needs = fmt.Sprint(a.Sessions.Open), needsWord(a)
			if r := a.Sessions.EarliestRetryAt; r != nil {
				retry = "in " + shortDuration(r.Sub(now))
				if !r.After(now) {
					retry = "now"
				}
			}
			if d := a.LastDeath; d != nil {
				death = deathWords(*d, now)
			}
			tokens = shortCount(a.Tokens.Input + a.Tokens.Output)
		}
		line(clip(a.Name, 16), a.State, pid, up, child, open, clip(needs, 10), retry, clip(death, 14), tokens)
	}
	for _, n := range notes {
		b.WriteString(clip(n, lsWidth))
		b.WriteByte('\n')
	}
	writeActs(&b, list)
	return b.String()
}

// writeActs writes, under the table, what needs a person and the command
// that acts: lsActLines sessions at most, then how many more and where.
func writeActs(b *strings.Builder, list lsList) {
	total, agents := 0, 0
	for _, a := range list.Agents {
		if a.NeedsPersonTotal > 0 {
			total += a.NeedsPersonTotal
			agents++
		}
	}
	if total == 0 {
		return
	}
	fmt.Fprintf(b, "\nneeds a person: %d %s in %d %s\n", total, plural(total, "session", "sessions"), agents, plural(agents, "agent", "agents"))
	shown := 0
	var rest []lsAgent // agents with sessions not shown
	for _, a := range list.Agents {
		if a.NeedsPersonTotal == 0 {
			continue
		}
		n := 0
		for _, act := range a.NeedsPerson {
			if shown == lsActLines {
				break
			}
			what := act.State
			if act.Wait != "" {
				what = "waiting for " + act.Wait + ": answer it in the agent"
			} else if act.Reason != "" {
				what += " (" + act.Reason + ")"
			}
			b.WriteString(clip(fmt.Sprintf("  %s %s: %s", a.Name, act.Session, what), lsWidth))
			b.WriteByte('\n')
			cmd := act.Command
			if clip(cmd, utf8.RuneCountInString(cmd)) != cmd {
				// A control character in the session id: not printed
				// raw; the agent's status lists the session.
				cmd = "supervise status --state-dir " + machine.ShellQuote(a.StateDir)
			}
			fmt.Fprintf(b, "    %s\n", cmd)
			shown++
			n++
		}
		if n < a.NeedsPersonTotal {
			rest = append(rest, a)
		}
	}
	if more := total - shown; more > 0 {
		// The first agent with sessions not shown, named as status finds
		// it: by --name under the user's state root, else by its dir.
		first := rest[0]
		look := "--name " + machine.ShellQuote(clip(first.Name, 40))
		if def, err := runflags.StateRoot(); err != nil || filepath.Dir(first.StateDir) != def {
			look = "--state-dir " + machine.ShellQuote(clip(first.StateDir, lsWidth))
		}
		fmt.Fprintf(b, "  and %d more in %d %s, the first:\n    supervise status %s\n", more, len(rest), plural(len(rest), "agent", "agents"), look)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// deathWords is a death in a few words: "signal 9 3h", "exit 1 2m",
// "oom 10s" (the reason, its exit code or signal, and how long ago).
func deathWords(r supervisor.RunStatus, now time.Time) string {
	w := string(r.Reason)
	switch row, _ := r.Reason.Row(); {
	case r.Signal > 0 && row.Said != "": // worded from its signal or status
		w = fmt.Sprintf("signal %d", r.Signal)
	case row.SignalWorded:
		w = fmt.Sprintf("exit %d", r.ExitCode)
	}
	if r.Ended != nil {
		w += " " + shortDuration(now.Sub(*r.Ended))
	}
	return w
}

// shortDuration is d in its largest unit or two: 45s, 12m, 3h05m, 2d04h.
func shortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// shortCount is n in at most 6 columns: 999, 12.3k, 4.5M, 1.2G.
func shortCount(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n < 1_000_000_000_000:
		return fmt.Sprintf("%.1fG", float64(n)/1e9)
	}
	return fmt.Sprintf("%.0e", float64(n))
}

// clip cuts s to at most n columns (runes), marking a cut with "…". A
// name is the agent's own (a directory name): control characters are
// shown as "?" so a name cannot move the terminal's cursor.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
