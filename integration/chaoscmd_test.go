package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// chaosCmd runs `supervise chaos ARGS` in a private dir and returns its
// stdout, stderr and exit code. Its temp dir is the test's too: the scratch
// dir a failing run keeps (and names) goes with the test.
func chaosCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return chaosCmdEnv(t, nil, args...)
}

// chaosCmdEnv is chaosCmd with more environment.
func chaosCmdEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	// A short one: the scratch state dir holds supervise's sockets, whose
	// paths must fit in 108 bytes.
	tmp, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	cmd := exec.Command(superviseBin, append([]string{"chaos"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(append(os.Environ(), "SUPERVISE_BACKOFF_INITIAL=20ms", "TMPDIR="+tmp), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func pythonExe(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	if out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output(); err == nil && len(bytes.TrimSpace(out)) > 0 {
		return string(bytes.TrimSpace(out))
	}
	return p
}

// The chaos command's JSON, as DESIGN.md and the docs show it.
type chaosJSON struct {
	OK       bool   `json:"ok"`
	Seed     uint64 `json:"seed"`
	Failures []string
	Kills    []struct {
		Kill      int    `json:"kill"`
		At        string `json:"at"`
		Session   string `json:"session"`
		Decision  string `json:"decision"`
		Resumed   bool   `json:"resumed"`
		Completed bool   `json:"completed"`
		Parked    bool   `json:"parked"`
		Survivors int    `json:"survivors"`
	} `json:"kills"`
}

func TestChaosCommandPassesTheExampleAgent(t *testing.T) {
	py := pythonExe(t)
	agent, _ := filepath.Abs("../examples/python/agent.py")
	out, errs, code := chaosCmd(t, "--json", "--kills", "2", "--seed", "7", "--", py, agent, "loop")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	var rep chaosJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !rep.OK || rep.Seed != 7 || len(rep.Kills) != 2 || len(rep.Failures) != 0 {
		t.Fatalf("report: %s", out)
	}
	for _, k := range rep.Kills {
		if k.Decision != "resume_pending" || !k.Resumed || !k.Completed || k.Session != "loop" {
			t.Errorf("kill %d: %+v", k.Kill, k)
		}
	}
	if !strings.Contains(errs, "seed 7") {
		t.Errorf("the seed is not printed first: %s", errs)
	}
}

func TestChaosCommandFailsABrokenAgent(t *testing.T) {
	py := pythonExe(t)
	agent, _ := filepath.Abs("../chaos/testdata/broken_agent.py")
	out, errs, code := chaosCmd(t, "--kills", "1", "--", py, agent, "twice")
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"KILL", "VERDICT", "FAIL turn-once", "turn-once: kill 1", "replay: --seed"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	t.Logf("table:\n%s", out)
}

func TestChaosCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--at", "middle", "--", "true"},
		{"--kills", "0", "--", "true"},
		{"--resume", "off", "--", "true"},
		{"--state-dir", t.TempDir(), "--", "true"},
		{"--name", "prod", "--", "true"},
	} {
		if _, errs, code := chaosCmd(t, args...); code != 2 {
			t.Errorf("supervise chaos %q: exit %d, want 2 (%s)", args, code, errs)
		}
	}
	// An agent that cannot start is not a usage error: 1, as the docs say.
	if _, errs, code := chaosCmd(t, "--", "no-such-agent-anywhere"); code != 1 || !strings.Contains(errs, "cannot run the agent") {
		t.Errorf("supervise chaos -- no-such-agent-anywhere: exit %d, want 1 (%s)", code, errs)
	}
	out, _, code := chaosCmd(t, "--help")
	if code != 0 || !strings.Contains(out, "Exit codes") || !strings.Contains(out, "-kills") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}
