package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/chaos"
)

// bin holds the binaries TestMain builds: supervise (also exported as
// SUPERVISE_BIN, which chaos.Binary finds) and the Go example agent.
var superviseBin, goAgentBin string

func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		fmt.Println("skipping: supervise chaos needs Linux")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "chaos-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	superviseBin = filepath.Join(dir, "supervise")
	goAgentBin = filepath.Join(dir, "go-agent")
	for bin, pkg := range map[string]string{superviseBin: "../cmd/supervise", goAgentBin: "../examples/go-agent"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	os.Setenv("SUPERVISE_BIN", superviseBin)
	os.Unsetenv("SUPERVISE_RESUME") // a suite may set it off; chaos needs resumes
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// python returns the Python interpreter itself: a version manager's shim
// (pyenv) costs most of a second per start on a loaded machine.
func python(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	if out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output(); err == nil {
		if real := strings.TrimSpace(string(out)); real != "" {
			return real
		}
	}
	return p
}

// run runs chaos with a test's private working dir and log.
func run(t *testing.T, cfg chaos.Config) *chaos.Report {
	t.Helper()
	dir := t.TempDir()
	if cfg.Dir == "" {
		cfg.Dir = dir
	}
	cfg.StateDir = filepath.Join(dir, "state")
	if cfg.Timeout == 0 {
		cfg.Timeout = 40 * time.Second
	}
	// Relaunch quickly after the kills: the backoff is supervise's
	// business, not what these tests look at.
	cfg.RunFlags = append([]string{"--backoff-initial=20ms"}, cfg.RunFlags...)
	logf, err := os.Create(filepath.Join(dir, "supervise.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	if cfg.Output == nil {
		cfg.Output = logf
	} else {
		cfg.Output = io.MultiWriter(cfg.Output, logf)
	}
	rep, err := chaos.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	t.Logf("chaos report:\n%s", b.String())
	if t.Failed() || !rep.OK {
		if log, err := os.ReadFile(logf.Name()); err == nil {
			t.Logf("supervise log (last 3000 bytes):\n%s", tail(log, 3000))
		}
	}
	return rep
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func wantPass(t *testing.T, rep *chaos.Report, kills int) {
	t.Helper()
	if !rep.OK {
		t.Fatalf("chaos failed: %s", strings.Join(rep.Failures, "; "))
	}
	if len(rep.Kills) != kills {
		t.Fatalf("%d kills, want %d", len(rep.Kills), kills)
	}
}

// wantOnly checks that the run failed, and for exactly the named checks.
func wantOnly(t *testing.T, rep *chaos.Report, checks ...string) {
	t.Helper()
	if rep.OK {
		t.Fatalf("chaos passed a broken agent; want failed checks %v", checks)
	}
	if !slices.Equal(rep.FailedChecks, checks) {
		t.Fatalf("failed checks %v, want %v: %s", rep.FailedChecks, checks, strings.Join(rep.Failures, "; "))
	}
}

func repo(path string) string { p, _ := filepath.Abs(filepath.Join("..", path)); return p }

// The shipped Python example agent passes, killed at turn-begin: a resume
// that completes, then a resumed turn killed again, which must park.
func TestPythonExampleAgentSurvives(t *testing.T) {
	py := python(t)
	rep := run(t, chaos.Config{Argv: []string{py, repo("examples/python/agent.py"), "loop"}, Kills: 3, Seed: 1})
	wantPass(t, rep, 3)
	if d := []string{rep.Kills[0].Decision, rep.Kills[1].Decision, rep.Kills[2].Decision}; !slices.Equal(d,
		[]string{"resume_pending", "resume_pending", "parked"}) {
		t.Errorf("decisions %v", d)
	}
	if !rep.Kills[0].Resumed || !rep.Kills[0].Completed || !rep.Kills[2].Parked {
		t.Errorf("kill rows: %+v", rep.Kills)
	}
}

// The shipped Go example agent passes, killed inside its side-effecting
// tool; its out file shows every turn's side effect exactly once. The tool
// takes no time (-tool-time 0): the agent writes its side effect the moment
// its barrier after `phase tool` returns. So only a kill that lands before
// that barrier returns (supervise waits for chaos before it answers) finds
// the effect not done; a kill that raced the agent would let some effects
// through, and the resumed turn would log that it found one.
func TestGoExampleAgentSurvivesToolKills(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "go-agent.out")
	var log strings.Builder
	rep := run(t, chaos.Config{Argv: []string{goAgentBin, "-turns", "0", "-tool-time", "0", "-out", out},
		Kills: 3, At: chaos.Tool, Seed: 2, Output: &log})
	if strings.Contains(log.String(), "the side effect already happened") {
		t.Errorf("a kill at tool landed after the side effect: the kill raced the agent\n%s", log.String())
	}
	if n := strings.Count(log.String(), "resuming an interrupted turn"); n != 2 {
		t.Errorf("%d resumed turns in the log, want 2", n)
	}
	wantPass(t, rep, 3)
	for _, k := range rep.Kills {
		if k.At != "tool append_file" {
			t.Errorf("kill %d at %q, want inside the tool", k.Kill, k.At)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		key := strings.Fields(line)[0]
		if seen[key] {
			t.Errorf("side effect %s done twice:\n%s", key, b)
		}
		seen[key] = true
	}
}

// A one-shot task CLI under --resume-exec (the shape of `claude -p`):
// every supervise run is one task, chaos runs it again until done.
func TestTaskCLIUnderResumeExec(t *testing.T) {
	py := python(t)
	out := filepath.Join(t.TempDir(), "task.out")
	script := repo("chaos/testdata/task_agent.py")
	rep := run(t, chaos.Config{
		Argv:     []string{py, script, out, "do the task"},
		RunFlags: []string{"--resume-exec=" + py + " " + script + " " + out + " --resume {session} {message}"},
		Kills:    3, Seed: 3,
	})
	wantPass(t, rep, 3)
	if rep.Supervisors < 2 {
		t.Errorf("supervise ran %d times, want one per task", rep.Supervisors)
	}
}

// Deliberately broken agents fail, each for its own reason.
func TestBrokenAgentsFailTheRightCheck(t *testing.T) {
	py := python(t)
	for _, tc := range []struct {
		mode  string
		check string
	}{
		{"ignore-resume", chaos.CheckResumed},
		{"no-resumed", chaos.CheckResumed},
		{"twice", chaos.CheckTurnOnce},
		// Judged when the run handed the resume opens a new session, not
		// at the timeout.
		{"new-session", chaos.CheckResumed},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			rep := run(t, chaos.Config{Argv: []string{py, repo("chaos/testdata/broken_agent.py"), tc.mode}, Kills: 1, Seed: 4})
			wantOnly(t, rep, tc.check)
			if len(rep.Kills) != 1 || slices.Equal(rep.Kills[0].Failed, []string{}) {
				t.Errorf("the kill row does not carry the failure: %+v", rep.Kills)
			}
		})
	}
}

// An agent whose helpers leave its process group (setsid) is correct under
// supervise, whose sweep ends them: the run passes, no survivor is
// counted, and a warning names the escaped helper (a process-group kill
// alone would have left it running). Codex's shell snapshot is such a
// helper, and a kill that found it running once failed the real Codex.
func TestSetsidHelperIsAWarning(t *testing.T) {
	py := python(t)
	rep := run(t, chaos.Config{Argv: []string{py, repo("chaos/testdata/broken_agent.py"), "setsid"}, Kills: 1, Seed: 4})
	if !rep.OK {
		t.Fatalf("an agent with a setsid helper failed: %v", rep.Failures)
	}
	if len(rep.Kills) != 1 || rep.Kills[0].Survivors != 0 || rep.Kills[0].Escaped == 0 {
		t.Errorf("kills = %+v, want one with no survivor and the helper counted as escaped", rep.Kills)
	}
	if w := strings.Join(rep.Warnings, "; "); !strings.Contains(w, "had left the agent's process group") || !strings.Contains(w, "sleep") {
		t.Errorf("warnings = %q, want the escaped sleep named", w)
	}
}

// An agent that reports no turn fails at once, with the reason.
func TestSilentAgentFails(t *testing.T) {
	rep := run(t, chaos.Config{Argv: []string{"true"}, Kills: 1})
	wantOnly(t, rep, chaos.CheckNoTurns)
}

// One that dies at every start, before any turn, is judged after a few
// deaths, long before its timeout, and the failure says what to do.
func TestAgentDyingAtStartStopsEarly(t *testing.T) {
	rep := run(t, chaos.Config{Argv: []string{"sh", "-c", "echo cannot start >&2; exit 3"}, Kills: 1, Timeout: 10 * time.Minute})
	wantOnly(t, rep, chaos.CheckAgentDied)
	if f := strings.Join(rep.Failures, "; "); !strings.Contains(f, "died 3 times in a row before it reported any turn") {
		t.Errorf("failures do not say the agent never got going: %s", f)
	}
}

// One that runs on without reporting a turn fails at the timeout, and says
// why no kill was made.
func TestSilentLongAgentSaysWhy(t *testing.T) {
	rep := run(t, chaos.Config{Argv: []string{"sleep", "600"}, Kills: 1, Timeout: time.Second})
	wantOnly(t, rep, chaos.CheckTimeout)
	if f := strings.Join(rep.Failures, "; "); !strings.Contains(f, "0 of 1 kills made; the agent never reported a turn") ||
		!strings.Contains(f, "NOTIFY_SOCKET") {
		t.Errorf("no hint why: %s", f)
	}
}

// An agent that declares its side effect done and does it again after a
// resume fails effect-once, killed right after the effect (--at
// tool-end); the same agent skipping what its resume file lists as done
// passes. The failure names the kill, the session, the turn, the key and
// the fix.
func TestRedoneEffectFailsEffectOnce(t *testing.T) {
	py := python(t)
	agent := repo("chaos/testdata/effect_agent.py")
	t.Run("redo", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "effects.out")
		rep := run(t, chaos.Config{Argv: []string{py, agent, "redo", out}, Kills: 3, At: chaos.ToolEnd, Seed: 7})
		wantOnly(t, rep, chaos.CheckEffect)
		f := rep.Failures[0]
		for _, want := range []string{"effect-once: kill 1 (session s1, turn \"t1\")", `"append:s1/t1"`, "ran twice", `"effects"`} {
			if !strings.Contains(f, want) {
				t.Errorf("failure lacks %q: %s", want, f)
			}
		}
		if k := rep.Kills[0]; !strings.HasPrefix(k.At, "tool-end, effect append:s1/") {
			t.Errorf("kill 1 at %q, want right after the effect", k.At)
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "effects.out")
		rep := run(t, chaos.Config{Argv: []string{py, agent, "idempotent", out}, Kills: 3, At: chaos.ToolEnd, Seed: 7})
		wantPass(t, rep, 3)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			key := strings.Fields(line)[0]
			if seen[key] {
				t.Errorf("side effect %s done twice:\n%s", key, b)
			}
			seen[key] = true
		}
	})
}

// Turn ids that restart at t1 in every process fail turn-fresh: the new
// run begins the id of a turn that already ended.
func TestReusedTurnIDsFailTurnFresh(t *testing.T) {
	py := python(t)
	out := filepath.Join(t.TempDir(), "effects.out")
	rep := run(t, chaos.Config{Argv: []string{py, repo("chaos/testdata/effect_agent.py"), "reuse-ids", out}, Kills: 3, Seed: 7})
	wantOnly(t, rep, chaos.CheckFresh)
	if f := rep.Failures[0]; !strings.Contains(f, `began turn "t1" of session s1, but the session's turn "t1" already ended completed`) ||
		!strings.Contains(f, "kill 1 (session s1") || !strings.Contains(f, "persist a counter") {
		t.Errorf("failure: %s", f)
	}
}

// An agent that numbers the continuation of a resumed turn afresh (Codex
// does) passes: supervise maps the new id onto the interrupted turn, and so
// does chaos; the renumbered turn's end closes both ids.
func TestRenumberedResumedTurnPasses(t *testing.T) {
	py := python(t)
	out := filepath.Join(t.TempDir(), "effects.out")
	rep := run(t, chaos.Config{Argv: []string{py, repo("chaos/testdata/effect_agent.py"), "renumber", out}, Kills: 3, Seed: 7})
	wantPass(t, rep, 3)
}

// A state dir that holds anything (a real one holds a journal) is refused
// before anything starts, and so are --state-dir and --name among the run
// flags: chaos never writes into a real state dir.
func TestRealStateDirRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "journal.db"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []chaos.Config{
		{Argv: []string{"true"}, StateDir: dir},
		{Argv: []string{"true"}, RunFlags: []string{"--state-dir", dir}},
		{Argv: []string{"true"}, RunFlags: []string{"--name=prod"}},
	} {
		if _, err := chaos.Run(context.Background(), cfg); !errors.Is(err, chaos.ErrUsage) {
			t.Errorf("%+v: %v, want a usage error", cfg, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "journal.db")); err != nil || string(b) != "x" {
		t.Errorf("the state dir changed: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the state dir holds %d entries now", len(ents))
	}
}

// Random kills land at seeded offsets within the turn (longer: several
// turns of warm-up and misses).
func TestRandomKillsLong(t *testing.T) {
	if os.Getenv("SUPERVISE_LONG") == "" {
		t.Skip("set SUPERVISE_LONG=1 for the longer chaos runs")
	}
	py := python(t)
	for _, at := range []chaos.Point{chaos.Random, chaos.Tool, chaos.ToolEnd, chaos.TurnBegin} {
		rep := run(t, chaos.Config{Argv: []string{py, repo("examples/python/agent.py"), "loop"}, Kills: 9, At: at,
			Timeout: 2 * time.Minute})
		wantPass(t, rep, 9)
	}
}

func TestPlanAndFlags(t *testing.T) {
	if _, err := chaos.Run(context.Background(), chaos.Config{Argv: []string{"x"}, RunFlags: []string{"--resume=off"}}); err == nil {
		t.Error("--resume=off accepted")
	}
	if _, err := chaos.Run(context.Background(), chaos.Config{Argv: []string{"x"}, At: "middle"}); err == nil {
		t.Error("a bad kill point accepted")
	}
}

// A kill at a tool's end that lands after the agent had sent the turn's
// end interrupted no turn: supervise journals the turn-end at the death
// and decides nothing, and chaos counts a miss and makes the kill again at
// the next turn, instead of failing a resume that was never owed (the next
// run's fresh turn is not "the resumed turn" beginning early). An agent
// whose every tool-end kill misses so is told why at the timeout: it does
// not wait for the marker it is killed at.
func TestKillAfterTurnEndIsAMiss(t *testing.T) {
	py := python(t)
	out := filepath.Join(t.TempDir(), "effects.out")
	rep := run(t, chaos.Config{Argv: []string{py, repo("chaos/testdata/nowait_agent.py"), out}, Kills: 3, At: chaos.ToolEnd, Seed: 7,
		Timeout: 8 * time.Second})
	for _, c := range []string{chaos.CheckResumed, chaos.CheckCompleted, chaos.CheckDecision, chaos.CheckKillPoint} {
		if rep.Failed(c) {
			t.Fatalf("a kill after the turn's end judged a failure of %s: %s", c, strings.Join(rep.Failures, "; "))
		}
	}
	// Whether a kill ever lands between the two back-to-back datagrams
	// depends on how fast supervise reads them, so on the machine's load:
	// either every planned kill landed in a turn (and held), or the run
	// timed out on misses and says why. Never a failed check of the turns.
	if !rep.OK {
		wantOnly(t, rep, chaos.CheckTimeout)
		if f := rep.Failures[0]; !strings.Contains(f, "all landed after the agent had sent the turn's end (missed kills, each made again)") ||
			!strings.Contains(f, "a barrier after it") {
			t.Errorf("failure does not say why: %s", f)
		}
		if rep.Misses < 10 {
			t.Errorf("timed out after %d misses, want at least 10", rep.Misses)
		}
	} else if len(rep.Kills) != 3 {
		t.Errorf("passed with %d kills landed, want the 3 planned", len(rep.Kills))
	}
	if rep.Runs < rep.Misses {
		t.Errorf("%d misses in %d runs, want each in a run of its own", rep.Misses, rep.Runs)
	}
	for _, k := range rep.Kills {
		if k.Verdict() != "ok" {
			t.Errorf("kill %d that landed failed: %+v", k.Kill, k)
		}
	}
}
