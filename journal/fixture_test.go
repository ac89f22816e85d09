package journal

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// The schema-1 fixture: testdata/schema1.db.gz is a journal written by the
// code of schema 1 (before records carried their own check), by
// writeFixture below as it was then (JOURNAL_WRITE_FIXTURE=path go test
// -run TestWriteFixture ./journal/). TestMigrateSchema1 opens it with
// today's code: every record must still be there, and read the same.

var fixtureNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fixtureSessions is what the fixture holds: one session in every state,
// with the optional fields set, and ids that need escaping.
func fixtureSessions() []record.Session {
	var out []record.Session
	states := []record.SessionState{record.Idle, record.InTurn, record.Waiting, record.ResumePending, record.Parked, record.Stopped, record.Closed}
	for i, st := range states {
		s := record.Session{ID: fmt.Sprintf("sess-%d-%s", i, st), State: st, Turn: "t1", Phase: "tool", Tool: "bash",
			Detail: `echo "quoted" \ back`, Prompt: "fix the \u00e9 bug", CrashCount: i, Reason: "why " + string(st),
			Outcome: "completed", TurnStarted: fixtureNow, LastHeartbeat: fixtureNow.Add(time.Second),
			Updated: fixtureNow.Add(time.Duration(i) * time.Minute), Run: uint64(i + 1),
			Tokens: &record.Tokens{Input: int64(1000 * i), Output: int64(i)}, Effects: []string{"write:a.go"}}
		switch st {
		case record.ResumePending:
			s.Resume = &record.Resume{Attempt: 1, Interrupted: 3, Reason: "supervisor-died", Message: "continue", Since: fixtureNow}
		case record.Parked:
			s.ParkedBy = record.ParkedByBreaker
			s.Fingerprint = &record.Fingerprint{Sum: "abc", Files: []record.FileFingerprint{{Path: "/bin/agent", Size: 10, MTime: fixtureNow, SHA256: "def"}}}
		}
		out = append(out, s)
	}
	out = append(out, record.Session{ID: `odd "id" \ with escapes`, State: record.Idle, Updated: fixtureNow})
	return out
}

func fixtureRuns() []record.Run {
	var out []record.Run
	for i := uint64(1); i <= 12; i++ {
		out = append(out, record.Run{Run: i, PID: 1000 + int(i), StartTime: 17e11 + int64(i), Started: fixtureNow,
			Ended: fixtureNow.Add(time.Minute), ExitCode: int(i % 3), Reason: record.ReasonExit, Dirty: i%2 == 0,
			LastHeartbeat: fixtureNow, Argv: []string{"agent", "-x"}})
	}
	return out
}

func writeFixture(path string) error {
	db, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *Tx) error {
		for _, s := range fixtureSessions() {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		for _, r := range fixtureRuns() {
			if _, err := tx.NextRun(); err != nil {
				return err
			}
			if err := tx.PutRun(r); err != nil {
				return err
			}
		}
		if err := tx.SetOwner(Owner{PID: 7, StartTime: 1, BootID: "b", Started: fixtureNow}); err != nil {
			return err
		}
		return tx.SetClean(true)
	})
}

func TestWriteFixture(t *testing.T) {
	path := os.Getenv("JOURNAL_WRITE_FIXTURE")
	if path == "" {
		t.Skip("writes testdata/schema1.db.gz only when asked (JOURNAL_WRITE_FIXTURE=path)")
	}
	tmp := filepath.Join(t.TempDir(), "journal.db")
	if err := writeFixture(tmp); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	if err := os.WriteFile(path, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// openFixture copies the gzipped fixture name from testdata into a fresh
// journal.db and returns its path.
func openFixture(t *testing.T, name string) string {
	t.Helper()
	gz, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
