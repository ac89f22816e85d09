package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// superviseCmd runs supervise with args and env added to this process's
// environment, and returns its exit code, stdout and stderr.
func superviseCmd(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, superviseBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("supervise %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// Two agents run under --name one and --name two: supervise ls --json lists
// both, live, with their supervise's pid and their agent's, and the table
// names both. status without --name lists them too, instead of refusing.
func TestLsTwoLiveAgents(t *testing.T) {
	e := newEnv(t)
	xdg := t.TempDir()
	// --name, not the harness's SUPERVISE_STATE_DIR, names the state dirs.
	e.vars = append(e.vars, "XDG_STATE_HOME="+xdg, "SUPERVISE_STATE_DIR=")
	e.set("TESTAGENT_SCRIPT=log up; hang")
	one := e.start("run", "--name", "one", "--", agentBin)
	two := e.start("run", "--name", "two", "--", agentBin)
	waitFor(t, 30*time.Second, "both agents to start", func() bool { return e.count("start") == 2 })
	env := []string{"XDG_STATE_HOME=" + xdg, "SUPERVISE_STATE_DIR=", "SUPERVISE_NAME="}

	var list struct {
		Root   string `json:"root"`
		Agents []struct {
			Name       string `json:"name"`
			StateDir   string `json:"state_dir"`
			State      string `json:"state"`
			Supervisor struct {
				Live          bool    `json:"live"`
				PID           int     `json:"pid"`
				UptimeSeconds float64 `json:"uptime_seconds"`
			} `json:"supervisor"`
			Child struct {
				State string `json:"state"`
				PID   int    `json:"pid"`
			} `json:"child"`
		} `json:"agents"`
	}
	// The child's state is running once supervise has seen it start.
	waitFor(t, 30*time.Second, "ls to show both children running", func() bool {
		code, out, errs := superviseCmd(t, env, "ls", "--json")
		if code != 0 {
			t.Fatalf("ls --json: exit %d: %s", code, errs)
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("ls --json: %v\n%s", err, out)
		}
		return len(list.Agents) == 2 && list.Agents[0].Child.State == "running" && list.Agents[1].Child.State == "running"
	})
	if list.Root != filepath.Join(xdg, "supervise") {
		t.Errorf("root %s, want %s", list.Root, filepath.Join(xdg, "supervise"))
	}
	for i, want := range []struct {
		name string
		p    *proc
	}{{"one", one}, {"two", two}} {
		a := list.Agents[i]
		if a.Name != want.name || a.State != "live" || !a.Supervisor.Live || a.Supervisor.PID != want.p.cmd.Process.Pid ||
			a.StateDir != filepath.Join(xdg, "supervise", want.name) {
			t.Errorf("agent %d: %+v; want %s, live, supervise pid %d", i, a, want.name, want.p.cmd.Process.Pid)
		}
		if a.Child.PID <= 0 || !alive(a.Child.PID) {
			t.Errorf("%s: child pid %d is not a live process", a.Name, a.Child.PID)
		}
	}

	code, out, errs := superviseCmd(t, env, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d: %s", code, errs)
	}
	for _, a := range list.Agents {
		if !strings.Contains(out, "\n"+a.Name+" ") || !strings.Contains(out, " live ") {
			t.Errorf("the table does not name %s as live:\n%s", a.Name, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > 100 {
			t.Errorf("line wider than 100 columns: %q", l)
		}
	}
	t.Logf("supervise ls:\n%s", out)

	code, out, errs = superviseCmd(t, env, "status")
	if code != 0 || !strings.Contains(out, "\none ") || !strings.Contains(out, "\ntwo ") {
		t.Errorf("status with two agents: exit %d\n%s\n%s", code, out, errs)
	}

	// Stopped, they are listed as stopped, from their journals.
	one.signal(syscall.SIGTERM)
	two.signal(syscall.SIGTERM)
	one.wait(30 * time.Second)
	two.wait(30 * time.Second)
	_, out, _ = superviseCmd(t, env, "ls", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Agents) != 2 ||
		list.Agents[0].State != "stopped" || list.Agents[1].State != "stopped" || list.Agents[0].Supervisor.Live {
		t.Errorf("after both stopped: %v\n%s", err, out)
	}
}

// A launch whose agent cannot be started leaves no state dir behind; one
// whose agent ran (and exited 127 itself) keeps its journal.
func TestFailedLaunchLeavesNoStateDir(t *testing.T) {
	// A short root: the notify socket's path must fit in 108 bytes.
	xdg, err := os.MkdirTemp("", "ls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(xdg) })
	env := []string{"XDG_STATE_HOME=" + xdg, "SUPERVISE_STATE_DIR=", "SUPERVISE_NAME="}
	code, _, errs := superviseCmd(t, env, "--restart", "never", "--", "no-such-agent-x")
	if code != 127 || !strings.Contains(errs, "executable file not found") {
		t.Fatalf("exit %d, want 127:\n%s", code, errs)
	}
	if ents, err := os.ReadDir(xdg); err != nil || len(ents) != 0 {
		t.Errorf("left behind under XDG_STATE_HOME: %v %v", ents, err)
	}
	sd := filepath.Join(xdg, "a", "b")
	if code, _, _ := superviseCmd(t, env, "--state-dir", sd, "--", "/dev/null"); code != 126 {
		t.Errorf("--state-dir %s -- /dev/null: exit %d, want 126", sd, code)
	}
	if _, err := os.Lstat(filepath.Dir(sd)); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", filepath.Dir(sd), err)
	}
	code, _, errs = superviseCmd(t, env, "--restart", "never", "--name", "ran", "--", "sh", "-c", "exit 127")
	if code != 127 {
		t.Fatalf("an agent that exits 127: exit %d\n%s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(xdg, "supervise", "ran", "journal.db")); err != nil {
		t.Errorf("the journal of an agent that ran is gone: %v", err)
	}
}

// The flags through the real binary: sizes that would turn the memory
// guard off, an empty --state-dir, an unknown flag (with the nearest one
// suggested, in every subcommand) are exit 2, before anything runs;
// --version is never a bare "devel".
func TestFlagsRefusedByBinary(t *testing.T) {
	xdg := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + xdg, "SUPERVISE_STATE_DIR=", "SUPERVISE_NAME="}
	cwd := t.TempDir()
	os.Chmod(cwd, 0o755)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-rss", "NaN", "--", "true"}, `--max-rss: bad size "NaN"`},
		{[]string{"--max-rss", "Inf", "--", "true"}, `--max-rss: bad size "Inf"`},
		{[]string{"--max-rss", "1e30", "--", "true"}, `--max-rss: bad size "1e30"`},
		{[]string{"--max-rss", "99999999999999999999", "--", "true"}, "too large"},
		{[]string{"--max-rss", "0.5", "--", "true"}, "a fraction of a byte"},
		{[]string{"--state-dir", "", "--", "true"}, "--state-dir is empty"},
		{[]string{"status", "--state-dir", ""}, "--state-dir is empty"},
		{[]string{"--restrat", "never", "--", "true"}, "did you mean --restart?"},
		{[]string{"status", "--jsn"}, "did you mean --json?"},
		{[]string{"ls", "--rot", "x"}, "did you mean --root?"},
		{[]string{"unit", "systemd", "--stop-timout", "1s", "--", "x"}, "did you mean --stop-timeout?"},
		{[]string{"chaos", "--kils", "1", "--", "x"}, "did you mean --kills?"},
	} {
		cmd := exec.Command(superviseBin, c.args...)
		cmd.Env, cmd.Dir = append(os.Environ(), env...), cwd
		out, err := cmd.CombinedOutput()
		code := -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("supervise %q: exit %d, want 2 and %q:\n%s", c.args, code, c.want, out)
		}
	}
	// Nothing was created: not in the state root, not in the working
	// directory, whose mode is as it was (an empty --state-dir once meant
	// the working directory, chmod'ed 0700).
	if ents, _ := os.ReadDir(xdg); len(ents) != 0 {
		t.Errorf("created under XDG_STATE_HOME: %v", ents)
	}
	if fi, _ := os.Stat(cwd); fi.Mode().Perm() != 0o755 {
		t.Errorf("the working directory's mode is %v", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(cwd); len(ents) != 0 {
		t.Errorf("created in the working directory: %v", ents)
	}
	code, out, _ := superviseCmd(t, env, "--version")
	if v := strings.TrimSpace(out); code != 0 || !strings.HasPrefix(v, "supervise ") || v == "supervise devel" {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

// An unknown session names the state dir searched, live and offline.
func TestUnknownSessionNamesStateDir(t *testing.T) {
	e := newEnv(t)
	p := e.run()
	e.waitEvent(1, "start")
	for _, args := range [][]string{{"status", "--session", "nosuch"}, {"resume", "nosuch"}} {
		code, _, errs := superviseCmd(t, e.vars, append(args, "--state-dir", e.stateDir)...)
		if code == 0 || !strings.Contains(errs, "nosuch") || !strings.Contains(errs, e.stateDir) {
			t.Errorf("live %v: exit %d, stderr %q; want the state dir %s named", args, code, errs, e.stateDir)
		}
	}
	p.signal(syscall.SIGTERM)
	p.wait(30 * time.Second)
	for _, args := range [][]string{{"status", "--session", "nosuch"}, {"resume", "nosuch"}} {
		code, _, errs := superviseCmd(t, e.vars, append(args, "--state-dir", e.stateDir)...)
		if code == 0 || !strings.Contains(errs, "nosuch") || !strings.Contains(errs, e.stateDir) {
			t.Errorf("offline %v: exit %d, stderr %q; want the state dir %s named", args, code, errs, e.stateDir)
		}
	}
}

// A session the crash breaker parked (A), and one parked because it waited
// for a person when the agent died (B): supervise ls (the table and
// --json) names the agent's row PARKED 2 and prints the exact command that
// resumes each, live and after supervise stopped; that command, run as
// printed, lifts the park. A session waiting for input in the live run (C)
// is listed with the command that shows it.
func TestLsPrintsResumeCommandOfParkedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin A tA; barrier; turn-begin B tB; waiting B tB; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; barrier; log took; hang",
		"TESTAGENT_SCRIPT_3=turn-begin C tC; waiting C tC; log third; hang")
	sv := e.run()
	e.killChildOf(1, "barrier-ok")
	ev := e.waitLog(2, "took")
	syscall.Kill(ev.pid, syscall.SIGKILL)
	e.waitLog(3, "third")
	waitFor(t, 20*time.Second, "C waiting", func() bool { c, _ := e.status().session("C"); return c.State == "waiting" })
	if a, _ := e.status().session("A"); a.State != "parked" {
		t.Fatalf("A = %+v, want parked", a)
	}
	root := filepath.Dir(e.stateDir)
	want := "supervise resume --state-dir " + e.stateDir + " A"
	check := func(when string) {
		code, out, errs := superviseCmd(t, e.vars, "ls", "--root", root)
		if code != 0 {
			t.Fatalf("%s: ls: exit %d: %s", when, code, errs)
		}
		t.Logf("%s: supervise ls:\n%s", when, out)
		if !strings.Contains(out, "\nstate ") || !strings.Contains(out, " PARKED 2 ") ||
			!strings.Contains(out, "\n  state A: parked (mid-turn at 2 consecutive dirty deaths") || !strings.Contains(out, "\n    "+want+"\n") ||
			!strings.Contains(out, "\n    supervise resume --state-dir "+e.stateDir+" B\n") {
			t.Errorf("%s: ls does not show A and B parked, with %q:\n%s", when, want, out)
		}
		if when == "live" && (!strings.Contains(out, "needs a person: 3 sessions in 1 agent\n") ||
			!strings.Contains(out, "\n  state C: waiting for input: answer it in the agent\n    supervise status --state-dir "+e.stateDir+" --session C\n")) {
			t.Errorf("live: ls does not show C waiting for input:\n%s", out)
		}
		code, out, _ = superviseCmd(t, e.vars, "ls", "--json", "--root", root)
		var list struct {
			Agents []struct {
				Name        string `json:"name"`
				NeedsPerson []struct {
					Session, State, Command string
				} `json:"needs_person"`
				NeedsPersonTotal int `json:"needs_person_total"`
			} `json:"agents"`
		}
		if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Agents) != 1 {
			t.Fatalf("%s: ls --json: exit %d, %v\n%s", when, code, err, out)
		}
		a := list.Agents[0]
		if a.NeedsPersonTotal < 1 || a.NeedsPerson[0].Session != "A" || a.NeedsPerson[0].State != "parked" || a.NeedsPerson[0].Command != want {
			t.Errorf("%s: needs_person %d %+v; want A parked, %q", when, a.NeedsPersonTotal, a.NeedsPerson, want)
		}
	}
	check("live")
	e.stop(sv)
	check("stopped")
	// The printed command works as printed.
	args := strings.Fields(want)[1:]
	if code, out, errs := superviseCmd(t, e.vars, args...); code != 0 || !strings.Contains(out, "session A will be resumed") {
		t.Errorf("%s: exit %d\n%s%s", want, code, out, errs)
	}
	if _, out, _ := superviseCmd(t, e.vars, "ls", "--root", root); !strings.Contains(out, " PARKED 1 ") || strings.Contains(out, want) {
		t.Errorf("A still listed after its resume:\n%s", out)
	}
}

// A state dir this user may not read (a unit-installed agent's, owned by
// root) is a no-access row that says so; ls still lists the others and
// exits 77 (EX_NOPERM) once it has printed them.
func TestLsStateDirNotReadable(t *testing.T) {
	t.Parallel()
	root, err := os.MkdirTemp("", "ls-access")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	for _, name := range []string{"open", "closed"} {
		code, _, errs := superviseCmd(t, []string{"SUPERVISE_STATE_DIR="}, "run", "--restart", "never", "--state-dir", filepath.Join(root, name), "--", "true")
		if code != 0 {
			t.Fatalf("run %s: exit %d\n%s", name, code, errs)
		}
	}
	// supervise made both 0700: open one of them to everyone.
	os.Chmod(filepath.Join(root, "open"), 0o755)
	os.Chmod(filepath.Join(root, "open", "journal.db"), 0o644)
	cmd := exec.Command(superviseBin, "ls", "--root", root)
	if os.Geteuid() == 0 {
		// Root reads everything: ls runs as nobody, from a copy of the
		// binary nobody may run.
		bin := filepath.Join(root, "supervise-copy")
		data, err := os.ReadFile(superviseBin)
		if err != nil || os.WriteFile(bin, data, 0o755) != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(bin, "ls", "--root", root)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	} else {
		os.Chmod(filepath.Join(root, "closed"), 0)
		t.Cleanup(func() { os.Chmod(filepath.Join(root, "closed"), 0o700) })
	}
	cmd.Env = append(os.Environ(), "HOME="+root, "SUPERVISE_STATE_DIR=")
	out, err := cmd.CombinedOutput()
	t.Logf("supervise ls:\n%s", out)
	if code := cmd.ProcessState.ExitCode(); code != 77 {
		t.Fatalf("ls: exit %d (%v), want 77: a state dir under the root may not be read\n%s", code, err, out)
	}
	for _, want := range []string{"\nclosed           no-access", "\nclosed: no-access: ", "permission denied", "\nopen             stopped"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ls lacks %q", want)
		}
	}
}
