package journal

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/supervise-dev/supervise/record"
)

// copyFile is cp src dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustFaultReplaced checks that err is the journal's fault, naming the
// replacement, and that Faulted is closed.
func mustFaultReplaced(t *testing.T, db *DB, err error) {
	t.Helper()
	if !errors.Is(err, ErrFault) || !errors.Is(err, ErrReplaced) {
		t.Fatalf("commit after the swap returned %v, want ErrFault wrapping ErrReplaced", err)
	}
	select {
	case <-db.Faulted():
	default:
		t.Fatal("Faulted is not closed after the swap")
	}
	if err := db.Update(func(*Tx) error { return nil }); !errors.Is(err, ErrFault) {
		t.Fatalf("a later commit returned %v, want ErrFault", err)
	}
}

func put(db *DB, id string) error {
	return db.Update(func(tx *Tx) error { return tx.PutSession(record.Session{ID: id, State: record.Idle}) })
}

// TestCommitAfterSwapFaults is fault matrix case R2 (swap): cp journal.db x
// && mv x journal.db while the journal is open. The commit that lands in
// the old file is not acknowledged (Update returns the fault), and the
// file at the name is left as it was.
func TestCommitAfterSwapFaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := put(db, "before"); err != nil {
		t.Fatal(err)
	}
	copyFile(t, path, filepath.Join(dir, "x"))
	if err := os.Rename(filepath.Join(dir, "x"), path); err != nil {
		t.Fatal(err)
	}
	mustFaultReplaced(t, db, put(db, "after"))

	// The next start reads what is at the name: the copy, with "before".
	db2, err := Open(path, Options{ReadOnly: true, Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	db2.View(func(tx *Tx) error {
		if _, ok, _ := tx.Session("before"); !ok {
			t.Error("the copy lost the session committed before the swap")
		}
		return nil
	})
}

// TestCommitAfterStateDirSymlinkFaults is fault matrix case R2 (symlinked
// state dir): the state dir is moved away and a symbolic link to a stale
// copy of it put at its name.
func TestCommitAfterStateDirSymlinkFaults(t *testing.T) {
	top := t.TempDir()
	sd := filepath.Join(top, "state")
	if err := os.Mkdir(sd, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sd, "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := put(db, "before"); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(top, "stale")
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	copyFile(t, path, filepath.Join(stale, "journal.db"))
	if err := os.Rename(sd, filepath.Join(top, "state.old")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stale, sd); err != nil {
		t.Fatal(err)
	}
	mustFaultReplaced(t, db, put(db, "after"))
}

// TestCommitAfterRemoveFaults: a journal unlinked while open is not the
// journal any more either.
func TestCommitAfterRemoveFaults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	mustFaultReplaced(t, db, put(db, "after"))
}

// TestCheckNameSeesSwapWithoutCommit: CheckName finds the swap when
// nothing is committed, and is silent while the name holds the file
// (a rename within the same name's directory of another file does not
// count; a hard link beside it does not either).
func TestCheckNameSeesSwapWithoutCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := os.Link(path, filepath.Join(dir, "backup.db")); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckName(); err != nil {
		t.Fatalf("CheckName with the journal in place: %v", err)
	}
	if err := put(db, "a"); err != nil {
		t.Fatalf("commit with a hard link beside the journal: %v", err)
	}
	copyFile(t, path, filepath.Join(dir, "x"))
	if err := os.Rename(filepath.Join(dir, "x"), path); err != nil {
		t.Fatal(err)
	}
	mustFaultReplaced(t, db, db.CheckName())
}

// TestReadOnlyIsNotChecked: a read-only journal (status, offline) never
// faults for its name: it commits nothing.
func TestReadOnlyIsNotChecked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	os.Remove(path)
	if err := ro.CheckName(); err != nil {
		t.Fatalf("CheckName on a read-only journal: %v", err)
	}
}

// BenchmarkNameCheck is what the name check adds to every commit: one
// lstat and the comparison.
func BenchmarkNameCheck(b *testing.B) {
	db := benchOpen(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := db.CheckName(); err != nil {
			b.Fatal(err)
		}
	}
}
