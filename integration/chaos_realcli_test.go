package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// The real agent CLIs, one-shot task CLIs under --resume-exec, pass
// `supervise chaos`: killed inside their shell tool, each task is resumed
// by the README's template, the first resumed turn completes, the second is
// killed again inside its tool and parked. The commands are the ones
// docs/prove-your-agent.md gives. Claude Code runs its hooks in a process
// group of their own; the survivors check exempts those hooks in flight.
func TestChaosRealClaudeCode(t *testing.T) { chaosRealCLI(t, claudeCodeCLI()) }

func TestChaosRealCodex(t *testing.T) { chaosRealCLI(t, codexCLI()) }

func TestChaosRealGemini(t *testing.T) { chaosRealCLI(t, geminiCLI()) }

func chaosRealCLI(t *testing.T, cli realCLI) {
	if os.Getenv("SUPERVISE_LONG") == "" {
		t.Skip("four real CLI runs take 40 s or more: set SUPERVISE_LONG=1 (.ci/run does)")
	}
	t.Parallel()
	r, rep := chaosRealRun(t, cli, "tool")
	for try := 1; try < 3 && !rep.OK && r.lostSession; try++ {
		// Claude Code writes its transcript a moment after a turn's first
		// message: killed within that moment, its session is gone, and
		// `claude -r` exits 1 "No conversation found with session ID".
		// supervise parks the session as it should; the CLI's race is not
		// what this test is about, so it runs once more.
		t.Logf("%s lost the session killed early (No conversation found): once more", cli.bin)
		r, rep = chaosRealRun(t, cli, "tool")
	}
	if !rep.OK {
		t.Fatalf("supervise chaos against %s: %v\nstdout:\n%s\nstderr:\n%s\nlog (tail):\n%s", r.cli.bin, r.err, r.out, r.stderr, lastBytes(r.log, 6000))
	}
	if len(rep.Kills) != 3 || rep.Kills[2].Decision != "parked" || !rep.Kills[0].Completed {
		t.Errorf("kills: %+v", rep.Kills)
	}
	for _, k := range rep.Kills {
		if !strings.HasPrefix(k.At, "tool ") {
			t.Errorf("kill %d at %q, want inside a tool", k.Kill, k.At)
		}
	}
	// The tasks ran as two conversations (one per task), never a third:
	// no resume ran a task again as a new session.
	seen, fresh, sessions := false, 0, map[string]bool{}
	for _, q := range r.api.AgentRequests() {
		if strings.Contains(q.FirstUser, realPrompt) {
			seen = true
			if q.Session != "" {
				sessions[q.Session] = true
			}
			if q.Replies == 0 && !q.Contains(continuationMark) {
				fresh++
			}
		}
	}
	// Where the mock can read the task out of a request (and, apart from
	// Gemini's, a session id from it); the report's sessions say the same.
	if seen && fresh != 2 {
		t.Errorf("%d conversations opened on the task, want 2 (one per task run)", fresh)
	}
	if len(sessions) > 0 && len(sessions) != 2 {
		t.Errorf("the task's requests came from %d sessions, want 2 (one per task run): %v", len(sessions), sessions)
	}
	if k := rep.Kills; len(k) == 3 && (k[0].Session == k[1].Session || k[1].Session != k[2].Session || k[0].Session == "") {
		t.Errorf("sessions of the kills: %q %q %q, want a new one per task and the same for the repeat kill", k[0].Session, k[1].Session, k[2].Session)
	}
	t.Logf("chaos against %s:\n%s", r.cli.bin, r.out)
}

// realChaosTask is the task's shell command: each run makes one file
// task.* in the project.
const realChaosTask = "mktemp -p . task.XXXXXX"

// realChaosRun is one `supervise chaos` run against a real CLI.
type realChaosRun struct {
	*realEnv
	out, stderr string
	log         []byte
	err         error
	lostSession bool // the CLI said "No conversation found" at a resume
}

func chaosRealRun(t *testing.T, cli realCLI, at string) (realChaosRun, chaosJSON) {
	t.Helper()
	r := newRealEnv(t, cli)
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case q.ToolResult:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
		case continuation(q):
			// The resumed turn checks the state with a tool too: a kill
			// point for the second kill.
			return mockapi.Reply{Kind: mockapi.Tool, Command: "ls"}
		}
		// The model answers the task once the CLI has written the
		// conversation down (Claude Code writes it lazily): the kill in
		// the tool that follows is then one a resume can recover from.
		if r.cli.transcript != nil && q.Session != "" {
			deadline := time.Now().Add(20 * time.Second)
			for !r.cli.transcript(r, q.Session) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
		// A side effect every CLI runs headless: a new file each time
		// (Gemini CLI asks before a command with a redirection, and so
		// never runs one with -p).
		return mockapi.Reply{Kind: mockapi.Tool, Command: realChaosTask}
	})
	logPath := filepath.Join(r.dir, "chaos.log")
	cmd := exec.Command(superviseBin, "chaos", "--json", "--at", at, "--kills", "3", "--seed", "15",
		"--timeout", "4m", "--log", logPath,
		"--resume-exec", r.cli.template, "--")
	cmd.Args = append(append(cmd.Args, r.cli.task...), realPrompt)
	// chaos runs on a scratch state dir of its own and refuses a real one:
	// the scenario's SUPERVISE_STATE_DIR is not passed.
	vars := slices.DeleteFunc(slices.Clone(r.vars), func(kv string) bool { return strings.HasPrefix(kv, "SUPERVISE_STATE_DIR=") })
	// Its temp dir is the test's: a failing run's scratch dir goes with it
	// (a short path: supervise's socket paths must fit in 108 bytes).
	tmp, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	cmd.Env = append(append(os.Environ(), vars...), "TMPDIR="+tmp)
	cmd.Dir = r.proj
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(logPath)
	var rep chaosJSON
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil || err != nil {
		rep.OK = false
	}
	return realChaosRun{realEnv: r, out: out.String(), stderr: errb.String(), log: log, err: err,
		lostSession: bytes.Contains(log, []byte("No conversation found with session ID"))}, rep
}
