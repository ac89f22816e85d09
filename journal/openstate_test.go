package journal_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

func openState(t *testing.T, dir string, fp failpoint.Points) (*journal.DB, bool, string) {
	t.Helper()
	var logb bytes.Buffer
	db, later, err := journal.OpenState(dir, fp, slog.New(slog.NewTextHandler(&logb, nil)))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db, later, logb.String()
}

// A new state dir gets a fresh journal; one closed cleanly is trusted as it
// is; one left unclean is checked (inline, being small) and kept.
func TestOpenStateTrusts(t *testing.T) {
	dir := t.TempDir()
	db, later, log := openState(t, dir, failpoint.Points{})
	if later || log != "" {
		t.Errorf("fresh journal: verifyLater %v, log %q", later, log)
	}
	if err := db.Update(func(tx *journal.Tx) error { return tx.SetClean(true) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, later, log = openState(t, dir, failpoint.Points{})
	if later || log != "" {
		t.Errorf("clean journal: verifyLater %v, log %q", later, log)
	}
	db.Update(func(tx *journal.Tx) error { return tx.SetClean(false) })
	db.Close()
	db, later, log = openState(t, dir, failpoint.Points{})
	if later || log != "" {
		t.Errorf("unclean small journal: verifyLater %v, log %q", later, log)
	}
	db.Close()
}

// A journal beyond the inline limit, left unclean, is checked in the
// background (the failpoint makes every journal large).
func TestOpenStateLargeVerifiesLater(t *testing.T) {
	large := failpoint.Points{VerifyInline: 0, HasVerifyInline: true}
	dir := t.TempDir()
	db, _, _ := openState(t, dir, large)
	db.Update(func(tx *journal.Tx) error { return tx.SetClean(false) })
	db.Close()
	db, later, _ := openState(t, dir, large)
	db.Close()
	if !later {
		t.Error("an unclean journal over the inline limit was not left for the background check")
	}
	// After a failed background check, the next start checks inline.
	if err := os.WriteFile(statedir.VerifyFailedPath(dir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	db, later, _ = openState(t, dir, large)
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
func TestOpenStateQuarantines(t *testing.T) {
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("not a journal "), 1000)
	if err := os.WriteFile(statedir.JournalPath(dir), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	db, later, log := openState(t, dir, failpoint.Points{})
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

// schemaRecord is the journal's schema record n and its check as they lie
// in a page of the file (journal/doc.go draws them): "schema", n as 8
// bytes big-endian, "schema.crc", the CRC-32C of "supervise journal
// schema " and those 8 bytes. bbolt stores each key followed by its value,
// in key order, with no checksum over data pages.
func schemaRecordBytes(n uint64) []byte {
	v := binary.BigEndian.AppendUint64(nil, n)
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write([]byte("supervise journal schema "))
	h.Write(v)
	rec := append([]byte("schema"), v...)
	return h.Sum(append(rec, "schema.crc"...))
}

// patchSchema writes a journal in dir, then rewrites its schema record in
// the file (every copy of it) with fn, and returns the file's new bytes.
func patchSchema(t *testing.T, dir string, fn func(rec []byte) []byte) []byte {
	t.Helper()
	db, _, _ := openState(t, dir, failpoint.Points{})
	db.Close()
	path := statedir.JournalPath(dir)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := schemaRecordBytes(journal.Schema)
	if !bytes.Contains(raw, rec) {
		t.Fatalf("schema record %q not found in the journal", rec)
	}
	raw = bytes.ReplaceAll(raw, rec, fn(append([]byte(nil), rec...)))
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return raw
}

// Issue 21 item 6: one bit flipped in the schema value (1 read as
// 4503599627370497, as TestFault05RandomDamage's seed 1796135621629718313
// did) is damage, not a newer journal: it is moved aside byte for byte,
// and a fresh journal starts, so the agent runs.
func TestOpenStateQuarantinesDamagedSchema(t *testing.T) {
	dir := t.TempDir()
	damaged := patchSchema(t, dir, func(rec []byte) []byte {
		rec[len("schema")+1] ^= 0x10
		return rec
	})
	db, later, log := openState(t, dir, failpoint.Points{})
	defer db.Close()
	if later || !strings.Contains(log, "journal is damaged") || !strings.Contains(log, strconv.FormatUint(journal.Schema|1<<52, 10)) {
		t.Errorf("verifyLater %v, log %q", later, log)
	}
	moved, _ := filepath.Glob(statedir.JournalPath(dir) + ".corrupt-*")
	if len(moved) != 1 {
		t.Fatalf("moved aside: %v, want one file", moved)
	}
	if b, _ := os.ReadFile(moved[0]); !bytes.Equal(b, damaged) {
		t.Error("the damaged journal was not kept byte for byte")
	}
	if err := db.Update(func(tx *journal.Tx) error { return tx.PutSession(record.Session{ID: "s1", State: record.InTurn}) }); err != nil {
		t.Errorf("the fresh journal: %v", err)
	}
	if err := db.Verify(); err != nil {
		t.Errorf("the fresh journal: %v", err)
	}
}

// A journal a newer release wrote on purpose (schema 2 with its check) is
// refused as before: ErrSchema, nothing moved aside, not a byte changed.
func TestOpenStateRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	newer := patchSchema(t, dir, func([]byte) []byte { return schemaRecordBytes(journal.Schema + 1) })
	db, _, err := journal.OpenState(dir, failpoint.Points{}, slog.New(slog.DiscardHandler))
	if err == nil {
		db.Close()
	}
	if !errors.Is(err, journal.ErrSchema) || errors.Is(err, journal.ErrCorrupt) {
		t.Errorf("Open of a schema 2 journal: %v, want ErrSchema", err)
	}
	if moved, _ := filepath.Glob(statedir.JournalPath(dir) + ".corrupt-*"); len(moved) != 0 {
		t.Errorf("a newer journal was moved aside: %v", moved)
	}
	if b, _ := os.ReadFile(statedir.JournalPath(dir)); !bytes.Equal(b, newer) {
		t.Error("the newer journal was changed")
	}
}
