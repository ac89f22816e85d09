package journal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/record"
)

// Fault matrix case 65 (keep.go): a journal replaced or removed under an
// open one is kept, and the next start recovers every commit from it.

// startState is OpenState as supervise's start calls it, with its log.
func startState(t *testing.T, dir string) (*DB, string) {
	t.Helper()
	var logb bytes.Buffer
	db, _, err := OpenState(dir, failpoint.Points{}, slog.New(slog.NewTextHandler(&logb, nil)))
	if err != nil {
		t.Fatalf("OpenState: %v\n%s", err, logb.String())
	}
	return db, logb.String()
}

// commitMarkers commits n sessions named prefix0..prefixN-1, half through
// Update and half through UpdateLogged (a death's commit), as supervise
// does, and returns their ids: each was acknowledged.
func commitMarkers(t *testing.T, db *DB, prefix string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		s := record.Session{ID: id, State: record.Idle, Turn: "t", Phase: "ended"}
		commit := db.Update
		if i%2 == 1 {
			commit = db.UpdateLogged
		}
		if err := commit(func(tx *Tx) error { return tx.PutSession(s) }); err != nil {
			t.Fatalf("commit %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// mustHold fails unless db holds every session in ids, turn ended.
func mustHold(t *testing.T, db *DB, ids []string) {
	t.Helper()
	missing := 0
	db.View(func(tx *Tx) error {
		for _, id := range ids {
			s, ok, _ := tx.Session(id)
			if !ok || s.Phase != "ended" {
				missing++
			}
		}
		return nil
	})
	if missing > 0 {
		t.Errorf("%d of %d acknowledged markers are missing after the next start", missing, len(ids))
	}
}

// renameOver puts b at path the way cp and mv (or rsync) do.
func renameOver(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".journal.db.copy")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// names lists the state dir's files whose name has the prefix.
func names(t *testing.T, dir, prefix string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestKeptTornCopy: the journal copied while supervise commits (its first
// pages before the last commits, the rest after: torn), or cut short, or
// whole but older, is renamed over journal.db; the check catches the swap
// and keeps the open file; the next start recovers every acknowledged
// marker and moves the copy aside, never deleting it.
func TestKeptTornCopy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		aside string // the prefix the copy is renamed aside with
		copy  func(t *testing.T, db *DB, path string) []string
	}{
		{"torn", "journal.db.", func(t *testing.T, db *DB, path string) []string {
			head, _ := os.ReadFile(path)
			head = head[:16<<10]
			ids := commitMarkers(t, db, "late", 300)
			all, _ := os.ReadFile(path)
			return append(ids, string(append(head, all[len(head):]...)))
		}},
		{"truncated", "journal.db.corrupt-", func(t *testing.T, db *DB, path string) []string {
			b, _ := os.ReadFile(path)
			return []string{string(b[:len(b)/2])}
		}},
		{"older", "journal.db.superseded-", func(t *testing.T, db *DB, path string) []string {
			b, _ := os.ReadFile(path)
			ids := commitMarkers(t, db, "late", 50)
			return append(ids, string(b))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "journal.db")
			db, _ := startState(t, dir)
			ids := commitMarkers(t, db, "s", 400)
			got := tc.copy(t, db, path)
			ids = append(ids, got[:len(got)-1]...)
			renameOver(t, path, []byte(got[len(got)-1]))

			err := db.CheckName()
			if !errors.Is(err, ErrReplaced) || !errors.Is(err, ErrFault) {
				t.Fatalf("CheckName after the swap: %v, want a fault wrapping ErrReplaced", err)
			}
			if !strings.Contains(err.Error(), "kept as") {
				t.Errorf("the fault does not say where the open journal was kept: %v", err)
			}
			db2, log := startState(t, dir)
			defer db2.Close()
			mustHold(t, db2, ids)
			if !strings.Contains(log, "recovered the journal kept") {
				t.Errorf("the next start does not say it recovered the kept journal:\n%s", log)
			}
			if n := names(t, dir, "journal.db.kept-"); len(n) != 0 {
				t.Errorf("kept files left after the recovery: %v", n)
			}
			if n := names(t, dir, tc.aside); len(n) == 0 {
				t.Errorf("the copy that was renamed over the journal is not kept aside as %s*: %v", tc.aside, names(t, dir, ""))
			}
		})
	}
}

// TestKeptCommitSeesSwap: the swap seen by a commit (not CheckName), plain
// and logged: the commit is not acknowledged, every earlier one is kept.
func TestKeptCommitSeesSwap(t *testing.T) {
	for _, logged := range []bool{false, true} {
		t.Run(fmt.Sprint("logged=", logged), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "journal.db")
			db, _ := startState(t, dir)
			ids := commitMarkers(t, db, "s", 100)
			b, _ := os.ReadFile(path)
			renameOver(t, path, b[:len(b)/3])
			commit := db.Update
			if logged {
				commit = db.UpdateLogged
			}
			err := commit(func(tx *Tx) error { return tx.PutSession(record.Session{ID: "after", State: record.Idle}) })
			if !errors.Is(err, ErrReplaced) {
				t.Fatalf("commit after the swap: %v, want ErrReplaced", err)
			}
			db2, _ := startState(t, dir)
			defer db2.Close()
			mustHold(t, db2, ids)
		})
	}
}

// TestKeptRemoved: journal.db removed under the open journal, seen only
// by Close (supervise's exit after it found the name gone): kept, and
// recovered by the next start.
func TestKeptRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, _ := startState(t, dir)
	ids := commitMarkers(t, db, "s", 200)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if n := names(t, dir, "journal.db.kept-"); len(n) != 1 {
		t.Fatalf("kept files after Close of a removed journal: %v, want one", n)
	}
	db2, log := startState(t, dir)
	defer db2.Close()
	mustHold(t, db2, ids)
	if !strings.Contains(log, "the name held nothing") {
		t.Errorf("the next start does not say why it took the kept journal:\n%s", log)
	}
}

// TestKeptByLink: the journal renamed away (it still has a name): kept as
// a link to the open file, not a copy; while the supervise that kept it
// still holds it, the next start refuses (ErrLocked) and changes nothing.
func TestKeptByLink(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, _ := startState(t, dir)
	ids := commitMarkers(t, db, "s", 50)
	b, _ := os.ReadFile(path)
	if err := os.Rename(path, filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	renameOver(t, path, b[:len(b)/2])
	if err := db.CheckName(); !errors.Is(err, ErrReplaced) {
		t.Fatalf("CheckName: %v", err)
	}
	kept := names(t, dir, "journal.db.kept-")
	if len(kept) != 1 {
		t.Fatalf("kept: %v", kept)
	}
	a, _ := os.Stat(filepath.Join(dir, "moved"))
	k, _ := os.Stat(filepath.Join(dir, kept[0]))
	if !os.SameFile(a, k) {
		t.Errorf("the journal, which still had a name, was copied instead of linked")
	}
	if _, _, err := OpenState(dir, failpoint.Points{}, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrLocked) {
		t.Errorf("OpenState while the kept journal is still held: %v, want ErrLocked", err)
	}
	if n := names(t, dir, "journal.db.kept-"); len(n) != 1 {
		t.Errorf("a refused start changed the kept files: %v", n)
	}
	releaseFaulted(db)
	db2, _ := startState(t, dir)
	defer db2.Close()
	mustHold(t, db2, ids)
}

// TestKeptOlderLoses: an intact journal at the name that is newer (by its
// last committed transaction) than a kept one wins; the kept one is
// renamed aside, not deleted.
func TestKeptOlderLoses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, _ := startState(t, dir)
	commitMarkers(t, db, "s", 20)
	b, _ := os.ReadFile(path)
	renameOver(t, path, b)
	if err := db.CheckName(); !errors.Is(err, ErrReplaced) {
		t.Fatalf("CheckName: %v", err)
	}
	// The copy at the name lives on (another supervise, an older release
	// that knew nothing of kept files) and commits past the kept one.
	other, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := commitMarkers(t, other, "n", 30)
	other.Close()
	db2, log := startState(t, dir)
	defer db2.Close()
	mustHold(t, db2, ids)
	if n := names(t, dir, "journal.db.superseded-"); len(n) != 1 {
		t.Errorf("the older kept journal is not renamed aside: %v", names(t, dir, ""))
	}
	if !strings.Contains(log, "older than the intact journal at the name") {
		t.Errorf("the start does not say why it kept the journal at the name:\n%s", log)
	}
}

// TestKeptSymlinkNotFollowed: a link planted under a kept journal's name,
// to a journal with other sessions, is not followed nor adopted.
func TestKeptSymlinkNotFollowed(t *testing.T) {
	dir := t.TempDir()
	bait := filepath.Join(t.TempDir(), "bait.db")
	b, err := Open(bait, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commitMarkers(t, b, "bait", 3)
	b.Close()
	planted := filepath.Join(dir, "journal.db.kept-20260101T000000.000000000Z")
	if err := os.Symlink(bait, planted); err != nil {
		t.Fatal(err)
	}
	db, log := startState(t, dir)
	defer db.Close()
	db.View(func(tx *Tx) error {
		if _, ok, _ := tx.Session("bait0"); ok {
			t.Error("the journal behind a planted link was adopted")
		}
		return nil
	})
	if fi, err := os.Lstat(planted); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was not left alone: %v", err)
	}
	if !strings.Contains(log, "not a regular file") {
		t.Errorf("the start does not say it left the planted link alone:\n%s", log)
	}
}

// releaseFaulted lets go of a journal poisoned by its name's check (which
// leaves no bbolt lock held), as the exit of its supervise would.
func releaseFaulted(db *DB) {
	db.b.Close()
	db.dir.Close()
}

// TestKeptWhileCommitting: commits (plain and logged) go on on one
// goroutine while the journal is swapped and CheckName runs on another, as
// supervise's loop and its once-a-second check: whichever sees the swap
// first keeps the file, and every commit acknowledged is in it.
func TestKeptWhileCommitting(t *testing.T) {
	for round := range 5 {
		dir := t.TempDir()
		path := filepath.Join(dir, "journal.db")
		db, _ := startState(t, dir)
		acked := make(chan []string)
		started := make(chan struct{})
		go func() {
			var ids []string
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%d-%d", round, i)
				s := record.Session{ID: id, State: record.Idle, Turn: "t", Phase: "ended"}
				commit := db.Update
				if i%2 == 1 {
					commit = db.UpdateLogged
				}
				if err := commit(func(tx *Tx) error { return tx.PutSession(s) }); err != nil {
					break
				}
				ids = append(ids, id)
				if i == 20 {
					close(started)
				}
			}
			acked <- ids
		}()
		<-started
		b, _ := os.ReadFile(path)
		renameOver(t, path, b[:len(b)/2])
		for db.CheckName() == nil {
		}
		ids := <-acked
		db2, _ := startState(t, dir)
		mustHold(t, db2, ids)
		db2.Close()
	}
}
