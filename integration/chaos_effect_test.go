package integration

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 24, as a user runs it: an agent that declares its side effect done
// and does it again after a resume fails `supervise chaos --at tool-end
// --kills 3 --seed 7` with effect-once named; the same agent skipping what
// its resume file lists as done passes it.
func TestChaosCommandEffectOnce(t *testing.T) {
	py := pythonExe(t)
	agent, _ := filepath.Abs("../chaos/testdata/effect_agent.py")
	t.Run("redo", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "effects.out")
		stdout, errs, code := chaosCmd(t, "--at", "tool-end", "--kills", "3", "--seed", "7", "--", py, agent, "redo", out)
		if code != 1 {
			t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, errs)
		}
		for _, want := range []string{"FAIL effect-once", `effect-once: kill 1 (session s1, turn "t1"): run 2 declared effect "append:s1/t1"`,
			"ran twice", "replay: --seed 7 --at tool-end --kills 3"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("report lacks %q:\n%s", want, stdout)
			}
		}
		b, _ := os.ReadFile(out)
		if strings.Count(string(b), "append:s1/t1 ") != 2 {
			t.Errorf("the agent did not do t1's effect twice, so the test proves nothing:\n%s", b)
		}
	})
	t.Run("idempotent", func(t *testing.T) {
		t.Parallel()
		out := filepath.Join(t.TempDir(), "effects.out")
		stdout, errs, code := chaosCmd(t, "--json", "--at", "tool-end", "--kills", "3", "--seed", "7", "--", py, agent, "idempotent", out)
		var rep chaosJSON
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 || !rep.OK || len(rep.Kills) != 3 {
			t.Fatalf("exit %d (%v)\n%s\n%s", code, err, stdout, errs)
		}
		for _, k := range rep.Kills {
			if !strings.HasPrefix(k.At, "tool-end") {
				t.Errorf("kill %d at %q, want at a tool's end", k.Kill, k.At)
			}
		}
	})
}

// An agent whose turn ids restart at t1 in every process fails turn-fresh.
func TestChaosCommandTurnFresh(t *testing.T) {
	py := pythonExe(t)
	agent, _ := filepath.Abs("../chaos/testdata/effect_agent.py")
	out := filepath.Join(t.TempDir(), "effects.out")
	stdout, errs, code := chaosCmd(t, "--kills", "3", "--seed", "7", "--", py, agent, "reuse-ids", out)
	if code != 1 || !strings.Contains(stdout, "FAIL turn-fresh") ||
		!strings.Contains(stdout, `turn-fresh: kill 1 (session s1, turn "t1"): run 2 began turn "t1" of session s1`) {
		t.Fatalf("exit %d, want 1 with turn-fresh\n%s\n%s", code, stdout, errs)
	}
}

// `supervise chaos --state-dir DIR` (or SUPERVISE_STATE_DIR, or --name)
// leaves a journal already in DIR byte for byte as it was: refused, exit
// 2, nothing started.
func TestChaosCommandLeavesARealStateDirAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if out, err := exec.Command(superviseBin, "run", "--state-dir", dir, "--", "true").CombinedOutput(); err != nil {
		t.Fatalf("making a journal: %v\n%s", err, out)
	}
	before := snapshotDir(t, dir)
	if len(before) == 0 {
		t.Fatal("no journal was made")
	}
	py := pythonExe(t)
	agent, _ := filepath.Abs("../examples/python/agent.py")
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--state-dir", dir, "--kills", "1", "--", py, agent, "loop"}},
		{[]string{"SUPERVISE_STATE_DIR=" + dir}, []string{"--kills", "1", "--", py, agent, "loop"}},
		{nil, []string{"--name", "state", "--kills", "1", "--", py, agent, "loop"}},
	} {
		stdout, errs, code := chaosCmdEnv(t, c.env, c.args...)
		if code != 2 || !strings.Contains(errs, "refused: chaos runs the agent on a scratch state dir of its own") || stdout != "" {
			t.Errorf("%v %q: exit %d, want 2 with the reason\n%s\n%s", c.env, c.args, code, stdout, errs)
		}
		after := snapshotDir(t, dir)
		if len(after) != len(before) {
			t.Errorf("%v %q: the state dir's files changed: %d, were %d", c.env, c.args, len(after), len(before))
		}
		for name, b := range before {
			if !bytes.Equal(after[name], b) {
				t.Errorf("%v %q: %s changed", c.env, c.args, name)
			}
		}
	}
}

// snapshotDir reads every regular file under dir.
func snapshotDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Issue 46, B9: an agent that reports `resumed` for the interrupted turn
// and then begins it again (a turn-begin with the same turn id in that
// session) fails turn-once. supervise ignores that turn-begin as repeated
// for the open turn, but the agent sent it: the turn was started twice.
// The honest agent (resumed, then the turn goes on and ends) passes. The
// test agent is killed at its turn-begin in run 1; run 2 takes the resume
// from its resume file.
func TestChaosCommandTurnOnceAfterResumed(t *testing.T) {
	for _, c := range []struct {
		name, resumed string
		liar          bool
	}{
		{"liar", "take-resumes; turn-begin s1 t1 again; barrier; phase s1 model; barrier; turn-end s1 t1 completed; barrier; hang", true},
		{"honest", "take-resumes; phase s1 model; barrier; turn-end s1 t1 completed; barrier; hang", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			log := filepath.Join(t.TempDir(), "agent.log")
			env := []string{"TESTAGENT_LOG=" + log,
				"TESTAGENT_SCRIPT_1=turn-begin s1 t1 first; barrier; hang",
				"TESTAGENT_SCRIPT=" + c.resumed}
			stdout, errs, code := chaosCmdEnv(t, env, "--json", "--kills", "1", "--seed", "7", "--timeout", "60s", "--", agentBin)
			b, _ := os.ReadFile(log)
			var rep chaosJSON
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("exit %d: %v\n%s\n%s\nagent log:\n%s", code, err, stdout, errs, b)
			}
			if len(rep.Kills) != 1 || !rep.Kills[0].Resumed || !rep.Kills[0].Completed || rep.Kills[0].Decision != "resume_pending" {
				t.Fatalf("exit %d: the kill was not resumed and completed, so the test proves nothing\n%s\n%s\nagent log:\n%s", code, stdout, errs, b)
			}
			if !c.liar {
				if code != 0 || !rep.OK {
					t.Fatalf("the honest agent failed: exit %d\n%s\n%s", code, stdout, errs)
				}
				return
			}
			if !strings.Contains(string(b), "run=2 ") || !strings.Contains(string(b), "took s1 ") {
				t.Fatalf("run 2 did not take the resume, so the test proves nothing:\n%s", b)
			}
			failures := strings.Join(rep.Failures, "\n")
			if code != 1 || rep.OK || !strings.Contains(failures, `turn-once: kill 1 (session s1, turn "t1"): run 2 reported resumed and then began turn "t1" of session s1 again`) {
				t.Fatalf("exit %d, want 1 with turn-once\n%s\n%s\nagent log:\n%s", code, stdout, errs, b)
			}
		})
	}
}
