package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// WriteFile and WriteHint (the same without the sync) replace a link
// planted at the name or at its temporary name, and never write through
// either.
func TestWriteFileNeverFollowsLinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("victim\n"), 0o644)
	write := map[string]func(dir, name string, data []byte) error{
		"journal.db.verify-failed": WriteFile, "resume.json": WriteFile, "journal.db.owner": WriteHint}
	for name, write := range write {
		os.Symlink(victim, filepath.Join(dir, name))
		os.Symlink(victim, filepath.Join(dir, "."+name+".tmp"))
		if err := write(dir, name, []byte("new\n")); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want a regular 0600 file", name, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != "new\n" {
			t.Errorf("%s holds %q, want %q", name, b, "new\n")
		}
		if _, err := os.Lstat(filepath.Join(dir, "."+name+".tmp")); err == nil {
			t.Errorf("%s: temporary file left behind", name)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("victim now holds %q", b)
	}
}

// Private refuses a link (never chmods through it) and tightens a real
// directory of ours to 0700.
func TestPrivate(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.Mkdir(target, 0o755)
	os.Chmod(target, 0o755)
	link := filepath.Join(dir, "notify")
	os.Symlink(target, link)
	if err := Private(link); !errors.Is(err, ErrUnsafe) {
		t.Errorf("Private(link) = %v, want ErrUnsafe", err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
		t.Errorf("the link's target was chmod'ed to %v", fi.Mode().Perm())
	}
	if err := Private(target); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode().Perm())
	}
	fresh := filepath.Join(dir, "fresh")
	if err := Private(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("new dir mode %v, want 0700", fi.Mode().Perm())
	}
}

// Prepare refuses a dir writable by others or owned by another user (as
// root), and one under a directory another user owns; it tightens 0755.
func TestPrepare(t *testing.T) {
	base := t.TempDir()
	loose := filepath.Join(base, "loose")
	os.Mkdir(loose, 0o777)
	os.Chmod(loose, 0o777)
	if _, _, err := Prepare(loose); !errors.Is(err, ErrUnsafe) {
		t.Errorf("0777: %v, want ErrUnsafe", err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	real, tightened, err := Prepare(open)
	if err != nil || !tightened || real != open {
		t.Errorf("0755: %q %v %v, want tightened", real, tightened, err)
	}
	// A link to our own dir resolves to the real path.
	os.Symlink(open, filepath.Join(base, "link"))
	if real, _, err := Prepare(filepath.Join(base, "link")); err != nil || real != open {
		t.Errorf("link: %q %v, want %q", real, err, open)
	}
	if os.Geteuid() != 0 {
		t.Skip("the rest needs root: chown to uid 65534")
	}
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o700)
	os.Chown(theirs, 65534, 65534)
	if _, _, err := Prepare(theirs); !errors.Is(err, ErrUnsafe) {
		t.Errorf("owned by 65534: %v, want ErrUnsafe", err)
	}
	if _, _, err := Prepare(filepath.Join(theirs, "state")); !errors.Is(err, ErrUnsafe) {
		t.Errorf("under a dir owned by 65534: %v, want ErrUnsafe", err)
	}
}

// A directory above the state dir that is group-writable for the caller's
// own group (a Kubernetes volume with fsGroup) is accepted; writable by
// others, it is refused.
func TestPrepareAncestorGroup(t *testing.T) {
	base := t.TempDir()
	vol := filepath.Join(base, "vol")
	os.Mkdir(vol, 0o775)
	os.Chmod(vol, 0o2775)
	os.Chown(vol, os.Geteuid(), os.Getegid())
	if _, _, err := Prepare(filepath.Join(vol, "agent")); err != nil {
		t.Errorf("under a dir writable by our own group: %v", err)
	}
	os.Chmod(vol, 0o777)
	if _, _, err := Prepare(filepath.Join(vol, "agent")); !errors.Is(err, ErrUnsafe) {
		t.Errorf("under a dir writable by others: %v, want ErrUnsafe", err)
	}
}

// The state dir's names are the ones every supervise so far has used: a
// state dir written by an older supervise is found by a newer one.
func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{JournalPath("/s"), "/s/journal.db"},
		{VerifyFailedPath("/s"), "/s/journal.db.verify-failed"},
		{ControlPath("/s"), "/s/control.sock"},
		{NotifyDir("/s"), "/s/notify"},
		{ResumePath("/s"), "/s/resume.json"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}

// A state dir Prepare created and supervise never used is removed with
// the directories Prepare made above it, and nothing else: not a
// directory that existed before, not one that holds anything more.
func TestRemoveUnused(t *testing.T) {
	base := t.TempDir()
	path := filepath.Join(base, "supervise", "agent")
	levels := Missing(path)
	if levels != 2 {
		t.Fatalf("Missing = %d, want 2", levels)
	}
	real, _, err := Prepare(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Private(NotifyDir(real)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(JournalPath(real), []byte("j"), 0o600)
	if err := RemoveUnused(real, levels); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(base, "supervise")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("supervise/ left behind: %v", err)
	}
	if _, err := os.Lstat(base); err != nil {
		t.Errorf("the existing directory above was removed: %v", err)
	}
	if Missing(base) != 0 {
		t.Error("Missing of an existing directory is not 0")
	}

	// Something else in it: left, and so is everything above it.
	real, _, _ = Prepare(path)
	os.WriteFile(filepath.Join(real, "notes.txt"), []byte("mine"), 0o600)
	if err := RemoveUnused(real, 2); err == nil {
		t.Error("RemoveUnused removed a directory holding a file of someone else's")
	}
	if b, err := os.ReadFile(filepath.Join(real, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("notes.txt: %q, %v", b, err)
	}
}
