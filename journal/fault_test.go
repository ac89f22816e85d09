package journal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// hangBound is how long a journal call may take in these tests before it
// counts as hung: generous, so that only a hang fails, never a slow machine.
const hangBound = 10 * time.Second

// within runs fn on a goroutine of its own and returns its error, failing
// the test if fn has not returned within hangBound (a call waiting on a
// lock the fault left held never does).
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangBound):
		t.Fatalf("%s: still blocked after %v", what, hangBound)
		return nil
	}
}

// faultable opens a journal of several pages whose file the test will cut
// short while it is open. Its cleanup checks that the poisoned DB answers
// Verify and Close at once (no tx.Check is possible on it: that is the
// point); a test that faults nothing gets the usual full check.
func faultable(t *testing.T) (*DB, string) {
	t.Helper()
	return faultableWith(t, Options{})
}

// faultableWith is faultable with opt.
func faultableWith(t *testing.T, opt Options) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		for i := range 200 {
			s := record.Session{ID: fmt.Sprintf("s%03d", i), State: record.InTurn, Prompt: strings.Repeat("p", 200)}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := within(t, "Verify at cleanup", db.Verify)
		if db.Fault() != nil && !errors.Is(err, ErrFault) {
			t.Errorf("Verify of a faulted journal: %v, want ErrFault", err)
		}
		if db.Fault() == nil && err != nil {
			t.Errorf("journal inconsistent at end of test: %v", err)
		}
		if err := within(t, "Close", db.Close); err != nil && db.Fault() == nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db, path
}

// cut truncates the open journal's file to its first page: every page
// beyond, the second meta page included, is now past the end of the file
// but still inside bbolt's mapping, and reading it faults (SIGBUS).
func cut(t *testing.T, path string) {
	t.Helper()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
}

// Issue 21 item 1: the agent truncated journal.db while supervise ran. The
// read that faults returns ErrFault (and ErrCorrupt), Faulted is closed,
// and every later call, from any goroutine, returns ErrFault at once
// instead of waiting on the lock the fault left held inside bbolt.
func TestFaultPoisons(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { testFaultPoisons(t, inline) })
	}
}

// testFaultPoisons is TestFaultPoisons, the transactions on the journal's
// goroutines or (Options.Inline) on the caller's.
func testFaultPoisons(t *testing.T, inline bool) {
	db, path := faultableWith(t, Options{Inline: inline})
	select {
	case <-db.Faulted():
		t.Fatal("Faulted closed before any fault")
	default:
	}
	cut(t, path)

	var first error
	for i := 0; first == nil && i < 10; i++ {
		first = within(t, "View on the cut journal", func() error {
			return db.View(func(tx *Tx) error { _, err := tx.OpenSessions(); return err })
		})
		if first == nil {
			first = within(t, "Update on the cut journal", func() error {
				return db.Update(func(tx *Tx) error { return tx.PutSession(record.Session{ID: "new", State: record.InTurn}) })
			})
		}
	}
	if !errors.Is(first, ErrFault) || !errors.Is(first, ErrCorrupt) {
		t.Fatalf("calls on a journal cut to one page: %v, want ErrFault matching ErrCorrupt", first)
	}
	select {
	case <-db.Faulted():
	default:
		t.Fatal("Faulted not closed after a fault")
	}
	if db.Fault() != first {
		t.Errorf("Fault() = %v, want the first fault %v", db.Fault(), first)
	}

	// Another goroutine, as the supervisor's writer is: without the poison
	// both would block in bbolt's Begin for ever.
	called := false
	if err := within(t, "a View after the fault", func() error {
		return db.View(func(*Tx) error { called = true; return nil })
	}); !errors.Is(err, ErrFault) {
		t.Errorf("View after the fault: %v, want ErrFault", err)
	}
	if err := within(t, "an Update after the fault", func() error {
		return db.Update(func(*Tx) error { called = true; return nil })
	}); !errors.Is(err, ErrFault) {
		t.Errorf("Update after the fault: %v, want ErrFault", err)
	}
	if err := within(t, "PruneSessions after the fault", func() error {
		_, err := db.PruneSessions(1, 10)
		return err
	}); !errors.Is(err, ErrFault) {
		t.Errorf("PruneSessions after the fault: %v, want ErrFault", err)
	}
	if err := within(t, "CheckRecords after the fault", db.CheckRecords); !errors.Is(err, ErrFault) {
		t.Errorf("CheckRecords after the fault: %v, want ErrFault", err)
	}
	if called {
		t.Error("a call after the fault ran its function: it touched bbolt")
	}
}

// A call already inside the journal when another one faults returns too:
// here a View is in its function when a second View faults in bbolt's
// Begin, holding the lock the first one's rollback needs. The first one
// returns ErrFault once its function is done, instead of blocking in its
// rollback for ever.
func TestFaultReleasesCallInFlight(t *testing.T) {
	db, path := faultable(t)
	entered, release := make(chan struct{}), make(chan struct{})
	inFlight := make(chan error, 1)
	go func() {
		inFlight <- db.View(func(tx *Tx) error {
			close(entered)
			<-release
			return nil
		})
	}()
	<-entered
	cut(t, path)
	if err := within(t, "View on the cut journal", func() error {
		return db.View(func(*Tx) error { return nil })
	}); !errors.Is(err, ErrFault) {
		t.Fatalf("View on a journal cut to one page: %v, want ErrFault", err)
	}
	close(release)
	select {
	case err := <-inFlight:
		if !errors.Is(err, ErrFault) {
			t.Errorf("the View in flight returned %v, want ErrFault", err)
		}
	case <-time.After(hangBound):
		t.Fatalf("the View in flight is still blocked after %v", hangBound)
	}
}

// A function that ends its goroutine (t.FailNow in a test) ends the
// caller's goroutine too, as it did when it ran there, and is no fault:
// bbolt's rollback ran and the journal goes on.
func TestGoexitIsNoFault(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(fmt.Sprintf("inline=%v", inline), func(t *testing.T) { testGoexitIsNoFault(t, inline) })
	}
}

func testGoexitIsNoFault(t *testing.T, inline bool) {
	db, err := Open(filepath.Join(t.TempDir(), "journal.db"), Options{Inline: inline})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	returned := false
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		db.View(func(*Tx) error { runtime.Goexit(); return nil })
		returned = true
	}()
	<-exited
	if returned {
		t.Error("the caller went on after its function called runtime.Goexit")
	}
	if err := within(t, "Update after a Goexit", func() error {
		return db.Update(func(tx *Tx) error { return tx.SetClean(true) })
	}); err != nil || db.Fault() != nil {
		t.Errorf("Update after a Goexit: %v (fault %v)", err, db.Fault())
	}
}

// goroutineID is the id of the goroutine that calls it.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// With Options.Inline a transaction runs on its caller's goroutine, and
// without it on another (the journal's).
func TestInlineRunsOnCaller(t *testing.T) {
	for _, inline := range []bool{false, true} {
		db, err := Open(filepath.Join(t.TempDir(), "journal.db"), Options{Inline: inline})
		if err != nil {
			t.Fatal(err)
		}
		caller := goroutineID()
		var view, update string
		if err := db.View(func(*Tx) error { view = goroutineID(); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *Tx) error { update = goroutineID(); return tx.SetClean(true) }); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if on := view == caller && update == caller; on != inline {
			t.Errorf("Inline %v: caller goroutine %s, View ran on %s, Update on %s", inline, caller, view, update)
		}
	}
}
