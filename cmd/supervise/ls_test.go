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
	} `json:"agents"`
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
		"held: locked: ", "broken: damaged: ", "signal 9 10m", "in 29m"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "empty") {
		t.Errorf("a directory without a journal is listed:\n%s", out)
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
