// Package chaos proves that an agent survives a crash under supervise: it
// runs the agent under a real `supervise run` on a scratch state dir, kills
// it with SIGKILL at chosen points of its turns, and checks after each kill
// what the protocol promises (DESIGN.md, "Chaos for agent authors"):
//
//   - decision: supervise journaled resume_pending for the interrupted
//     session (parked once the same turn died more than --resume-limit times);
//   - resumed: the next run was handed the resume and reported `resumed`
//     before anything else in that session;
//   - completed: the resumed turn ended `completed`;
//   - parked: a second kill in the same turn parked the session;
//   - survivors: no process of the killed tree outlived it. A process
//     that had left the agent's process group (setsid), where a
//     process-group kill cannot reach it, is a warning, not a failure:
//     supervise's sweep ends it (Codex runs its shell snapshot so; hooks
//     in flight, `supervise notify` and `supervise-notify`, are not
//     counted at all);
//   - one-tree: no process of an earlier run was alive when a run started;
//   - turn-once: the interrupted turn was not started a second time (a
//     turn-begin with the same turn id instead of `resumed`, or after it
//     while the resumed turn is open, which supervise ignores as repeated
//     but the agent sent all the same);
//   - effect-once: no side effect the turn declared done (an `effect`
//     marker) was declared again by a later run of the same turn: a
//     resumed turn must skip what its resume file lists as done;
//   - turn-fresh: no turn-begin reused the id of a turn of that session
//     that had ended or was parked (turn ids must stay fresh across
//     restarts);
//   - agent-died: the agent did not die dirty on its own.
//
// It never writes into a real state dir: supervise runs on a scratch one
// of chaos's own (Config.StateDir, if given, must not exist or be empty),
// and --state-dir or --name among the run flags is refused.
//
// # How it observes the agent
//
// Run starts the real supervise binary (so a Go test never makes its own
// process a child subreaper, and sees exactly what users run) and passes it
// one end of a socket pair, named by SUPERVISE_CHAOS_FD. supervise reports
// every launch, every committed batch of turn markers and every death with
// its decisions on it, and its loop waits for the harness's answer before
// it acknowledges the batch's barriers or launches the next run. So a kill
// "at turn-begin" lands right after the marker is journaled and before the
// agent's barrier returns, a kill "at tool" lands inside the tool phase
// of an agent that barriers before its side effects, and a kill "at
// tool-end" lands right after a declared effect (or the phase leaving the
// tool) is journaled, before the agent goes on, every time the agent waits
// for that marker's barrier, without polling `supervise status` and racing
// the agent. Only `random` kills from a timer, at a seeded offset within
// the duration of the first completed turn. (A repeat kill of a resumed
// turn lands right after its `resumed` in every mode: resumed turns are
// often too short for a random offset.)
//
// A kill is judged by what the killed run's own markers say: when the
// batch supervise journals at the death (or a marker of the killed tree
// heard after it) ends or closes the killed turn, the agent had sent the
// turn's end before the kill landed (a random kill, or an agent that does
// not wait at the marker it was killed at). That kill interrupted no turn:
// it is a miss, not a row of the report, counted in Report.Misses and made
// again at the next kill point, however many miss, so the verdict does not
// depend on the load.
//
// The kill is SIGKILL to the agent process alone (pinned by a pidfd), as a
// crash or the OOM killer would; what happens to its tools is supervise's
// job, and the survivors check verifies it with a scan of /proc for the
// run's SUPERVISE_TREE tag. Linux only.
package chaos

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/observe"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// Point is where in a turn the agent is killed.
type Point string

// Kill points.
const (
	// TurnBegin kills right after the turn's turn-begin is journaled (for a
	// repeat kill: right after its `resumed`).
	TurnBegin Point = "turn-begin"
	// Tool kills right after a `phase tool` marker is journaled: inside
	// the tool, before its side effect when the agent barriers first.
	Tool Point = "tool"
	// ToolEnd kills right after a tool finished: an `effect` marker, or a
	// `phase` marker that leaves the tool phase, is journaled, before the
	// turn ends. Where a redone side effect bites: the effect is done, the
	// turn is not.
	ToolEnd Point = "tool-end"
	// Random kills at a seeded offset within the turn.
	Random Point = "random"
)

// ParsePoint parses a kill point name.
func ParsePoint(s string) (Point, error) {
	switch p := Point(s); p {
	case TurnBegin, Tool, ToolEnd, Random:
		return p, nil
	}
	return "", fmt.Errorf("unknown kill point %q: want turn-begin, tool, tool-end or random", s)
}

// Check names, as they prefix each failure.
const (
	CheckDecision  = "decision"
	CheckResumed   = "resumed"
	CheckCompleted = "completed"
	CheckParked    = "parked"
	CheckSurvivors = "survivors"
	CheckOneTree   = "one-tree"
	CheckTurnOnce  = "turn-once"
	CheckEffect    = "effect-once"
	CheckFresh     = "turn-fresh"
	CheckAgentDied = "agent-died"
	CheckNoTurns   = "no-turns"
	CheckKillPoint = "kill-point"
	CheckTimeout   = "timeout"
	CheckSupervise = "supervise"
)

// Config says what to run and how to kill it.
type Config struct {
	// Argv is the agent's command line. The agent must run turns on its
	// own: a test mode, a scripted prompt, or a one-shot task CLI with
	// --resume-exec in RunFlags.
	Argv []string
	// Supervise is the supervise binary; "" finds one (see Binary).
	Supervise string
	// StateDir is supervise's state dir, a scratch one: it must not exist
	// or be empty (a dir that holds anything, such as a real journal, is
	// refused with ErrUsage: chaos never writes into one). "" makes one in
	// the temp dir, removed after a passing run (Report.StateDir names it
	// after a failing one).
	StateDir string
	// RunFlags are extra `supervise run` flags, e.g.
	// "--resume-exec=claude -p -r {session} {message}", checked before
	// anything starts as supervise run checks them (SUPERVISE_<FLAG> in
	// Env fills those not given). --state-dir and --name are refused:
	// chaos picks the state dir.
	RunFlags []string
	// Kills is how many kills to make (default 3: a resume that completes,
	// then a resume killed again, which must park).
	Kills int
	// Seed seeds the random choices; 0 picks one (Report.Seed has it).
	Seed uint64
	// At is where in a turn to kill (default TurnBegin).
	At Point
	// Timeout bounds the whole run (default 2 minutes).
	Timeout time.Duration
	// Dir is the agent's working directory ("" = the current one); Env
	// its environment (nil = this process's).
	Dir string
	Env []string
	// Output receives supervise's log and the agent's output; nil writes
	// them to supervise.log next to the state dir (Report.Log).
	Output io.Writer
}

// Kill is one kill and what followed it: a row of the report.
type Kill struct {
	Kill int `json:"kill"`
	// At is the kill point: turn-begin, resumed (a repeat kill at the
	// resumed turn's start), "tool NAME", or "random +OFFSET".
	At      string `json:"at"`
	Run     uint64 `json:"run"`
	Session string `json:"session"`
	Turn    string `json:"turn"`
	// Repeat is how many times in a row this turn has now been killed.
	Repeat int `json:"repeat"`
	// Decision is what supervise journaled for the session at the death:
	// resume_pending, parked, or none.
	Decision  string `json:"decision"`
	Reason    string `json:"reason,omitempty"`
	Resumed   bool   `json:"resumed"`
	Completed bool   `json:"completed"`
	// KilledAgain is set when the resumed turn was killed by the next kill
	// before it could complete (so Completed is not expected).
	KilledAgain bool `json:"killed_again"`
	Parked      bool `json:"parked"`
	// Survivors counts processes of the killed tree that outlived it.
	Survivors int `json:"survivors"`
	// Escaped counts processes of the tree outside the agent's process
	// group when it was killed (setsid, setpgid): a process-group kill
	// misses them; supervise's sweep ended them (Report.Warnings names
	// them).
	Escaped int `json:"escaped"`
	// Failed names the checks this kill failed; empty when it passed.
	Failed []string `json:"failed"`
}

// Verdict is "ok" or the failed checks.
func (k Kill) Verdict() string {
	if len(k.Failed) == 0 {
		return "ok"
	}
	return "FAIL " + strings.Join(k.Failed, ",")
}

// Report is the outcome of a chaos run.
type Report struct {
	OK   bool   `json:"ok"`
	Seed uint64 `json:"seed"`
	At   Point  `json:"at"`
	// Planned is how many kills the run was to make (Config.Kills, or its
	// default): with Seed and At, what replays it.
	Planned int `json:"planned_kills"`
	// Kills is one entry per kill that landed in a turn.
	Kills []Kill `json:"kills"`
	// Failures are the failed checks, each "check: what happened".
	Failures []string `json:"failures"`
	// FailedChecks are the names of the failed checks, sorted, unique.
	FailedChecks []string `json:"failed_checks"`
	// Notes say what was not exercised, and why.
	Notes []string `json:"notes,omitempty"`
	// Warnings say what the agent does that supervise covers for and
	// another supervisor might not: processes that left the agent's
	// process group. They do not fail the run.
	Warnings []string `json:"warnings,omitempty"`
	// Runs, Supervisors, TurnsCompleted and Misses count what happened:
	// agent launches, supervise invocations, turns that ended completed,
	// and random kills that landed after their turn had ended.
	Runs           int `json:"runs"`
	Supervisors    int `json:"supervisors"`
	TurnsCompleted int `json:"turns_completed"`
	Misses         int `json:"misses"`
	// DroppedSenders counts the datagrams supervise's log says it dropped
	// because it did not hear their sender (reason=sender): most often a
	// one-shot sender that had exited before supervise read its marker,
	// which is then lost, and with it what chaos checks for it.
	DroppedSenders int `json:"dropped_senders"`
	// Elapsed is how long it took.
	Elapsed time.Duration `json:"elapsed_ns"`
	// StateDir and Log are kept after a failure, for a look.
	StateDir string `json:"state_dir,omitempty"`
	Log      string `json:"log,omitempty"`
}

// Failed reports whether check failed.
func (r *Report) Failed(check string) bool { return slices.Contains(r.FailedChecks, check) }

// ErrUsage wraps configuration errors.
var ErrUsage = errors.New("chaos: bad configuration")

// Run kills the agent as cfg says and reports what followed. The error is
// for a run that could not happen at all (no binary, a bad configuration,
// a state dir in use); failed checks are in the Report, with OK false.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if len(cfg.Argv) == 0 {
		return nil, fmt.Errorf("%w: no agent command line", ErrUsage)
	}
	if cfg.Kills == 0 {
		cfg.Kills = 3
	}
	if cfg.Kills < 0 {
		return nil, fmt.Errorf("%w: kills must be positive", ErrUsage)
	}
	if cfg.At == "" {
		cfg.At = TurnBegin
	}
	if _, err := ParsePoint(string(cfg.At)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64() >> 1
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	limit, err := resumeLimit(cfg, env)
	if err != nil {
		return nil, err
	}
	if err := scratchOnly(cfg.StateDir); err != nil {
		return nil, err
	}
	// The state dir is chaos's own: supervise gets it as --state-dir,
	// which wins over these, but nothing of a real one is passed on.
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, runflags.EnvName("state-dir")+"=") || strings.HasPrefix(kv, runflags.EnvName("name")+"=")
	})
	bin := cfg.Supervise
	var cleanBin func()
	if bin == "" {
		if bin, cleanBin, err = Binary(ctx); err != nil {
			return nil, err
		}
		defer cleanBin()
	}
	rep := &Report{Seed: cfg.Seed, At: cfg.At, Planned: cfg.Kills, Kills: []Kill{}, Failures: []string{}, FailedChecks: []string{}}
	scratch := ""
	stateDir := cfg.StateDir
	if stateDir == "" {
		if scratch, err = os.MkdirTemp("", "supervise-chaos-"); err != nil {
			return nil, err
		}
		stateDir = filepath.Join(scratch, "state")
	}
	var out io.Writer = cfg.Output
	if out == nil {
		logDir := scratch
		if logDir == "" {
			logDir = filepath.Dir(stateDir)
		}
		rep.Log = filepath.Join(logDir, "supervise.log")
		f, err := os.OpenFile(rep.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		out = f
	}
	// supervise's output is copied in by exec's goroutine while the
	// harness writes its own lines: one writer at a time, which also
	// counts the markers supervise dropped for their sender.
	drops := &dropWatch{w: out}
	out = drops
	h := &harness{cfg: cfg, bin: bin, stateDir: stateDir, env: env, out: out, drops: drops, limit: limit, rep: rep,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed)),
		sessions: map[string]*sessState{}, runs: map[uint64]*runState{}}
	h.plan = plan(cfg.Kills, limit)
	start := time.Now()
	err = h.run(ctx)
	rep.Elapsed = time.Since(start)
	if err != nil {
		if scratch != "" {
			os.RemoveAll(scratch)
		}
		return nil, err
	}
	rep.OK = len(rep.Failures) == 0
	switch {
	case rep.OK && scratch != "" && cfg.Output == nil:
		os.RemoveAll(scratch)
		rep.Log = ""
	case rep.OK && scratch != "":
		os.RemoveAll(scratch)
	default:
		rep.StateDir = stateDir
	}
	return rep, nil
}

// scratchOnly refuses a state dir that exists and holds anything: it may
// be a real one, with a journal chaos must never write into.
func scratchOnly(dir string) error {
	if dir == "" {
		return nil
	}
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%w: state dir %s: %v", ErrUsage, dir, err)
	case len(ents) > 0:
		return fmt.Errorf("%w: state dir %s is not empty: chaos runs on a scratch state dir of its own and never writes into one that may hold a journal; leave StateDir empty", ErrUsage, dir)
	}
	return nil
}

// runArgs are the flags of the `supervise run` that Run starts, before its
// "--" and the agent's argv. --rerun-task: each invocation after a park is
// a fresh run of the task on purpose (a new session to kill), not a rerun
// by mistake.
//
// The crash-loop guard is off unless flags set --guard-trip: chaos kills
// the agent on purpose, run after run, and a guard tripped by its own kills
// would hold the very resumes it checks (a held resume is supervise's
// policy, not the agent's doing). With parks holding against the agent's
// own turn-begins, an agent that moves to a new session after a park
// otherwise trips it within three kills.
func runArgs(stateDir string, flags []string) []string {
	return append([]string{"--state-dir", stateDir, "--rerun-task", "--guard-trip", "0"}, flags...)
}

// resumeLimit reads the run flags as the `supervise run` that Run starts
// will: with runflags' flags, defaults and checks, and SUPERVISE_<FLAG>
// taken from env, the environment supervise gets. It returns the
// --resume-limit in force: how many kills of one turn are resumed before
// the next one parks it. --resume off is refused: it turns off what chaos
// checks.
func resumeLimit(cfg Config, env []string) (int, error) {
	fs := flag.NewFlagSet("supervise run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f runflags.Flags
	f.Register(fs)
	stateDir := cfg.StateDir
	if stateDir == "" {
		stateDir = os.TempDir() // the scratch dir is made later; any dir checks alike
	}
	if err := fs.Parse(runArgs(stateDir, cfg.RunFlags)); err != nil {
		return 0, fmt.Errorf("%w: run flags: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("%w: run flags: %q is not a flag", ErrUsage, fs.Arg(0))
	}
	// The state dir is chaos's: a --state-dir or --name of the caller's
	// would point supervise at a real journal.
	own := flag.NewFlagSet("run flags", flag.ContinueOnError)
	own.SetOutput(io.Discard)
	var g runflags.Flags
	g.Register(own)
	if own.Parse(cfg.RunFlags) == nil {
		var refused []string
		own.Visit(func(f *flag.Flag) {
			if f.Name == "state-dir" || f.Name == "name" {
				refused = append(refused, "--"+f.Name)
			}
		})
		if len(refused) > 0 {
			return 0, fmt.Errorf("%w: run flags: %s refused: chaos runs on a scratch state dir of its own and never writes into a real one", ErrUsage, strings.Join(refused, " and "))
		}
	}
	set, err := runflags.Overlay(fs, lookupIn(env))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if f.ResumeOff() {
		src := "--resume off"
		if !set["resume"] {
			src = runflags.EnvName("resume") + "=off"
		}
		return 0, fmt.Errorf("%w: %s turns automatic resumes off, which is what chaos checks; unset it", ErrUsage, src)
	}
	rc, _, err := f.Config(set, cfg.Argv, nil, io.Discard)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return rc.Resume.Limit, nil
}

// lookupIn looks a variable up in env as a process started with env sees
// it: the last setting wins.
func lookupIn(env []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], name+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}

// plan says, for each kill, whether it kills again the turn the previous
// kill interrupted (after its resume) rather than a fresh turn. Kills go in
// cycles: one kill whose resume must complete, then one turn killed
// limit+1 times, which must park; a cycle cut short by the count is all
// fresh kills.
func plan(kills, limit int) []bool {
	var p []bool
	for len(p) < kills {
		p = append(p, false) // a resume that completes
		if len(p)+limit+1 > kills {
			continue
		}
		p = append(p, false)
		for range limit {
			p = append(p, true)
		}
	}
	return p[:kills]
}

// Stages of a kill.
const (
	stageDeath  = iota // killed; its death not yet recorded
	stageResume        // resume_pending; waiting for `resumed`
	stageTurn          // resumed; waiting for the turn to complete
)

type killState struct {
	idx      int // in rep.Kills
	run      uint64
	session  string
	turn     string
	repeat   int
	stage    int
	prev     *killState // the kill whose resumed turn this one killed again
	snapshot []proc
	escaped  []proc // outside the leader's group at the kill (see escapees)
	leader   int
	// deliveredTo is the run handed the resume; turnRun the run that
	// reported resumed.
	deliveredTo, turnRun uint64
	// ended is set when the killed run's markers, journaled after the
	// kill was decided (in the batch supervise drains at the death, or
	// later), end or close the killed session's turn: the agent had sent
	// its turn-end before the kill landed, so the kill interrupted no
	// turn of it (a miss).
	ended bool
	// outcome is the outcome of that turn-end ("" for closed).
	outcome string
}

type sessState struct {
	inTurn      bool
	turn        string
	alias       string // the id a resumed turn was renumbered to (Codex)
	phase, tool string
	began       time.Time
	resumed     bool // the open turn is a resumed one
	// crashes models the session's crash count: dirty deaths mid-turn
	// since its last completed turn (DESIGN.md, decision table).
	crashes int
	gen     uint64 // bumped at every turn start, for random timers
	// leftTool is set while the marker being read moved the phase out of
	// tool (toolEnded names that tool): a tool-end kill point.
	leftTool  bool
	toolEnded string
	// effects are the keys the open turn declared done, with the run that
	// first declared each; reset at turn-begin, kept across a resume.
	effects map[string]uint64
	redone  map[string]bool // keys already failed effect-once in this turn
	// closed are the turn ids of the session that ended or were parked,
	// with how and in which run: a turn-begin must not reuse them.
	closed map[string]closedTurn
	// lastKill is the last kill in this session, which failures of a
	// later run name.
	lastKill *killState
}

// closedTurn is how a turn of a session was closed.
type closedTurn struct {
	how string // "ended completed", "ended failed", "was parked", ...
	run uint64
}

type runState struct {
	n   uint64
	tag string
	t   *target
}

type harness struct {
	cfg      Config
	bin      string
	stateDir string
	env      []string
	out      io.Writer
	drops    *dropWatch
	limit    int
	rng      *rand.Rand
	plan     []bool

	mu       sync.Mutex
	rep      *Report
	sessions map[string]*sessState
	runs     map[uint64]*runState
	cur      *runState
	tree     string // SUPERVISE_TREE=<tree>.
	inflight *killState
	open     *killState
	turnDur  time.Duration // the first fresh turn that completed
	idle     int           // turns completed while waiting for a kill point
	// missed counts the kills in a row that landed after the agent had
	// already ended the turn (see killState.ended); it is reset by a kill
	// that lands. missedAt is where the last one was made.
	missed    int
	missedAt  string
	done      bool
	stopping  bool
	stop      func()
	seenTurns int // turn starts in the current supervise invocation
	allTurns  int // turn starts in every invocation
	// earlyDeaths counts dirty deaths before any turn was ever reported:
	// an agent that cannot get going is judged after a few, not at the
	// timeout.
	earlyDeaths int
}

// run invokes supervise until the plan is done, a check makes going on
// pointless, or the timeout.
func (h *harness) run(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	for {
		code, err := h.supervise(ctx)
		if err != nil {
			return err
		}
		h.mu.Lock()
		done, seen := h.done, h.seenTurns
		h.mu.Unlock()
		if done {
			break
		}
		if ctx.Err() != nil {
			h.timedOut()
			break
		}
		var msg, check string
		switch code {
		case 0, 5: // the agent ended cleanly, or a task's session is parked
			if seen == 0 {
				check, msg = CheckNoTurns, fmt.Sprintf("the agent ran and ended (supervise exit %d) without reporting a turn: is it wired to NOTIFY_SOCKET (hooks installed and trusted), and does it run turns on its own?", code)
			}
		case 3:
			return fmt.Errorf("state dir %s is in use by another supervise", h.stateDir)
		case 126, 127:
			check, msg = CheckSupervise, fmt.Sprintf("the agent could not be started (exit %d): see %s", code, h.logName())
		default:
			check, msg = CheckSupervise, fmt.Sprintf("supervise exited %d before the kills were done: see %s", code, h.logName())
		}
		if check != "" {
			h.mu.Lock()
			h.fail(check, nil, "%s", msg)
			h.mu.Unlock()
			break
		}
	}
	h.finish()
	return nil
}

func (h *harness) logName() string {
	if h.rep.Log != "" {
		return h.rep.Log
	}
	return "the output"
}

// supervise runs one `supervise run` and handles its events until it exits.
func (h *harness) supervise(ctx context.Context) (int, error) {
	conn, theirs, err := observe.Pair()
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	args := append([]string{"run"}, runArgs(h.stateDir, h.cfg.RunFlags)...)
	args = append(append(args, "--"), h.cfg.Argv...)
	cmd := exec.Command(h.bin, args...)
	cmd.Dir = h.cfg.Dir
	cmd.Env = append(slices.Clone(h.env), observe.EnvFD+"=3")
	cmd.Stdout, cmd.Stderr = h.out, h.out
	// The output is copied through a pipe: a process of the agent's tree
	// that outlived supervise and holds it does not hold up the run.
	cmd.WaitDelay = 5 * time.Second
	cmd.ExtraFiles = []*os.File{theirs}
	// If the harness dies, supervise stops the agent cleanly (Linux).
	cmd.SysProcAttr = superviseAttr()
	fmt.Fprintf(h.out, "chaos: starting %s\n", strings.Join(cmd.Args, " "))
	if err := cmd.Start(); err != nil {
		theirs.Close()
		return 0, fmt.Errorf("starting supervise: %w", err)
	}
	theirs.Close()
	var once sync.Once
	stop := func() {
		once.Do(func() { cmd.Process.Signal(syscall.SIGTERM) })
	}
	h.mu.Lock()
	h.rep.Supervisors++
	h.seenTurns = 0
	h.stop = stop
	h.stopping = h.done
	done := h.done
	h.mu.Unlock()
	if done {
		stop()
	}
	quit := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.stopping = true
			h.mu.Unlock()
			stop()
		case <-quit:
		}
	}()
	for {
		ev, err := conn.Next()
		if err != nil {
			break
		}
		h.handle(ctx, ev)
		if err := conn.Done(); err != nil {
			break
		}
	}
	close(quit)
	werr := cmd.Wait()
	h.mu.Lock()
	h.stop = nil
	if h.cur != nil {
		h.closeRun(h.cur.n)
	}
	h.mu.Unlock()
	var ee *exec.ExitError
	switch {
	case werr == nil, errors.Is(werr, exec.ErrWaitDelay):
		return 0, nil
	case errors.As(werr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, werr
}

func (h *harness) handle(ctx context.Context, ev supervisor.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev.Kind {
	case supervisor.EventStart:
		h.onStart(ctx, ev)
	case supervisor.EventMarkers:
		h.onMarkers(ev)
	case supervisor.EventDeath:
		h.onDeath(ev)
	}
}

func (h *harness) onStart(ctx context.Context, ev supervisor.Event) {
	h.rep.Runs++
	if i := strings.LastIndexByte(ev.Tag, '.'); i > 0 {
		h.tree = ev.Tag[:i+1]
	}
	for _, p := range scanTree(h.tree, false) {
		if p.tag != ev.Tag {
			h.fail(CheckOneTree, nil, "run %d started while process %s of an earlier tree (%s) was alive", ev.Run, p, p.tag)
		}
	}
	r := &runState{n: ev.Run, tag: ev.Tag}
	r.t, _ = pin(ev.PID, func() bool {
		st, err := child.StartTime(ctx, ev.PID)
		return err == nil && st == ev.StartTime
	})
	h.runs[ev.Run] = r
	h.cur = r
	for _, s := range h.sessions {
		s.inTurn = false // a new process: whatever ran before is over
	}
	if o := h.open; o != nil && o.stage == stageResume && o.deliveredTo == 0 {
		switch {
		case slices.Contains(ev.Delivered, o.session):
			o.deliveredTo = ev.Run
		case ev.Held != "":
			h.fail(CheckResumed, o, "run %d was not handed the resume: supervise held it (%s)", ev.Run, ev.Held)
			h.resolve(o)
		default:
			h.fail(CheckResumed, o, "run %d was not handed the resume of session %s", ev.Run, o.session)
			h.resolve(o)
		}
	}
}

func (h *harness) sess(id string) *sessState {
	s, ok := h.sessions[id]
	if !ok {
		s = &sessState{}
		h.sessions[id] = s
	}
	return s
}

// candidate is a kill the harness decided on while reading a batch.
type candidate struct {
	run     *runState
	session string
	turn    string
	at      string
	gen     uint64
	repeat  bool
}

func (h *harness) onMarkers(ev supervisor.Event) {
	now := time.Now()
	var cand *candidate
	for _, m := range ev.Markers {
		_, known := h.sessions[m.Session]
		s := h.sess(m.Session)
		s.leftTool, s.toolEnded = false, ""
		if m.Event == "turn-end" || m.Event == "closed" {
			h.endedAfterKill(m)
		}
		if m.Ignored {
			// supervise did not take it (out of sequence): the agent sent
			// it all the same, and is judged by it.
			if m.Event == "turn-begin" {
				h.allTurns++
				h.expectFresh(m, s)
				h.expectBeginAgain(m, s)
			}
			continue
		}
		switch m.Event {
		case "turn-begin":
			h.seenTurns++
			h.allTurns++
			h.expectFresh(m, s)
			h.expectBegin(m, known)
			s.inTurn, s.turn, s.phase, s.tool, s.began, s.resumed = true, m.Turn, "", "", now, false
			s.effects, s.redone, s.alias = nil, nil, ""
			s.gen++
		case "resumed":
			h.seenTurns++
			h.allTurns++
			owed := h.open != nil && h.open.session == m.Session && h.open.stage == stageResume
			h.expectResumed(m)
			s.inTurn, s.phase, s.tool, s.began, s.resumed = true, "", "", now, true
			switch {
			case m.Turn == "" || m.Turn == s.turn:
			case owed && s.turn != "":
				// Numbered afresh (Codex): supervise maps it onto the
				// interrupted turn, which goes on.
				s.alias = m.Turn
			default:
				s.turn = m.Turn
			}
			s.gen++
		case "turn-end":
			if m.Turn != "" && s.turn == "" {
				s.turn = m.Turn
			}
			h.expectEnd(m)
			for _, t := range []string{cmp.Or(m.Turn, s.turn), s.turn, s.alias} {
				if t != "" {
					s.closeTurn(t, "ended "+m.Outcome, m.Run)
				}
			}
			s.alias = ""
			if m.Outcome == "completed" {
				h.rep.TurnsCompleted++
				s.crashes = 0
				if s.inTurn && !s.resumed && h.turnDur == 0 {
					h.turnDur = max(now.Sub(s.began), time.Millisecond)
				}
				h.idleTurn()
			}
			s.inTurn, s.phase, s.tool = false, "", ""
		case "phase":
			if s.phase == "tool" && m.Phase != "tool" {
				s.leftTool, s.toolEnded = true, s.tool
			}
			s.phase, s.tool = m.Phase, m.Tool
		case "effect":
			h.expectEffectOnce(m, s)
		case "waiting":
			s.phase = "waiting"
		case "closed":
			s.inTurn = false
		}
		if c := h.trigger(m, s); c != nil && (cand == nil || h.cfg.At != ToolEnd) {
			cand = c // at tool-end, the first end of a tool in the batch
		}
	}
	if cand != nil {
		s := h.sessions[cand.session]
		if s.inTurn && s.gen == cand.gen {
			h.kill(cand)
		}
	}
}

// endedAfterKill notes a turn-end or closed marker m of the killed run:
// journaled after the kill was decided, it was sent before the kill
// landed. Before the death is recorded (the batch supervise drains at the
// death), the death then judges the kill a miss. After it (a sender of
// the killed tree that outlived the agent, such as a `supervise notify`
// in flight, heard by supervise), supervise has ended the turn the resume
// was owed for, so the kill is a miss all the same, rather than a resume
// that never comes.
func (h *harness) endedAfterKill(m supervisor.Marker) {
	if k := h.inflight; k != nil && k.run == m.Run && k.session == m.Session {
		k.ended, k.outcome = true, m.Outcome
		return
	}
	o := h.open
	if o == nil || m.Ignored || o.stage != stageResume || o.run != m.Run || o.session != m.Session || o.deliveredTo != 0 {
		return
	}
	fmt.Fprintf(h.out, "chaos: kill %d missed: run %d's %s of session %s was journaled after its death; the turn had ended before the kill landed\n",
		o.idx+1, m.Run, m.Event, m.Session)
	o.ended, o.outcome = true, m.Outcome
	h.miss(o)
}

// maxMissed is how many kills in a row miss before chaos says in its log
// that the agent does not wait at its kill point.
const maxMissed = 10

// miss undoes kill k, which interrupted no turn (see killState.ended): it
// is retried at the next kill point. A repeat kill that missed leaves the
// resumed turn it was meant for ended by that marker.
func (h *harness) miss(k *killState) {
	h.rep.Misses++
	at := h.rep.Kills[k.idx].At
	h.rep.Kills = h.rep.Kills[:k.idx]
	if h.inflight == k {
		h.inflight = nil
	}
	if h.open == k {
		h.open = nil
	}
	if p := k.prev; p != nil {
		row := &h.rep.Kills[p.idx]
		row.KilledAgain = false
		switch k.outcome {
		case "completed":
			row.Completed = true
		default:
			what := "was closed"
			if k.outcome != "" {
				what = "ended " + k.outcome
			}
			h.fail(CheckCompleted, p, "the resumed turn %q of session %s %s", p.turn, p.session, what)
		}
		if h.open == p {
			h.open = nil
		}
		h.replan(p)
	}
	// Retried at the next kill point, however many miss: the verdict is
	// the same at any load, only slower to come for an agent that seldom
	// stops at its kill point (the timeout then says why).
	h.missed++
	h.missedAt = at
	if h.missed == maxMissed && h.cfg.At != Random {
		fmt.Fprintf(h.out, "chaos: %d kills in a row at %s landed after the agent had sent the turn's end: it does not wait there for its marker to be journaled; "+
			"each is made again at the next turn, until --timeout\n", h.missed, at)
	}
}

// idleTurn counts a turn completed while a fresh kill was wanted but no
// kill point came; after ten, the agent offers none.
func (h *harness) idleTurn() {
	if h.done || h.inflight != nil || h.open != nil || len(h.rep.Kills) >= h.cfg.Kills {
		return
	}
	if h.cfg.At == Random && h.turnDur == 0 {
		return // the warm-up turn
	}
	h.idle++
	if h.idle >= 10 {
		what := "turn-begin marker"
		switch h.cfg.At {
		case Tool:
			what = "`phase tool` marker inside a turn"
		case ToolEnd:
			what = "tool end inside a turn (an `effect` marker, or a `phase` marker leaving the tool phase, before turn-end)"
		}
		h.fail(CheckKillPoint, nil, "the agent completed %d turns without a %s to kill at", h.idle, what)
		h.finishRun()
	}
}

// trigger decides whether marker m (already applied to s) is the next
// kill's point.
func (h *harness) trigger(m supervisor.Marker, s *sessState) *candidate {
	next := len(h.rep.Kills)
	if h.done || h.inflight != nil || next >= h.cfg.Kills || h.cur == nil || h.cur.n != m.Run || h.cur.t == nil || !s.inTurn {
		return nil
	}
	repeat := h.plan[next]
	if repeat && h.open == nil {
		// The turn it was meant for is gone (it completed, or a check
		// failed on it): kill a fresh turn instead.
		for i := next; i < len(h.plan) && h.plan[i]; i++ {
			h.plan[i] = false
		}
		repeat = false
	}
	if repeat {
		if o := h.open; o.stage != stageTurn || o.session != m.Session {
			return nil
		}
	} else if h.open != nil || s.resumed || s.crashes > 0 {
		// One kill at a time; and a fresh kill waits until the session
		// completed a turn since its last death, so it tests a resume,
		// not the crash count that parked it.
		return nil
	}
	c := &candidate{run: h.cur, session: m.Session, turn: s.turn, gen: s.gen, repeat: repeat}
	begin := m.Event == "turn-begin" || (repeat && m.Event == "resumed")
	switch h.cfg.At {
	case TurnBegin:
		if !begin {
			return nil
		}
		c.at = m.Event
	case Tool:
		if m.Event != "phase" || m.Phase != "tool" {
			return nil
		}
		c.at = "tool " + m.Tool
	case ToolEnd:
		switch {
		case m.Event == "effect":
			c.at = "tool-end, effect " + m.Effect
		case m.Event == "phase" && s.leftTool:
			c.at = strings.TrimSpace("tool-end " + s.toolEnded)
		default:
			return nil
		}
	case Random:
		if !begin || h.turnDur == 0 {
			return nil
		}
		if repeat {
			// A resumed turn is often much shorter than a fresh one (its
			// tool's effect may be done already): a random offset would
			// mostly miss it, and the park would go unchecked. Kill it
			// right after its resumed.
			c.at = m.Event
			return c
		}
		off := time.Duration(h.rng.Int64N(int64(h.turnDur)))
		c.at = "random +" + off.Round(time.Millisecond).String()
		time.AfterFunc(off, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.done || h.inflight != nil || h.cur != c.run || len(h.rep.Kills) != next {
				return
			}
			if !s.inTurn || s.gen != c.gen {
				h.rep.Misses++ // the turn ended first; the next one gets a new offset
				return
			}
			h.kill(c)
		})
		return nil
	}
	return c
}

// kill kills the agent of c.run, now.
func (h *harness) kill(c *candidate) {
	// The full snapshot after SIGKILL: every step between the marker and
	// the kill is time the agent runs on. The loop records the death only
	// once this event returns, but supervise's reaper does not wait for it:
	// it reaps the leader and kills the descendants re-parented to it at
	// once. So the leader's descendants are walked (a few /proc files)
	// just before the kill too, and a helper outside its process group is
	// named even if the reaper ended it before the scan reached it.
	before := walkTree(c.run.t.pid)
	if err := c.run.t.kill(); err != nil {
		h.rep.Misses++
		return
	}
	snap := scanTree(c.run.tag, true)
	k := &killState{idx: len(h.rep.Kills), run: c.run.n, session: c.session, turn: c.turn, repeat: 1,
		snapshot: snap, escaped: escapees(union(snap, before), c.run.t.pid), leader: c.run.t.pid}
	if c.repeat {
		k.prev = h.open
		k.repeat = h.open.repeat + 1
		h.rep.Kills[h.open.idx].KilledAgain = true
	}
	h.rep.Kills = append(h.rep.Kills, Kill{Kill: k.idx + 1, At: c.at, Run: c.run.n, Session: c.session,
		Turn: c.turn, Repeat: k.repeat, Decision: "none", Failed: []string{}})
	h.inflight = k
	h.open = k
	h.idle = 0
	h.sess(c.session).lastKill = k
	fmt.Fprintf(h.out, "chaos: kill %d: SIGKILL to run %d (pid %d) at %s, session %s turn %q\n",
		k.idx+1, c.run.n, c.run.t.pid, c.at, c.session, c.turn)
}

func (h *harness) onDeath(ev supervisor.Event) {
	defer h.closeRun(ev.Run)
	if ev.Dirty {
		for _, s := range h.sessions {
			if s.inTurn && s.phase != "waiting" {
				s.crashes++
			}
		}
	}
	for _, s := range h.sessions {
		s.inTurn = false
	}
	k := h.inflight
	if k == nil || k.run != ev.Run {
		h.closeParked(ev)
		if h.stopping || h.done {
			return
		}
		if ev.Dirty {
			h.fail(CheckAgentDied, h.open, "run %d died without being killed: reason %s, exit code %d, signal %d",
				ev.Run, ev.Reason, ev.ExitCode, ev.Signal)
			if h.allTurns == 0 {
				if h.earlyDeaths++; h.earlyDeaths == maxEarlyDeaths {
					h.fail(CheckAgentDied, nil, "the agent died %d times in a row before it reported any turn: stopped here rather than at --timeout; "+
						"run it by hand to see why it exits (its stderr is in the log)", h.earlyDeaths)
					h.finishRun()
					return
				}
			}
		}
		if o := h.open; o != nil && o.stage == stageResume && o.deliveredTo == ev.Run {
			h.fail(CheckResumed, o, "run %d ended without reporting resumed for session %s", ev.Run, o.session)
			h.resolve(o)
		} else if o != nil && o.stage == stageTurn && o.turnRun == ev.Run {
			h.fail(CheckCompleted, o, "run %d ended before the resumed turn %q of session %s completed", ev.Run, o.turn, o.session)
			h.resolve(o)
		}
		return
	}
	h.inflight = nil
	h.closeParked(ev)
	if k.ended {
		// The killed run's own markers, journaled before its death was,
		// end the turn: the agent had sent its turn-end before the kill
		// landed (a random kill, or an agent that does not wait for the
		// marker it was killed at). The kill interrupted no turn of it:
		// a miss, retried at the next kill point, whatever supervise
		// decided for a later turn the agent had begun meanwhile.
		h.survivors(k, nil)
		h.miss(k)
		return
	}
	row := &h.rep.Kills[k.idx]
	h.survivors(k, row)
	h.missed = 0
	var dec *supervisor.SessionStatus
	for i := range ev.Decisions {
		if ev.Decisions[i].ID == k.session {
			dec = &ev.Decisions[i]
		}
	}
	if dec == nil {
		h.fail(CheckDecision, k, "supervise journaled no decision for session %s after the kill in turn %q, though no marker ended the turn before the death", k.session, k.turn)
		h.resolve(k)
		return
	}
	row.Decision, row.Reason = dec.State, dec.Reason
	if p := k.prev; p != nil {
		h.resolve(p)
	}
	want := "resume_pending"
	crashes := h.sessions[k.session].crashes
	if (resume.Policy{Limit: h.limit}).Exhausted(crashes) {
		want = "parked"
	}
	switch {
	case dec.State == want && want == "parked":
		row.Parked = true
		h.resolve(k)
	case dec.State == want:
		k.stage = stageResume
	case want == "parked":
		h.fail(CheckParked, k, "session %s died mid-turn %d times in a row (resume limit %d) but supervise journaled %s, not parked",
			k.session, crashes, h.limit, dec.State)
		h.resolve(k)
	default:
		h.fail(CheckDecision, k, "supervise journaled %s (%s) for session %s at its dirty death %d in a row, want resume_pending",
			dec.State, dec.Reason, k.session, crashes)
		h.resolve(k)
	}
}

// survivors checks what is left of the killed tree now that supervise has
// recorded its death (and so reaped the agent and swept its descendants).
// row is k's row, nil for a kill that missed (its failures then name no
// kill).
func (h *harness) survivors(k *killState, row *Kill) {
	who := k
	if row == nil {
		who, row = nil, &Kill{}
	}
	left := map[int]proc{}
	for _, p := range k.snapshot {
		if p.alive() {
			left[p.pid] = p
		}
	}
	tag := h.runs[k.run].tag
	for _, p := range scanTree(tag, true) {
		left[p.pid] = p
	}
	row.Survivors = len(left)
	if len(left) > 0 {
		var names []string
		for _, p := range left {
			names = append(names, p.String())
		}
		slices.Sort(names)
		h.fail(CheckSurvivors, who, "%d process(es) of run %d's tree were alive after its death was recorded: %s",
			len(left), k.run, strings.Join(names, ", "))
	}
	if escaped := k.escaped; len(escaped) > 0 {
		row.Escaped = len(escaped)
		var names []string
		for _, p := range escaped {
			names = append(names, p.String())
		}
		what := "a kill that missed its turn"
		if who != nil {
			what = fmt.Sprintf("kill %d", row.Kill)
		}
		h.rep.Warnings = append(h.rep.Warnings, fmt.Sprintf("%s: %d process(es) of run %d's tree had left the agent's process group (setsid or setpgid): %s; "+
			"a process-group kill does not reach them: supervise's sweep of re-parented descendants ended them, "+
			"a supervisor without one would leave them running", what, len(escaped), k.run, strings.Join(names, ", ")))
	}
}

// union is a and the processes of b not in a (a process is its pid and
// start time).
func union(a, b []proc) []proc {
	type id struct {
		pid   int
		start uint64
	}
	in := map[id]bool{}
	for _, p := range a {
		in[id{p.pid, p.start}] = true
	}
	out := slices.Clone(a)
	for _, p := range b {
		if !in[id{p.pid, p.start}] {
			out = append(out, p)
		}
	}
	return out
}

// escapees lists the processes of a tree snapshot outside the leader's
// process group, except agent hooks in flight: a `supervise notify` or
// `supervise-notify` client (agents such as Claude Code run hooks in a
// process group of their own), and a process whose only children in the
// snapshot are such hooks (the shell that runs one). Those end by
// themselves once their marker is journaled.
func escapees(snap []proc, leader int) []proc {
	kids := map[int][]proc{}
	for _, p := range snap {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	var hook func(p proc) bool
	hook = func(p proc) bool {
		if p.notifyClient() {
			return true
		}
		if len(kids[p.pid]) == 0 {
			return false
		}
		for _, c := range kids[p.pid] {
			if !hook(c) {
				return false
			}
		}
		return true
	}
	var out []proc
	for _, p := range snap {
		if p.pgrp != leader && p.pid != leader && !hook(p) {
			out = append(out, p)
		}
	}
	return out
}

// closeParked records the turns a death's decisions parked: closed, so a
// turn-begin must not reuse their ids.
func (h *harness) closeParked(ev supervisor.Event) {
	for _, d := range ev.Decisions {
		if d.State == "parked" && d.Turn != "" {
			h.sess(d.ID).closeTurn(d.Turn, "was parked", ev.Run)
		}
	}
}

func (s *sessState) closeTurn(turn, how string, run uint64) {
	if s.closed == nil {
		s.closed = map[string]closedTurn{}
	}
	s.closed[turn] = closedTurn{how: how, run: run}
}

// expectFresh checks that turn-begin m does not reuse the id of a turn of
// its session that ended or was parked (turn-fresh): a reused id makes the
// journal take the new turn for the old one (supervise ignores a
// turn-begin for the turn that just ended, and with it the turn's
// markers), and a resume file entry name the wrong turn.
func (h *harness) expectFresh(m supervisor.Marker, s *sessState) {
	c, ok := s.closed[m.Turn]
	if m.Turn == "" || !ok {
		return
	}
	ignored := ""
	if m.Ignored {
		ignored = " (supervise ignored that turn-begin as out of sequence, and with it the new turn)"
	}
	h.fail(CheckFresh, s.lastKill, "run %d began turn %q of session %s, but the session's turn %q already %s in run %d%s: "+
		"turn ids must stay fresh across restarts; persist a counter before each turn-begin, or use unique ids (a UUID)",
		m.Run, m.Turn, m.Session, m.Turn, c.how, c.run, ignored)
	delete(s.closed, m.Turn) // once per reuse
}

// expectEffectOnce checks that effect m was not declared done by an
// earlier run of the same turn (effect-once): the later run did the side
// effect again after a resume.
func (h *harness) expectEffectOnce(m supervisor.Marker, s *sessState) {
	if m.Effect == "" {
		return
	}
	first, ok := s.effects[m.Effect]
	switch {
	case !ok:
		if s.effects == nil {
			s.effects = map[string]uint64{}
		}
		s.effects[m.Effect] = m.Run
	case first != m.Run && !s.redone[m.Effect]:
		if s.redone == nil {
			s.redone = map[string]bool{}
		}
		s.redone[m.Effect] = true
		h.fail(CheckEffect, s.lastKill, "run %d declared effect %q of turn %q in session %s done again, after run %d had declared it done "+
			"before the kill: the side effect ran twice. Skip what the resume file's \"effects\" lists for the turn "+
			"(and what the continuation names as already done), or make the effect idempotent (check the world first)",
			m.Run, m.Effect, s.turn, m.Session, first)
	}
}

// expectBeginAgain checks a turn-begin m that supervise ignored as
// repeated for the open turn (turn-once): after the run reported resumed
// for the interrupted turn, it began that turn again, under its id or the
// id the resumed marker renumbered it to. supervise keeps the resumed turn
// open (the turn-begin changes nothing in the journal), so chaos goes on
// waiting for it to complete; the check fails once per kill.
func (h *harness) expectBeginAgain(m supervisor.Marker, s *sessState) {
	o := h.open
	if o == nil || o.stage != stageTurn || o.session != m.Session || m.Turn == "" {
		return
	}
	if m.Turn != o.turn && m.Turn != s.turn && m.Turn != s.alias {
		return
	}
	if slices.Contains(h.rep.Kills[o.idx].Failed, CheckTurnOnce) {
		return
	}
	h.fail(CheckTurnOnce, o, "run %d reported resumed and then began turn %q of session %s again (turn-begin; supervise ignored it as "+
		"repeated for the open turn): the interrupted turn was started twice. After resumed, go on with the turn and end it; "+
		"a new turn needs a fresh id", m.Run, m.Turn, m.Session)
}

func (h *harness) expectBegin(m supervisor.Marker, known bool) {
	o := h.open
	if o != nil && o.stage == stageResume && o.deliveredTo == m.Run && o.session != m.Session && !known {
		// The run handed the resume opened a new session instead: it
		// ignored its resume file, and will never take the resume.
		h.fail(CheckResumed, o, "run %d was handed the resume of session %s but began turn %q in a new session %s instead: "+
			"it ignored its resume file; read $SUPERVISE_RESUME_FILE at start and report resumed for each entry, in its session, before new work",
			m.Run, o.session, m.Turn, m.Session)
		h.resolve(o)
		return
	}
	if o == nil || o.session != m.Session || o.stage == stageDeath {
		return
	}
	same := m.Turn != "" && m.Turn == o.turn
	switch {
	case o.stage == stageResume && same:
		h.fail(CheckTurnOnce, o, "run %d began turn %q of session %s again (turn-begin) instead of reporting resumed: the interrupted turn was started twice",
			m.Run, m.Turn, m.Session)
	case o.stage == stageResume:
		h.fail(CheckResumed, o, "run %d began a new turn %q in session %s instead of resuming turn %q: the resume was ignored (supervise drops it)",
			m.Run, m.Turn, m.Session, o.turn)
	case same:
		h.fail(CheckTurnOnce, o, "run %d reported resumed and then began turn %q of session %s again (turn-begin)", m.Run, m.Turn, m.Session)
	default:
		h.fail(CheckCompleted, o, "run %d began turn %q in session %s before the resumed turn %q ended", m.Run, m.Turn, m.Session, o.turn)
	}
	h.resolve(o)
}

func (h *harness) expectResumed(m supervisor.Marker) {
	o := h.open
	if o == nil || o.session != m.Session || o.stage != stageResume {
		return
	}
	// A resumed marker may carry a turn id of the agent's own (Codex
	// numbers the continuation afresh): supervise takes it as the
	// interrupted turn, and so does chaos.
	h.rep.Kills[o.idx].Resumed = true
	o.stage, o.turnRun = stageTurn, m.Run
}

func (h *harness) expectEnd(m supervisor.Marker) {
	o := h.open
	if o == nil || o.session != m.Session || o.stage == stageDeath {
		return
	}
	row := &h.rep.Kills[o.idx]
	if o.stage == stageResume {
		h.fail(CheckResumed, o, "run %d ended turn %q of session %s (%s) without reporting resumed: supervise still counts the resume as owed",
			m.Run, o.turn, m.Session, m.Outcome)
		row.Completed = m.Outcome == "completed"
		h.resolve(o)
		return
	}
	if m.Outcome != "completed" {
		h.fail(CheckCompleted, o, "the resumed turn %q of session %s ended %s", o.turn, m.Session, m.Outcome)
		h.resolve(o)
		return
	}
	row.Completed = true
	h.resolve(o)
	h.replan(o)
}

// replan turns a planned repeat kill into a fresh one once the turn it was
// meant for completed first.
func (h *harness) replan(o *killState) {
	if next := len(h.rep.Kills); next < len(h.plan) && h.plan[next] && h.open == nil {
		h.plan[next] = false
		h.rep.Notes = append(h.rep.Notes, fmt.Sprintf(
			"kill %d was to kill the resumed turn %q again, but it completed first (no kill point in it): the park check was not exercised there",
			next+1, o.turn))
		for i := next + 1; i < len(h.plan) && h.plan[i]; i++ {
			h.plan[i] = false
		}
	}
}

// resolve closes a kill's expectations; once every planned kill is made
// and resolved, the run is done.
func (h *harness) resolve(k *killState) {
	if h.open == k {
		h.open = nil
	}
	if len(h.rep.Kills) >= h.cfg.Kills && h.open == nil && h.inflight == nil {
		h.finishRun()
	}
}

// maxEarlyDeaths is how many dirty deaths before any turn end a chaos run.
const maxEarlyDeaths = 3

func (h *harness) finishRun() {
	if h.done {
		return
	}
	h.done, h.stopping = true, true
	if h.stop != nil {
		h.stop()
	}
}

func (h *harness) closeRun(n uint64) {
	if r, ok := h.runs[n]; ok && r.t != nil {
		r.t.close()
		r.t = nil
	}
	if h.cur != nil && h.cur.n == n {
		h.cur = nil
	}
}

func (h *harness) timedOut() {
	h.mu.Lock()
	defer h.mu.Unlock()
	what := fmt.Sprintf("%d of %d kills made", len(h.rep.Kills), h.cfg.Kills)
	if o := h.open; o != nil {
		switch o.stage {
		case stageResume:
			what += fmt.Sprintf("; session %s never reported resumed after kill %d", o.session, o.idx+1)
		case stageTurn:
			what += fmt.Sprintf("; the resumed turn %q of session %s never completed after kill %d", o.turn, o.session, o.idx+1)
		}
	}
	switch {
	case h.allTurns == 0:
		what += "; the agent never reported a turn (no turn-begin or resumed arrived): is it wired to NOTIFY_SOCKET " +
			"(hooks installed and trusted), and does it run turns on its own?"
	case h.cfg.At == Random && h.turnDur == 0:
		what += "; no turn completed to measure (random kills wait for one)"
	case h.missed > 0 && h.cfg.At != Random && h.open == nil && h.inflight == nil:
		what += fmt.Sprintf("; the last %d kill(s), at %s, all landed after the agent had sent the turn's end (missed kills, each made again): "+
			"it goes on past that marker without waiting for it to be journaled, so a kill lands between the marker and the turn's end "+
			"only when the agent happens to be slow there. Wait until the marker is journaled before going on "+
			"(a barrier after it: notify.Client.Barrier; `supervise notify` waits by default) to make the point exact, or prove the agent with another --at",
			h.missed, h.missedAt)
	case h.open == nil && h.inflight == nil && len(h.rep.Kills) < h.cfg.Kills:
		what += fmt.Sprintf("; %d turn(s) began, but the next kill point (--at %s) never came", h.allTurns, h.cfg.At)
	}
	h.fail(CheckTimeout, h.open, "timed out after %s: %s", h.cfg.Timeout, what)
}

// finish records what never resolved.
func (h *harness) finish() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if o := h.open; o != nil && !slices.Contains(h.rep.FailedChecks, CheckTimeout) {
		switch o.stage {
		case stageResume:
			h.fail(CheckResumed, o, "session %s was never resumed after kill %d", o.session, o.idx+1)
		case stageTurn:
			h.fail(CheckCompleted, o, "the resumed turn %q of session %s never completed", o.turn, o.session)
		}
	}
	if !h.rep.Failed(CheckTimeout) && len(h.rep.Kills) < h.cfg.Kills && len(h.rep.Failures) == 0 {
		h.fail(CheckKillPoint, nil, "only %d of %d kills were made before supervise ended", len(h.rep.Kills), h.cfg.Kills)
	}
	if h.drops != nil {
		h.rep.DroppedSenders = h.drops.count()
	}
	if n := h.rep.DroppedSenders; n > 0 {
		h.rep.Notes = append(h.rep.Notes, fmt.Sprintf("supervise dropped %d datagram(s) because it did not hear their sender (its log: "+
			"\"notify datagram dropped\" reason=sender): a marker sent by a process that exits at once may be read after it exited, "+
			"and is then lost, with what chaos checks for it. Send each marker from a process that waits for it: `supervise notify` "+
			"(it waits until supervise has read it, or journaled it), or a barrier from the same process", n))
	}
	slices.Sort(h.rep.FailedChecks)
	h.rep.FailedChecks = slices.Compact(h.rep.FailedChecks)
}

// fail records a failed check, against kill k when it is about one.
func (h *harness) fail(check string, k *killState, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if k != nil {
		row := &h.rep.Kills[k.idx]
		msg = fmt.Sprintf("kill %d (session %s, turn %q): %s", k.idx+1, row.Session, row.Turn, msg)
		if !slices.Contains(row.Failed, check) {
			row.Failed = append(row.Failed, check)
		}
	}
	h.rep.Failures = append(h.rep.Failures, check+": "+msg)
	h.rep.FailedChecks = append(h.rep.FailedChecks, check)
	fmt.Fprintf(h.out, "chaos: FAIL %s: %s\n", check, msg)
}

// dropWatch serializes writes to w, and counts on the way the datagrams
// supervise's log says it dropped for their sender (text or JSON lines).
type dropWatch struct {
	mu      sync.Mutex
	w       io.Writer
	partial []byte
	n       int
}

// maxLogLine bounds the partial line dropWatch keeps: a longer line is
// not one of supervise's drop lines.
const maxLogLine = 64 << 10

func (d *dropWatch) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(d.partial)+len(rest) <= maxLogLine {
				d.partial = append(d.partial, rest...)
			} else {
				d.partial = d.partial[:0]
			}
			break
		}
		line := rest[:i]
		if len(d.partial) > 0 {
			line = append(d.partial, line...)
		}
		d.n += droppedForSender(line)
		d.partial, rest = d.partial[:0], rest[i+1:]
	}
	return d.w.Write(p)
}

func (d *dropWatch) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// droppedForSender is the count a log line of supervise's reports as
// dropped for their sender, 0 for any other line.
func droppedForSender(line []byte) int {
	text := bytes.Contains(line, []byte(`msg="notify datagram dropped"`)) && bytes.Contains(line, []byte(" reason=sender"))
	js := bytes.Contains(line, []byte(`"msg":"notify datagram dropped"`)) && bytes.Contains(line, []byte(`"reason":"sender"`))
	if !text && !js {
		return 0
	}
	for _, key := range []string{" dropped=", `"dropped":`} {
		if _, after, ok := bytes.Cut(line, []byte(key)); ok {
			n := 0
			for _, c := range after {
				if c < '0' || c > '9' || n > 1<<30 {
					break
				}
				n = n*10 + int(c-'0')
			}
			return max(n, 1)
		}
	}
	return 1
}
