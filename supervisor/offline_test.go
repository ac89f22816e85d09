package supervisor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/journal"
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
		return tx.PutSession(journal.Session{ID: "s1", State: journal.Parked, Turn: "t1", CrashCount: 2, Reason: "mid-turn at 2 consecutive dirty deaths"})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := LoadStatus(ctx, dir, "t", true)
	if err != nil || len(st.Sessions) != 1 || st.Sessions[0].State != string(journal.Parked) {
		t.Fatalf("LoadStatus = %+v, %v; want s1 parked", st.Sessions, err)
	}
	how, err := ManualResume(ctx, dir, "s1")
	if err != nil || !strings.Contains(how, "next start") {
		t.Fatalf("ManualResume = %q, %v", how, err)
	}
	st, _ = LoadStatus(ctx, dir, "t", true)
	if s := st.Sessions[0]; s.State != string(journal.ResumePending) || s.CrashCount != 0 {
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
	_, err := LoadStatus(context.Background(), dir, "t", false)
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
		return tx.PutSession(journal.Session{ID: "s1", State: journal.Parked, ParkedBy: journal.ParkedByBudget, Turn: "t1",
			Tokens: &journal.Tokens{Input: 1500, Output: 500}, Reason: "over its token budget"})
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
	var s journal.Session
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
	if s.State != journal.ResumePending || s.Tokens.Spent() != 0 {
		t.Errorf("s1 = %s, tokens %+v: want resume_pending, its budget counted from now", s.State, *s.Tokens)
	}
	if b.Since() != 0 || b.Spent != 9000 || b.Parked != "" {
		t.Errorf("state dir budget %+v, want lifted", b)
	}
}
