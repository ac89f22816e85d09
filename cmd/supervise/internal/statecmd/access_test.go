package statecmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/journal"
)

// Fault matrix case 66 (issue 46, B7): ls and status run by a user who may
// not read a state dir (or the state root) say whose it is and that it
// cannot be read, and exit exitNoAccess; before, ls said "no supervised
// agents here" and exited 0.

// TestHelperAsOther is not a test: TestLsStatusNoAccess runs this test
// binary as another uid with STATECMD_HELPER set to the command's words
// (tab-separated), and the helper runs Ls or Status and exits with its
// status.
func TestHelperAsOther(t *testing.T) {
	words := os.Getenv("STATECMD_HELPER")
	if words == "" {
		t.Skip("a helper, run by TestLsStatusNoAccess as another uid")
	}
	args := strings.Split(words, "\t")
	var out, errb bytes.Buffer
	run := Status
	if args[0] == "ls" {
		run = Ls
	}
	code := run(context.Background(), args[1:], &out, &errb)
	os.Stdout.Write(out.Bytes())
	os.Stderr.Write(errb.Bytes())
	os.Exit(code)
}

func TestLsStatusNoAccess(t *testing.T) {
	if os.Getenv("SUPERVISE_LONG") == "" {
		t.Skip("root-only: runs ls and status as uid 65534 (setpriv); set SUPERVISE_LONG=1")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run ls and status as another uid (setpriv)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	// base/supervise is the state root ($XDG_STATE_HOME/supervise) of
	// uid 65534 too; st1 in it is root's state dir, private as supervise
	// makes it.
	base, err := os.MkdirTemp("", "statecmd-access")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	root := filepath.Join(base, "supervise")
	dir := filepath.Join(root, "st1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(filepath.Join(dir, "journal.db"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "statecmd.test")
	data, err := os.ReadFile(self)
	if err != nil || os.WriteFile(bin, data, 0o755) != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	asOther := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^TestHelperAsOther$")
		cmd.Env = append(os.Environ(), "STATECMD_HELPER="+strings.Join(args, "\t"), "XDG_STATE_HOME="+base,
			"HOME="+base, "SUPERVISE_STATE_DIR=")
		cmd.Dir = base
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	check := func(what string, code int, out string, want ...string) {
		t.Helper()
		if code != exitNoAccess {
			t.Errorf("%s as uid 65534: exit %d, want %d\n%s", what, code, exitNoAccess, out)
		}
		if strings.Contains(out, "no supervised agents here") {
			t.Errorf("%s as uid 65534 says there is nothing:\n%s", what, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s as uid 65534 lacks %q:\n%s", what, w, out)
			}
		}
	}
	for _, mode := range []os.FileMode{0o755, 0o700} {
		// 0755: the root lists, the state dir is private; 0700: the
		// root itself is private.
		os.Chmod(root, mode)
		code, out := asOther("ls", "--root", root)
		check("ls "+mode.String(), code, out, "uid 0 (root)", "permission denied")
		code, out = asOther("ls")
		check("ls (the default root) "+mode.String(), code, out, "uid 0 (root)")
		code, out = asOther("ls", "--json", "--root", root)
		check("ls --json "+mode.String(), code, out, `"uid": 0`, `"user": "root"`)
		code, out = asOther("status", "--state-dir", dir)
		check("status --state-dir "+mode.String(), code, out, "uid 0 (root)", dir)
		code, out = asOther("status")
		check("status "+mode.String(), code, out, "uid 0 (root)")
		code, out = asOther("status", "--json", "--name", "st1")
		check("status --json --name "+mode.String(), code, out, "uid 0 (root)")
	}
}

// ls exits exitNoAccess for what it may not read under its own root, not
// for the no-access state dirs of unit-installed agents under the system
// root, which it lists by default beside the user's own.
func TestUnreadableOwnRootOnly(t *testing.T) {
	root := "/home/u/.local/state/supervise"
	mine := newAgent("mine", root+"/mine")
	mine.State = lsStopped
	theirs := newAgent("svc", SystemRoot+"/svc")
	theirs.State, theirs.Owner = lsNoAccess, &lsOwner{Path: SystemRoot + "/svc", UID: 0, User: "root"}
	list := lsList{Root: root, Roots: []lsRoot{{Path: root, Agents: 1}, {Path: SystemRoot, Agents: 1}},
		Agents: []lsAgent{mine, theirs}}
	if why := unreadable(list); why != "" {
		t.Errorf("a system root's private state dir makes ls fail: %s", why)
	}
	closed := newAgent("closed", root+"/closed")
	closed.State, closed.Owner = lsNoAccess, &lsOwner{Path: root + "/closed", UID: 1001}
	list.Agents = append(list.Agents, closed)
	if why := unreadable(list); !strings.Contains(why, "closed") || !strings.Contains(why, "uid 1001") {
		t.Errorf("unreadable = %q, want it to name closed and its owner", why)
	}
	b, _ := json.Marshal(closed)
	if !strings.Contains(string(b), `"owner":{"path":"`+root+`/closed","uid":1001}`) {
		t.Errorf("no-access agent JSON: %s", b)
	}
}
