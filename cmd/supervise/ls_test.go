package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/cmd/supervise/internal/statecmd"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// makeStateDir writes a journal into root/name as a supervise that ran
// there leaves it: its owner, clean or not, one ended run, and sessions.
func makeStateDir(t *testing.T, root, name string, clean bool, sessions ...record.Session) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(statedir.JournalPath(dir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	err = db.Update(func(tx *journal.Tx) error {
		if err := tx.SetOwner(journal.Owner{PID: 4242, Started: now.Add(-time.Hour)}); err != nil {
			return err
		}
		if err := tx.SetClean(clean); err != nil {
			return err
		}
		n, err := tx.NextRun()
		if err != nil {
			return err
		}
		if err := tx.PutRun(record.Run{Run: n, PID: 777, Started: now.Add(-time.Hour), Ended: now.Add(-10 * time.Minute),
			Signal: 9, Reason: record.ReasonSignal, Dirty: true}); err != nil {
			return err
		}
		for _, s := range sessions {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

type lsJSON struct {
	Root   string `json:"root"`
	Agents []struct {
		Name       string `json:"name"`
		StateDir   string `json:"state_dir"`
		State      string `json:"state"`
		Error      string `json:"error"`
		Supervisor struct {
			Live bool `json:"live"`
			PID  int  `json:"pid"`
		} `json:"supervisor"`
		Child struct {
			State string `json:"state"`
			PID   int    `json:"pid"`
		} `json:"child"`
		Sessions struct {
			Open            int        `json:"open"`
			Parked          int        `json:"parked"`
			Waiting         int        `json:"waiting"`
			Total           int        `json:"total"`
			EarliestRetryAt *time.Time `json:"earliest_retry_at"`
		} `json:"sessions"`
		LastDeath *struct {
			Reason string `json:"reason"`
			Signal int    `json:"signal"`
		} `json:"last_death"`
		Tokens struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"tokens"`
		NeedsPerson []struct {
			Session string `json:"session"`
			State   string `json:"state"`
			Wait    string `json:"wait"`
			Reason  string `json:"reason"`
			Command string `json:"command"`
		} `json:"needs_person"`
		NeedsPersonTotal int `json:"needs_person_total"`
	} `json:"agents"`
	Roots []struct {
		Path   string `json:"path"`
		Agents int    `json:"agents"`
		Error  string `json:"error"`
	} `json:"roots"`
}

// 100 state dirs, one of them with its journal held by a process that has
// no control socket (locked) and one with a damaged journal: ls lists
// every one, each as what it is, and neither stalls nor fails the list.
func TestLsManyStateDirs(t *testing.T) {
	root := t.TempDir()
	now := time.Now().UTC().Truncate(time.Second)
	retry1, retry2 := now.Add(30*time.Minute), now.Add(2*time.Hour)
	for i := range 98 {
		var ss []record.Session
		if i%7 == 0 {
			ss = []record.Session{
				{ID: "p", State: record.Parked, Reason: "crash breaker", Updated: now, Tokens: &record.Tokens{Input: 1000, Output: 234}},
				{ID: "w1", State: record.Waiting, Wait: "reconnect", RetryAt: retry2, Updated: now},
				{ID: "w2", State: record.Waiting, Wait: "reconnect", RetryAt: retry1, Updated: now, Tokens: &record.Tokens{Input: 5, Output: 1}},
				{ID: "i", State: record.Idle, Updated: now, Tokens: &record.Tokens{Input: 10}},
			}
		}
		makeStateDir(t, root, fmt.Sprintf("agent-%03d", i), i%2 == 0, ss...)
	}
	// Locked: the journal is open for writing here, and nothing answers on
	// its control socket.
	locked := makeStateDir(t, root, "held", true)
	db, err := journal.Open(statedir.JournalPath(locked), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	damaged := filepath.Join(root, "broken")
	os.MkdirAll(damaged, 0o700)
	if err := os.WriteFile(statedir.JournalPath(damaged), []byte(strings.Repeat("not a journal\n", 2000)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory without a journal is not an agent.
	os.MkdirAll(filepath.Join(root, "empty"), 0o700)

	start := time.Now()
	code, out, errs := call(t, "ls", "--json", "--root", root)
	t.Logf("supervise ls --json over 100 state dirs (one locked, one damaged): %v", time.Since(start))
	if code != 0 {
		t.Fatalf("ls --json: exit %d, stderr %s", code, errs)
	}
	var list lsJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("ls --json: %v\n%s", err, out)
	}
	if len(list.Agents) != 100 || list.Root != root {
		t.Fatalf("ls --json: root %s, %d agents; want %s, 100", list.Root, len(list.Agents), root)
	}
	for _, a := range list.Agents {
		switch a.Name {
		case "held":
			if a.State != "locked" || !strings.Contains(a.Error, "in use") {
				t.Errorf("held: state %q, error %q; want locked", a.State, a.Error)
			}
		case "broken":
			if a.State != "damaged" || !strings.Contains(a.Error, "journal") {
				t.Errorf("broken: state %q, error %q; want damaged", a.State, a.Error)
			}
		default:
			var i int
			fmt.Sscanf(a.Name, "agent-%d", &i)
			wantState := map[bool]string{true: "stopped", false: "died"}[i%2 == 0]
			if a.State != wantState || a.Supervisor.Live || a.Supervisor.PID != 4242 || a.StateDir != filepath.Join(root, a.Name) {
				t.Errorf("%s: %+v; want %s, pid 4242, not live", a.Name, a, wantState)
			}
			if a.LastDeath == nil || a.LastDeath.Reason != "signal" || a.LastDeath.Signal != 9 {
				t.Errorf("%s: last death %+v; want signal 9", a.Name, a.LastDeath)
			}
			s := a.Sessions
			if i%7 == 0 {
				if s.Open != 3 || s.Parked != 1 || s.Waiting != 2 || s.Total != 4 || s.EarliestRetryAt == nil || !s.EarliestRetryAt.Equal(retry1) {
					t.Errorf("%s: sessions %+v; want 3 open, 1 parked, 2 waiting, retry at %v", a.Name, s, retry1)
				}
				if a.Tokens.Input != 1015 || a.Tokens.Output != 235 {
					t.Errorf("%s: tokens %+v; want 1015 in, 235 out", a.Name, a.Tokens)
				}
				// Only the parked one needs a person: the others wait
				// for the model API (reconnect).
				want := "supervise resume --state-dir " + a.StateDir + " p"
				if a.NeedsPersonTotal != 1 || len(a.NeedsPerson) != 1 || a.NeedsPerson[0].Command != want ||
					a.NeedsPerson[0].State != "parked" || a.NeedsPerson[0].Reason != "crash breaker" {
					t.Errorf("%s: needs_person %d %+v; want the parked p, resumed with %q", a.Name, a.NeedsPersonTotal, a.NeedsPerson, want)
				}
			} else if a.NeedsPersonTotal != 0 || a.NeedsPerson == nil || len(a.NeedsPerson) != 0 {
				t.Errorf("%s: needs_person %d %v; want [] and 0", a.Name, a.NeedsPersonTotal, a.NeedsPerson)
			} else if s.Open != 0 || s.Total != 0 {
				t.Errorf("%s: sessions %+v; want none", a.Name, s)
			}
		}
	}

	code, out, errs = call(t, "ls", "--root", root)
	if code != 0 {
		t.Fatalf("ls: exit %d, stderr %s", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > 100 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	for _, want := range []string{"agent-000        stopped   4242", "agent-007", "held             locked", "broken           damaged",
		"held: locked: ", "broken: damaged: ", "signal 9 10m", "in 29m", " PARKED 1 ",
		"\nneeds a person: 14 sessions in 14 agents\n",
		"\n  agent-000 p: parked (crash breaker)\n    supervise resume --state-dir " + filepath.Join(root, "agent-000") + " p\n",
		"\n  agent-021 p: parked (crash breaker)\n    supervise resume --state-dir " + filepath.Join(root, "agent-021") + " p\n",
		"\n  and 10 more in 10 agents, the first:\n    supervise status --state-dir " + filepath.Join(root, "agent-028") + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "empty") {
		t.Errorf("a directory without a journal is listed:\n%s", out)
	}
	// Bounded: four commands, whatever the number of parked sessions.
	if n := strings.Count(out, "supervise resume "); n != 4 {
		t.Errorf("%d resume commands under the table, want 4:\n%s", n, out)
	}

	// status with no --name and several state dirs lists them too.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	sroot := filepath.Join(os.Getenv("XDG_STATE_HOME"), "supervise")
	makeStateDir(t, sroot, "one", true)
	makeStateDir(t, sroot, "two", false)
	code, out, errs = call(t, "status")
	if code != 0 || !strings.Contains(out, "one              stopped") || !strings.Contains(out, "two              died") ||
		!strings.Contains(errs, "2 supervised agents under "+sroot) {
		t.Errorf("status with two state dirs: exit %d\n%s\nstderr: %s", code, out, errs)
	}
	code, out, _ = call(t, "status", "--json")
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Agents) != 2 {
		t.Errorf("status --json with two state dirs: exit %d, %v\n%s", code, err, out)
	}
	// Naming one still shows that one.
	if code, out, _ := call(t, "status", "--name", "two"); code != 0 || !strings.Contains(out, "not-running") {
		t.Errorf("status --name two: exit %d\n%s", code, out)
	}
}

func TestLsEmptyAndUsage(t *testing.T) {
	root := filepath.Join(t.TempDir(), "none")
	if code, out, _ := call(t, "ls", "--root", root); code != 0 || !strings.Contains(out, "no supervised agents here") {
		t.Errorf("ls of a missing root: exit %d\n%s", code, out)
	}
	if code, out, _ := call(t, "ls", "--json", "--root", root); code != 0 || !strings.Contains(out, `"agents": []`) {
		t.Errorf("ls --json of a missing root: exit %d\n%s", code, out)
	}
	if code, _, errs := call(t, "ls", "--root", ""); code != 2 || !strings.Contains(errs, "--root is empty") {
		t.Errorf("ls --root '': exit %d, %s", code, errs)
	}
	if code, _, errs := call(t, "ls", "--jsn"); code != 2 || !strings.Contains(errs, "did you mean --json?") {
		t.Errorf("ls --jsn: exit %d, %s", code, errs)
	}
}

// A control socket that takes the connection and never answers (a wedged
// supervise, or something else at that name) costs ls lsLiveTimeout, not
// forever, and is shown as such.
func TestLsNoAnswer(t *testing.T) {
	root := t.TempDir()
	dir := makeStateDir(t, root, "wedged", false)
	l, err := net.Listen("unix", statedir.ControlPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Accepted, read, never answered.
	go func() {
		var held []net.Conn // referenced, so not closed by a finalizer
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	makeStateDir(t, root, "fine", true)
	code, out, errs := call(t, "ls", "--json", "--root", root)
	var list lsJSON
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Agents) != 2 {
		t.Fatalf("ls: exit %d, %v, stderr %s\n%s", code, err, errs, out)
	}
	if a := list.Agents[1]; a.Name != "wedged" || a.State != "no-answer" {
		t.Errorf("wedged: %+v; want no-answer", a)
	}
	if a := list.Agents[0]; a.Name != "fine" || a.State != "stopped" {
		t.Errorf("fine: %+v; want stopped", a)
	}
}

// A mistyped command or flag gets the nearest one, in every subcommand.
func TestSuggestions(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stauts"}, `unknown command "stauts" (did you mean status? `},
		{[]string{"lss"}, "did you mean ls?"},
		{[]string{"--restrat", "never", "--", "true"}, "did you mean --restart?"},
		{[]string{"status", "--sesion", "x"}, "did you mean --session?"},
		{[]string{"resume", "A", "--nmae", "x"}, "did you mean --name?"},
		{[]string{"ls", "--rot", "x"}, "did you mean --root?"},
		{[]string{"notify", "turn-begin", "--sesion", "s"}, "did you mean --session?"},
		{[]string{"unit", "systemd", "--stop-timout", "1s", "--", "x"}, "did you mean --stop-timeout?"},
		{[]string{"chaos", "--kils", "1", "--", "x"}, "did you mean --kills?"},
	} {
		code, _, errs := call(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if _, _, errs := call(t, "frobnicate"); strings.Contains(errs, "did you mean") {
		t.Errorf("frobnicate got a suggestion: %s", errs)
	}
}

// By default ls lists the user's state root and the unit-installed agents
// under the system root (/var/lib/supervise) beside it, and says when the
// system root is not there. A session waiting for a person stands out and
// names the command that shows it.
func TestLsSystemRootAndWaits(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	user := filepath.Join(xdg, "supervise")
	sys := filepath.Join(t.TempDir(), "var-lib-supervise")
	old := statecmd.SystemRoot
	statecmd.SystemRoot = sys
	t.Cleanup(func() { statecmd.SystemRoot = old })
	now := time.Now()
	makeStateDir(t, user, "mine", true,
		record.Session{ID: "w", State: record.Waiting, Wait: "input", Updated: now},
		record.Session{ID: "s", State: record.Stopped, Updated: now})

	code, out, errs := call(t, "ls")
	if code != 0 || !strings.Contains(out, "also looked in "+sys+" (unit-installed agents): does not exist\n") {
		t.Errorf("ls with no system root: exit %d, stderr %s\n%s", code, errs, out)
	}
	makeStateDir(t, sys, "unit-agent", false, record.Session{ID: "p1", State: record.Parked, Reason: "resume limit", Updated: now})
	code, out, errs = call(t, "ls")
	if code != 0 {
		t.Fatalf("ls: exit %d, stderr %s", code, errs)
	}
	for _, want := range []string{"state root: " + user + "\n", "and unit-installed agents: " + sys + "\n",
		"\nmine             stopped", " STOPPED 1 ", "\nunit-agent       died", " PARKED 1 ",
		"needs a person: 3 sessions in 2 agents\n",
		"  mine s: stopped\n    supervise resume --state-dir " + filepath.Join(user, "mine") + " s\n",
		"  mine w: waiting for input: answer it in the agent\n    supervise status --state-dir " + filepath.Join(user, "mine") + " --session w\n",
		"  unit-agent p1: parked (resume limit)\n    supervise resume --state-dir " + filepath.Join(sys, "unit-agent") + " p1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls lacks %q:\n%s", want, out)
		}
	}
	var list lsJSON
	code, out, _ = call(t, "ls", "--json")
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list.Agents) != 2 || len(list.Roots) != 2 {
		t.Fatalf("ls --json: exit %d, %v\n%s", code, err, out)
	}
	if r := list.Roots; list.Root != user || r[0].Path != user || r[0].Agents != 1 || r[1].Path != sys || r[1].Agents != 1 || r[1].Error != "" {
		t.Errorf("roots %+v", r)
	}
	if a := list.Agents[0]; a.NeedsPersonTotal != 2 || a.NeedsPerson[0].Session != "s" || a.NeedsPerson[1].Wait != "input" {
		t.Errorf("mine: %+v", a.NeedsPerson)
	}
	// --root lists that directory only.
	code, out, _ = call(t, "ls", "--root", user)
	if code != 0 || strings.Contains(out, "unit-agent") || strings.Contains(out, sys) {
		t.Errorf("ls --root: exit %d\n%s", code, out)
	}
}

// More sessions of one agent need a person than ls prints: it prints
// lsActLines of them and says how many more and where, and the JSON
// keeps ten of them and counts all.
func TestLsManyParkedSessions(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	statecmd.SystemRoot = filepath.Join(xdg, "none")
	t.Cleanup(func() { statecmd.SystemRoot = "/var/lib/supervise" })
	var ss []record.Session
	for i := range 500 {
		ss = append(ss, record.Session{ID: fmt.Sprintf("s%03d", i), State: record.Parked, Updated: time.Now()})
	}
	makeStateDir(t, filepath.Join(xdg, "supervise"), "busy", true, ss...)
	code, out, _ := call(t, "ls")
	if code != 0 || strings.Count(out, "supervise resume") != 4 || !strings.Contains(out, " PARKED 500 ") ||
		!strings.Contains(out, "  and 496 more in 1 agent, the first:\n    supervise status --name busy\n") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	var list lsJSON
	_, out, _ = call(t, "ls", "--json")
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Agents) != 1 || list.Agents[0].NeedsPersonTotal != 500 ||
		len(list.Agents[0].NeedsPerson) != 10 || list.Agents[0].NeedsPerson[0].Session != "s000" {
		t.Errorf("ls --json: %v\n%s", err, out)
	}
}
