package supervisor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// With no supervise running, status reads the journal and a manual resume
// is recorded in it for the next supervise to dispatch.
func TestOffline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := journal.Open(StatePath(dir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *journal.Tx) error {
		return tx.PutSession(record.Session{ID: "s1", State: record.Parked, Turn: "t1", CrashCount: 2, Reason: "mid-turn at 2 consecutive dirty deaths"})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := LoadStatusView(ctx, dir, "t", View{All: true})
	if err != nil || len(st.Sessions) != 1 || st.Sessions[0].State != string(record.Parked) {
		t.Fatalf("LoadStatus = %+v, %v; want s1 parked", st.Sessions, err)
	}
	how, err := ManualResume(ctx, dir, "s1")
	if err != nil || !strings.Contains(how, "next start") {
		t.Fatalf("ManualResume = %q, %v", how, err)
	}
	st, _ = LoadStatusView(ctx, dir, "t", View{All: true})
	if s := st.Sessions[0]; s.State != string(record.ResumePending) || s.CrashCount != 0 {
		t.Errorf("after a manual resume: %+v, want resume_pending with crash count 0", s)
	}
	if _, err := ManualResume(ctx, dir, "nope"); !errors.Is(err, ErrUnknownSession) {
		t.Errorf("unknown session: %v, want ErrUnknownSession", err)
	}
	if _, err := os.Stat(ControlPath(dir)); !os.IsNotExist(err) {
		t.Errorf("a control socket appeared: %v", err)
	}
}

// Status of a state dir supervise never ran with says so, rather than
// showing an lstat error.
func TestOfflineNoJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := LoadStatusView(context.Background(), dir, "t", View{All: false})
	if err == nil || !strings.Contains(err.Error(), "no journal in "+dir+": supervise has not run with this state dir") {
		t.Fatalf("err = %v, want it to say no journal", err)
	}
	if _, err := os.Stat(StatePath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("status created a journal: %v", err)
	}
	// resume says the same, for an existing dir and a missing one, and
	// creates nothing.
	for _, d := range []string{dir, dir + "/missing"} {
		_, err := ManualResume(context.Background(), d, "s1")
		want := "no journal in " + d + ": supervise has not run with this state dir (check --name or --state-dir)"
		if !errors.Is(err, ErrNoJournal) || err.Error() != want {
			t.Errorf("resume in %s: %v, want %q", d, err, want)
		}
		if _, err := os.Stat(StatePath(d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("resume created a journal in %s: %v", d, err)
		}
	}
}

// `supervise resume` while supervise is not running lifts a budget's park
// as the running one does: the session's budget counts again from what it
// spent, and the state dir's from what all have spent.
func TestOfflineResumeLiftsBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := journal.Open(StatePath(dir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *journal.Tx) error {
		if err := tx.PutState(policyBudget, machine.Budget{Spent: 9000, Parked: "s1"}); err != nil {
			return err
		}
		return tx.PutSession(record.Session{ID: "s1", State: record.Parked, ParkedBy: record.ParkedByBudget, Turn: "t1",
			Tokens: &record.Tokens{Input: 1500, Output: 500}, Reason: "over its token budget"})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ManualResume(context.Background(), dir, "s1"); err != nil {
		t.Fatal(err)
	}
	db, err = journal.Open(StatePath(dir), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b machine.Budget
	var s record.Session
	err = db.View(func(tx *journal.Tx) error {
		if _, err := tx.State(policyBudget, &b); err != nil {
			return err
		}
		var ok bool
		s, ok, err = tx.Session("s1")
		if !ok {
			t.Fatal("s1 gone")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.State != record.ResumePending || s.Tokens.Spent() != 0 {
		t.Errorf("s1 = %s, tokens %+v: want resume_pending, its budget counted from now", s.State, *s.Tokens)
	}
	if b.Since() != 0 || b.Spent != 9000 || b.Parked != "" {
		t.Errorf("state dir budget %+v, want lifted", b)
	}
}

// A supervise killed between a death's record in the redo slot and
// bbolt's commit leaves journal.db without that death. Status read offline
// (read-only: no replay) says so, in the JSON and in the text, and the
// next writable open has the death.
func TestOfflineStatusSaysUnreplayedCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := StatePath(dir)
	db, err := journal.Open(path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(s record.Session) {
		t.Helper()
		if err := db.UpdateLogged(func(tx *journal.Tx) error { return tx.PutSession(s) }); err != nil {
			t.Fatal(err)
		}
		if err := db.View(func(*journal.Tx) error { return nil }); err != nil { // bbolt's commit done
			t.Fatal(err)
		}
	}
	put(record.Session{ID: "s1", State: record.InTurn, Turn: "t1"}) // the journal's first: plain
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	put(record.Session{ID: "s1", State: record.ResumePending, Turn: "t1", CrashCount: 1}) // in the slot
	db.Close()
	// The crash image: the slot has the death, journal.db not yet.
	if err := os.WriteFile(path, before, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := LoadStatusView(ctx, dir, "t", View{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Supervisor.UnreplayedCommit || st.Sessions[0].State != string(record.InTurn) {
		t.Errorf("offline status of the crash image: unreplayed_commit %v, s1 %s; want true and in_turn (the state before the death)", st.Supervisor.UnreplayedCommit, st.Sessions[0].State)
	}
	var text strings.Builder
	if err := WriteText(&text, st, st.Supervisor.Started); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "the next start replays it") {
		t.Errorf("status text does not say a commit awaits its replay:\n%s", text.String())
	}
	db, err = journal.Open(path, journal.Options{}) // what the next start does
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	st, err = LoadStatusView(ctx, dir, "t", View{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Supervisor.UnreplayedCommit || st.Sessions[0].State != string(record.ResumePending) {
		t.Errorf("offline status after the replay: unreplayed_commit %v, s1 %s; want false and resume_pending", st.Supervisor.UnreplayedCommit, st.Sessions[0].State)
	}
}
