package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// Benchmarks of the journal's hot paths. Commits fsync (NoSync is never
// set), so their ns/op is bounded by the disk under the test's temp dir: a
// commit costs two fdatasyncs (pages, then meta page). Run with -benchmem.
//
// The large-journal benchmarks build a journal of JOURNAL_BENCH_SESSIONS
// settled sessions (default 100 000) and JOURNAL_BENCH_RUNS runs (default
// 200 000; bench/ uses 1 000 000) once per benchmark.

var benchNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// benchSession is a session record the size a turn marker writes.
func benchSession(i int) record.Session {
	return record.Session{ID: fmt.Sprintf("0196b4a4-6f0e-7cc0-a2c5-%012x", i), State: record.InTurn, Turn: "turn-42",
		Phase: "tool", Tool: "bash", Prompt: "rename the package and update every import", TurnStarted: benchNow,
		LastHeartbeat: benchNow, Updated: benchNow, Run: 7}
}

func benchOpen(b *testing.B) *DB {
	b.Helper()
	db, err := Open(filepath.Join(b.TempDir(), "journal.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Verify(); err != nil {
			b.Errorf("journal inconsistent at end of benchmark: %v", err)
		}
		db.Close()
	})
	return db
}

// BenchmarkCommitSession is one turn marker's commit: one session record,
// one transaction, fsync.
func BenchmarkCommitSession(b *testing.B) {
	db := benchOpen(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s := benchSession(i % 64)
		i++
		if err := db.Update(func(tx *Tx) error { return tx.PutSession(s) }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommit64Sessions is one group commit of 64 sessions' markers:
// 64 session records in one transaction, one fsync.
func BenchmarkCommit64Sessions(b *testing.B) {
	db := benchOpen(b)
	batch := make([]record.Session, 64)
	for i := range batch {
		batch[i] = benchSession(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := db.Update(func(tx *Tx) error {
			for _, s := range batch {
				if err := tx.PutSession(s); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkPutSessionNoCommit is the CPU part of a marker's commit: the
// record's encoding and the bbolt puts, rolled back instead of committed.
func BenchmarkPutSessionNoCommit(b *testing.B) {
	db := benchOpen(b)
	s := benchSession(1)
	rollback := fmt.Errorf("rollback")
	b.ReportAllocs()
	for b.Loop() {
		if err := db.Update(func(tx *Tx) error {
			if err := tx.PutSession(s); err != nil {
				return err
			}
			return rollback
		}); err != rollback {
			b.Fatal(err)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// largeJournal builds a journal of settled sessions (idle and closed), a
// few open ones, and many runs, in batches of 10 000 records.
func largeJournal(b *testing.B) (path string, sessions, open int) {
	b.Helper()
	sessions = envInt("JOURNAL_BENCH_SESSIONS", 100_000)
	runs := envInt("JOURNAL_BENCH_RUNS", 200_000)
	path = filepath.Join(b.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const batch = 10_000
	for i := 0; i < sessions; i += batch {
		err := db.Update(func(tx *Tx) error {
			for j := i; j < min(i+batch, sessions); j++ {
				s := benchSession(j)
				s.State = record.Idle
				if j%2 == 1 {
					s.State = record.Closed
				}
				if j%(sessions/10+1) == 0 {
					s.State = record.Parked // a handful of open sessions
					open++
				}
				if err := tx.PutSession(s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < runs; i += batch {
		err := db.Update(func(tx *Tx) error {
			for j := i; j < min(i+batch, runs); j++ {
				n, err := tx.NextRun()
				if err != nil {
					return err
				}
				at := benchNow.Add(time.Duration(j) * time.Minute)
				if err := tx.PutRun(record.Run{Run: n, PID: 1000 + j%30000, StartTime: at.UnixMilli(), Started: at,
					Ended: at.Add(time.Minute), ExitCode: 137, Signal: 9, Reason: record.ReasonSignal, Dirty: true,
					LastHeartbeat: at, Argv: []string{"/usr/local/bin/agent", "--serve"}}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return path, sessions, open
}

// BenchmarkLargeJournal measures what a boot and a death read from a large
// journal: they must cost the same however many settled sessions and runs
// it holds.
func BenchmarkLargeJournal(b *testing.B) {
	path, sessions, open := largeJournal(b)
	fi, _ := os.Stat(path)
	b.Logf("journal: %d sessions (%d open), %.0f MiB", sessions, open, float64(fi.Size())/(1<<20))
	b.Run("Open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			db, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			db.Close()
		}
	})
	db, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	b.Run("LastRuns10", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := db.View(func(tx *Tx) error {
				runs, err := tx.LastRuns(10)
				if err == nil && len(runs) != 10 {
					err = fmt.Errorf("%d runs", len(runs))
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("OpenSessions", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := db.View(func(tx *Tx) error {
				got, err := tx.OpenSessions()
				if err == nil && len(got) != open {
					err = fmt.Errorf("%d open sessions, want %d", len(got), open)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Session", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			id := benchSession(i * 7919 % sessions).ID
			i++
			if err := db.View(func(tx *Tx) error {
				_, ok, err := tx.Session(id)
				if err == nil && !ok {
					err = fmt.Errorf("session %s missing", id)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CommitSession", func(b *testing.B) {
		s := benchSession(1)
		s.State = record.InTurn
		b.ReportAllocs()
		for b.Loop() {
			if err := db.Update(func(tx *Tx) error { return tx.PutSession(s) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkView is the cost of one call into the journal, a read that
// does nothing: the hand-off to the journal's worker and back, and bbolt's
// begin and rollback.
func BenchmarkView(b *testing.B) {
	db := benchOpen(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := db.View(func(*Tx) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
