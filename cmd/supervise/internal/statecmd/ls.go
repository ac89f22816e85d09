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
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// `supervise ls`: every agent under the state root, live or not, in one
// table (or JSON). Each state dir is asked as `supervise status` asks one:
// its running supervise over the control socket, else its journal,
// read-only. Nothing there can stall the list: the control socket has
// lsLiveTimeout to answer, a journal locked by a process without a control
// socket is given up after the journal's lock timeout (100 ms) and shown
// as locked, and a journal that cannot be read is shown as damaged. State
// dirs are read lsWorkers at a time.
const (
	lsLiveTimeout = 3 * time.Second
	lsWorkers     = 8
	// lsWidth is the widest line of the table.
	lsWidth = 100
)

// The states of an agent in `supervise ls`.
const (
	lsLive         = "live"      // a supervise runs it and answered
	lsStopped      = "stopped"   // no supervise runs it; the last one shut down cleanly
	lsDied         = "died"      // no supervise runs it; the last one died without shutting down
	lsLocked       = "locked"    // its journal is held by a process that does not answer on the control socket
	lsUnresponsive = "no-answer" // its control socket took the connection but gave no status in time
	lsDamaged      = "damaged"   // its journal cannot be read
)

// lsList is what `supervise ls --json` prints. Field names are a public
// contract (README, supervise ls): add fields, never rename them.
type lsList struct {
	Root   string    `json:"root"`
	Agents []lsAgent `json:"agents"`
}

// lsAgent is one state dir.
type lsAgent struct {
	Name     string `json:"name"`
	StateDir string `json:"state_dir"`
	// State is live, stopped, died, locked, no-answer or damaged.
	State string `json:"state"`
	// Error says why the state is locked, unresponsive or damaged.
	Error      string       `json:"error,omitempty"`
	Supervisor lsSupervisor `json:"supervisor"`
	Child      lsChild      `json:"child"`
	Sessions   lsSessions   `json:"sessions"`
	// LastDeath is the latest run that ended, nil when none has.
	LastDeath *supervisor.RunStatus `json:"last_death"`
	// Tokens sums the model-API usage of the sessions status lists (every
	// open one and the latest settled ones).
	Tokens record.Tokens `json:"tokens"`
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
	root := fs.String("root", "", "the directory holding the state dirs (default $XDG_STATE_HOME/supervise, else ~/.local/state/supervise)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: supervise ls [--json] [--root DIR]

Every agent supervise runs or ran under the state root, live or not: its
supervise (live, stopped, died; locked or damaged when its journal cannot be
read), pid and uptime, the child's state, open, parked and waiting sessions
with the earliest retry_at, the last death and its reason, and tokens.`)
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
	if dir == "" {
		if dir, err = runflags.StateRoot(); err != nil {
			fmt.Fprintf(stderr, "supervise ls: %v\n", err)
			return exitcode.Usage
		}
	}
	return printList(ctx, dir, *asJSON, stdout, stderr)
}

// printList prints the agents under root, as a table or JSON.
func printList(ctx context.Context, root string, asJSON bool, stdout, stderr io.Writer) int {
	root, err := filepath.Abs(root)
	if err != nil {
		fmt.Fprintf(stderr, "supervise ls: %v\n", err)
		return exitcode.Usage
	}
	list := listAgents(ctx, root)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			fmt.Fprintf(stderr, "supervise ls: %v\n", err)
			return exitcode.Internal
		}
		return exitcode.OK
	}
	if _, err := io.WriteString(stdout, lsTable(list, time.Now())); err != nil {
		fmt.Fprintf(stderr, "supervise ls: %v\n", err)
		return exitcode.Internal
	}
	return exitcode.OK
}

// listAgents reads every state dir under root (a missing root lists
// none).
func listAgents(ctx context.Context, root string) lsList {
	names, _ := runflags.AgentNames(root)
	list := lsList{Root: root, Agents: make([]lsAgent, len(names))}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(lsWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				list.Agents[i] = readAgent(ctx, names[i], filepath.Join(root, names[i]), time.Now())
			}
		}()
	}
	for i := range names {
		work <- i
	}
	close(work)
	wg.Wait()
	return list
}

// readAgent is one state dir's entry.
func readAgent(ctx context.Context, name, dir string, now time.Time) lsAgent {
	a := lsAgent{Name: name, StateDir: dir}
	cctx, cancel := context.WithTimeout(ctx, lsLiveTimeout)
	defer cancel()
	st, err := supervisor.FetchStatusView(cctx, dir, supervisor.View{})
	if errors.Is(err, supervisor.ErrNoSupervisor) {
		// Read from the journal; the control socket is dialled once more,
		// and refused at once again.
		st, err = supervisor.LoadStatusView(cctx, dir, name, supervisor.View{})
		switch {
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
	}
	a.LastDeath = lastDeath(st)
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
// wider than lsWidth columns.
func lsTable(list lsList, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "state root: %s\n", list.Root)
	if len(list.Agents) == 0 {
		b.WriteString("no supervised agents here (supervise ls --root DIR looks elsewhere)\n")
		return b.String()
	}
	const format = "%-16s %-9s %-7s %-6s %-11s %4s %4s %4s %-8s %-15s %6s"
	line := func(cols ...any) {
		s := fmt.Sprintf(format, cols...)
		s = strings.TrimRight(s, " ")
		b.WriteString(clip(s, lsWidth))
		b.WriteByte('\n')
	}
	line("NAME", "SUPERVISE", "PID", "UP", "CHILD", "OPEN", "PARK", "WAIT", "RETRY", "LAST DEATH", "TOKENS")
	var notes []string
	for _, a := range list.Agents {
		pid, up := "-", "-"
		if a.Supervisor.PID > 0 {
			pid = fmt.Sprint(a.Supervisor.PID)
		}
		if a.Supervisor.Live {
			up = shortDuration(time.Duration(a.Supervisor.UptimeSeconds * float64(time.Second)))
		}
		child, open, park, wait, retry, death, tokens := "-", "-", "-", "-", "-", "-", "-"
		switch a.State {
		case lsLocked, lsUnresponsive, lsDamaged:
			notes = append(notes, fmt.Sprintf("%s: %s: %s", a.Name, a.State, a.Error))
		default:
			child = clip(a.Child.State, 11)
			open, park, wait = fmt.Sprint(a.Sessions.Open), fmt.Sprint(a.Sessions.Parked), fmt.Sprint(a.Sessions.Waiting)
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
		line(clip(a.Name, 16), a.State, pid, up, child, open, park, wait, retry, clip(death, 15), tokens)
	}
	for _, n := range notes {
		b.WriteString(clip(n, lsWidth))
		b.WriteByte('\n')
	}
	return b.String()
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
