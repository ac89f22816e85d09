// Package chaoscmd is `supervise chaos`: its flags, the run flags passed on
// to the supervise it starts (checked through runflags), and the
// report of package chaos, as a table or JSON. Run returns the exit status:
// 0 every check held, 1 a check failed or supervise could not run, 2 usage.
package chaoscmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"time"

	"github.com/supervise-dev/supervise/chaos"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
)

// usage is the help of `supervise chaos`, followed by its flags.
const usage = `Usage: supervise chaos [flags] [run flags] -- AGENT [ARGS...]

Kill your own agent with SIGKILL in the middle of its turns, under a real
supervise on a scratch state dir of its own (never a real one: --state-dir
and --name are refused), and check that it survives the crash the way the
protocol says. After each kill:

  decision    supervise journaled resume_pending for the interrupted session
              (parked once it died mid-turn more than --resume-limit times in a
              row without completing a turn)
  resumed     the next run took the resume and reported 'resumed' before
              anything else in that session
  completed   the resumed turn ended 'completed'
  parked      a second kill in the same turn parked the session
  survivors   nothing of the killed tree outlived it or had left its process
              group (setsid): a process-group kill would miss it
  one-tree    no process of an earlier run was alive when a run started
  turn-once   the interrupted turn was not begun a second time (turn-begin
              with the same turn id instead of 'resumed', or after it)
  effect-once no side effect the turn declared done ('effect' marker) was
              declared again by a later run of that turn: the resume must
              skip what the resume file's "effects" lists
  turn-fresh  no turn-begin reused the id of a turn of that session that
              ended or was parked (ids fresh across restarts)
  agent-died  the agent never died dirty without being killed

The kills go in cycles: a turn killed once must resume and complete; the
next turn is killed, then killed again once resumed, and must be parked.
It stops after --kills kills and the turns they interrupted, or at --timeout.

AGENT must run turns on its own: a test mode of your agent, a scripted
prompt, or a one-shot task CLI with --resume-exec (each run of supervise is
then one task; chaos runs it again until the kills are done). Examples:

  supervise chaos -- python3 examples/python/agent.py loop loop 0 /tmp/agent-loop.out
  supervise chaos --at tool --kills 6 -- ./my-agent --selftest
  supervise chaos --at tool-end --kills 3 -- ./my-agent --selftest
  supervise chaos --resume-exec 'claude -p -r {session} {message}' -- claude -p 'run the tests'

Output: a table (kill, when, session, decision, resumed, completed,
survivors, verdict), or with --json one object:
  {"ok": bool, "seed": S, "kills": [{"kill", "at", "session", "decision",
   "resumed", "completed", "parked", "survivors", ...}], "failures": ["check: ..."],
   "planned_kills": N, "misses": N, "dropped_senders": N, ...}
The seed is printed: --seed S replays the same choices, with the same --at
and --kills (the replay line of a failure names them).

A kill that lands after the agent had already sent the turn's end (it does
not wait at the marker it is killed at) interrupted no turn: a missed kill,
made again at the next kill point, not a failure.

A PASS says the checks held at the kill points reached, no more: a side
effect the agent did not declare with an 'effect' marker is not checked for
repeats, and a kill elsewhere in a turn is not tried (docs/prove-your-agent.md
lists what a PASS proves and what it does not).

Exit codes: 0 every check held; 1 a check failed (the failures are listed),
the agent cannot be started, or supervise could not run; 2 usage error.

Flags:
`

// chaosOwn names the flags of `supervise chaos` itself (not passed on to
// supervise run).
var chaosOwn = map[string]bool{"kills": true, "seed": true, "at": true, "timeout": true, "json": true, "log": true}

// Run runs `supervise chaos` with args (after the word chaos).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kills := fs.Int("kills", 3, "how many kills to make")
	seed := fs.Uint64("seed", 0, "seed of the random choices, printed with the result; 0 picks one")
	at := fs.String("at", "turn-begin", "where in a turn to kill: turn-begin (right after it is journaled), tool (right after a 'phase tool' marker is journaled), tool-end (right after a tool finished: an 'effect' marker, or the phase leaving tool, before turn-end), random (a seeded offset within the turn)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up (and fail) after this long")
	asJSON := fs.Bool("json", false, "print the result as one JSON object, for CI")
	logPath := fs.String("log", "", "write supervise's log and the agent's output here ('-' = stderr; default: a file in the scratch dir, named after a failure)")
	var rf runflags.Flags
	rf.Register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return runflags.ExitCode(err)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "supervise chaos: no agent to run: supervise chaos [flags] -- AGENT [ARGS...]")
		return exitcode.Usage
	}
	point, err := chaos.ParsePoint(*at)
	if err != nil {
		fmt.Fprintf(stderr, "supervise chaos: %s: %v\n", runflags.Source("at", set), err)
		return exitcode.Usage
	}
	if *kills < 1 || *timeout <= 0 {
		fmt.Fprintln(stderr, "supervise chaos: --kills must be at least 1 and --timeout positive")
		return exitcode.Usage
	}
	if rf.ResumeOff() {
		fmt.Fprintf(stderr, "supervise chaos: %s is off: chaos checks automatic resumes; unset it\n", runflags.Source("resume", set))
		return exitcode.Usage
	}
	// The run flags must be valid for the supervise run chaos starts.
	if _, _, err := rf.Config(set, argv, os.Stdin, io.Discard); err != nil {
		fmt.Fprintf(stderr, "supervise chaos: %v\n", err)
		return exitcode.Usage
	}
	// The state dir is chaos's own scratch dir: a real one (and --name,
	// which names one) would have supervise write into a real journal.
	for _, name := range []string{"state-dir", "name"} {
		if set[name] || os.Getenv(runflags.EnvName(name)) != "" {
			fmt.Fprintf(stderr, "supervise chaos: %s refused: chaos runs the agent on a scratch state dir of its own and never writes into a real one; drop it\n",
				runflags.Source(name, set))
			return exitcode.Usage
		}
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		// Not a usage error: the command line is fine, the agent cannot
		// run (exit 1, "supervise could not run").
		fmt.Fprintf(stderr, "supervise chaos: cannot run the agent: %v\n", err)
		return exitcode.Internal
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "supervise chaos: %v\n", err)
		return exitcode.Internal
	}
	// Run flags given on the command line go to supervise run as given;
	// those from SUPERVISE_* it reads from the environment itself.
	var runArgs []string
	fs.Visit(func(f *flag.Flag) {
		if !chaosOwn[f.Name] {
			runArgs = append(runArgs, "--"+f.Name+"="+f.Value.String())
		}
	})
	if *seed == 0 {
		*seed = rand.Uint64() >> 1
	}
	cfg := chaos.Config{Argv: argv, Supervise: self, RunFlags: runArgs, Kills: *kills,
		Seed: *seed, At: point, Timeout: *timeout}
	switch *logPath {
	case "":
	case "-":
		cfg.Output = stderr
	default:
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintf(stderr, "supervise chaos: --log: %v\n", err)
			return exitcode.Usage
		}
		defer f.Close()
		cfg.Output = f
	}
	fmt.Fprintf(stderr, "supervise chaos: seed %d, %d kills at %s, timeout %s\n", *seed, *kills, point, *timeout)
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "supervise chaos: %v\n", err)
		if errors.Is(err, chaos.ErrUsage) {
			return exitcode.Usage
		}
		return exitcode.Internal
	}
	if *logPath != "" && *logPath != "-" {
		rep.Log = *logPath
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return exitcode.Internal
		}
	} else {
		rep.WriteTable(stdout)
	}
	if !rep.OK {
		return exitcode.Internal
	}
	return exitcode.OK
}
