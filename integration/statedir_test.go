package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// victim is a file or directory outside the state dir that a planted link
// points at; the test checks supervise never wrote to it or chmod'ed it.
type victim struct {
	path string
	mode os.FileMode
	data string
}

func newVictim(t *testing.T, dir, name string, isDir bool) victim {
	t.Helper()
	v := victim{path: filepath.Join(dir, name), mode: 0o644, data: "do not touch\n"}
	if isDir {
		v.mode, v.data = 0o755, ""
		if err := os.Mkdir(v.path, v.mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(v.path, v.mode)
		return v
	}
	if err := os.WriteFile(v.path, []byte(v.data), v.mode); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v victim) check(t *testing.T, via string) {
	t.Helper()
	fi, err := os.Stat(v.path)
	if err != nil {
		t.Fatalf("%s: victim %s: %v", via, v.path, err)
	}
	if fi.Mode().Perm() != v.mode {
		t.Errorf("%s: victim %s mode %v, want %v (chmod'ed through a link)", via, v.path, fi.Mode().Perm(), v.mode)
	}
	if !fi.IsDir() {
		if b, _ := os.ReadFile(v.path); string(b) != v.data {
			t.Errorf("%s: victim %s now holds %q (written through a link)", via, v.path, b)
		}
	}
}

// TestStateDirSafety is issue 12 finding 1, as root (the attack is on a
// root supervise): a state dir owned by another user or writable by
// others is refused with an error naming the path and the fix; one we own
// at 0755 is tightened to 0700; links planted at the names supervise
// writes are never written through or chmod'ed through.
func TestStateDirSafety(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the state dir is given to another uid (65534)")
	}
	t.Run("another user's 0777 dir", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=exit 0")
		os.Mkdir(e.stateDir, 0o777)
		os.Chmod(e.stateDir, 0o777)
		os.Chown(e.stateDir, 65534, 65534)
		v := newVictim(t, e.dir, "victim", false)
		os.Symlink(v.path, filepath.Join(e.stateDir, "journal.db.owner.tmp"))
		os.Symlink(v.path, filepath.Join(e.stateDir, ".journal.db.owner.tmp"))
		p := e.run("--restart", "never")
		if code := p.wait(20 * time.Second); code != 1 {
			t.Errorf("exit %d, want 1 (refused)", code)
		}
		for _, want := range []string{e.stateDir, "owned by uid 65534", "chown"} {
			if !strings.Contains(p.stderr(), want) {
				t.Errorf("the error does not say %q:\n%s", want, p.stderr())
			}
		}
		v.check(t, "journal.db.owner.tmp")
		if _, err := os.Stat(filepath.Join(e.stateDir, "journal.db")); err == nil {
			t.Error("a journal was created in the refused dir")
		}
	})
	t.Run("our own 0777 dir", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=exit 0")
		os.Mkdir(e.stateDir, 0o777)
		os.Chmod(e.stateDir, 0o777)
		p := e.run("--restart", "never")
		if code := p.wait(20 * time.Second); code != 1 {
			t.Errorf("exit %d, want 1 (refused)", code)
		}
		for _, want := range []string{e.stateDir, "writable by group or others", "chmod 700 " + e.stateDir} {
			if !strings.Contains(p.stderr(), want) {
				t.Errorf("the error does not say %q:\n%s", want, p.stderr())
			}
		}
	})
	t.Run("our own 0755 dir is tightened", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=exit 0")
		os.Mkdir(e.stateDir, 0o755)
		os.Chmod(e.stateDir, 0o755)
		if code := e.run("--restart", "never").wait(20 * time.Second); code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		fi, _ := os.Stat(e.stateDir)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("state dir mode %v after a run, want 0700", fi.Mode().Perm())
		}
	})
	t.Run("planted links", func(t *testing.T) {
		e := newEnv(t)
		// Dies mid-turn twice: run 2 gets a resume file, then --give-up.
		e.set("TESTAGENT_SCRIPT=turn-begin s1 t1; barrier; exit 1")
		os.Mkdir(e.stateDir, 0o700)
		var victims []victim
		for _, name := range []string{"journal.db.owner.tmp", ".journal.db.owner.tmp", "resume.json", ".resume.json.tmp"} {
			v := newVictim(t, e.dir, "victim-"+name, false)
			os.Symlink(v.path, filepath.Join(e.stateDir, name))
			victims = append(victims, v)
		}
		p := e.run("--give-up", "2", "--backoff-initial", "10ms")
		if code := p.wait(30 * time.Second); code != 4 {
			t.Errorf("exit %d, want 4 (gave up after two deaths)", code)
		}
		if e.count("start") != 2 || !strings.Contains(p.stderr(), "delivering resumes") {
			t.Errorf("run 2 was not handed a resume file:\n%s", p.stderr())
		}
		for i, name := range []string{"journal.db.owner.tmp", ".journal.db.owner.tmp", "resume.json", ".resume.json.tmp"} {
			victims[i].check(t, name)
		}
	})
	t.Run("notify dir is a link", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=exit 0")
		os.Mkdir(e.stateDir, 0o700)
		v := newVictim(t, e.dir, "victim-dir", true)
		os.Symlink(v.path, filepath.Join(e.stateDir, "notify"))
		p := e.run("--restart", "never")
		if code := p.wait(20 * time.Second); code != 1 {
			t.Errorf("exit %d, want 1 (refused)", code)
		}
		if !strings.Contains(p.stderr(), "symbolic link") {
			t.Errorf("the error does not name the link:\n%s", p.stderr())
		}
		v.check(t, "notify")
		if _, err := os.Stat(filepath.Join(v.path, "notify.sock")); err == nil {
			t.Error("the notify socket was bound through the link")
		}
	})
	t.Run("control socket is a link", func(t *testing.T) {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=exit 0")
		os.Mkdir(e.stateDir, 0o700)
		v := newVictim(t, e.dir, "victim-control", false)
		os.Symlink(v.path, filepath.Join(e.stateDir, "control.sock"))
		p := e.run("--restart", "never")
		if code := p.wait(20 * time.Second); code != 1 {
			t.Errorf("exit %d, want 1 (refused)", code)
		}
		if !strings.Contains(p.stderr(), "not a socket") {
			t.Errorf("the error does not say what is wrong:\n%s", p.stderr())
		}
		v.check(t, "control.sock")
	})
}
