package journalopen

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
)

func open(t *testing.T, dir string, fp failpoint.Points) (*journal.DB, bool, string) {
	t.Helper()
	var logb bytes.Buffer
	db, later, err := Open(dir, fp, slog.New(slog.NewTextHandler(&logb, nil)))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db, later, logb.String()
}

// A new state dir gets a fresh journal; one closed cleanly is trusted as it
// is; one left unclean is checked (inline, being small) and kept.
func TestOpenTrusts(t *testing.T) {
	dir := t.TempDir()
	db, later, log := open(t, dir, failpoint.Points{})
	if later || log != "" {
		t.Errorf("fresh journal: verifyLater %v, log %q", later, log)
	}
	if err := db.Update(func(tx *journal.Tx) error { return tx.SetClean(true) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, later, log = open(t, dir, failpoint.Points{})
	if later || log != "" {
		t.Errorf("clean journal: verifyLater %v, log %q", later, log)
	}
	db.Update(func(tx *journal.Tx) error { return tx.SetClean(false) })
	db.Close()
	db, later, log = open(t, dir, failpoint.Points{})
	if later || log != "" {
		t.Errorf("unclean small journal: verifyLater %v, log %q", later, log)
	}
	db.Close()
}

// A journal beyond the inline limit, left unclean, is checked in the
// background (the failpoint makes every journal large).
func TestOpenLargeVerifiesLater(t *testing.T) {
	large := failpoint.Points{VerifyInline: 0, HasVerifyInline: true}
	dir := t.TempDir()
	db, _, _ := open(t, dir, large)
	db.Update(func(tx *journal.Tx) error { return tx.SetClean(false) })
	db.Close()
	db, later, _ := open(t, dir, large)
	db.Close()
	if !later {
		t.Error("an unclean journal over the inline limit was not left for the background check")
	}
	// After a failed background check, the next start checks inline.
	if err := os.WriteFile(statedir.VerifyFailedPath(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, later, _ = open(t, dir, large)
	db.Close()
	if later {
		t.Error("a journal whose background check failed was not checked inline")
	}
	if _, err := os.Stat(statedir.VerifyFailedPath(dir)); !os.IsNotExist(err) {
		t.Errorf("the verify-failed marker is still there after a passed check: %v", err)
	}
}

// A file that is not a journal is moved aside byte for byte, a fresh
// journal starts, and the log says so.
func TestOpenQuarantines(t *testing.T) {
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("not a journal "), 1000)
	if err := os.WriteFile(statedir.JournalPath(dir), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	db, later, log := open(t, dir, failpoint.Points{})
	defer db.Close()
	if later || !strings.Contains(log, "journal is damaged") {
		t.Errorf("verifyLater %v, log %q", later, log)
	}
	moved, _ := filepath.Glob(statedir.JournalPath(dir) + ".corrupt-*")
	if len(moved) != 1 {
		t.Fatalf("moved aside: %v, want one file", moved)
	}
	if b, _ := os.ReadFile(moved[0]); !bytes.Equal(b, garbage) {
		t.Error("the damaged journal was not kept byte for byte")
	}
}
