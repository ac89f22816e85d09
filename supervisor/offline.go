package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// LoadStatusView is `supervise status` as v asks for it: it asks the
// supervise running on stateDir over its control socket, or reads the
// journal when none runs. It has no timeout of its own.
func LoadStatusView(ctx context.Context, stateDir, name string, v View) (Status, error) {
	st, err := FetchStatusView(ctx, stateDir, v)
	if err == nil || !errors.Is(err, ErrNoSupervisor) {
		return st, err
	}
	db, err := openOffline(stateDir)
	if err != nil {
		return st, err
	}
	defer db.Close()
	return ReadStatusView(db, name, stateDir, v)
}

// WriteStatus writes the status JSON to w: the running supervise's, copied
// as it streams in, or one written from the journal when none runs. With
// v.All every session is streamed: valid JSON at any size, never held whole.
func WriteStatus(ctx context.Context, w io.Writer, stateDir, name string, v View) error {
	err := CopyStatus(ctx, stateDir, v, func(r io.Reader) error {
		_, err := io.Copy(w, r)
		return err
	})
	if err == nil || !errors.Is(err, ErrNoSupervisor) {
		return err
	}
	db, err := openOffline(stateDir)
	if err != nil {
		return err
	}
	defer db.Close()
	return WriteStatusJSON(w, db, name, stateDir, v)
}

// ErrNoJournal means the state dir holds no journal: supervise never ran
// with it (a --name or --state-dir that names another agent, or none).
var ErrNoJournal = errors.New("no journal")

// haveJournal returns ErrNoJournal, wrapped in the words a person needs,
// when stateDir holds no journal, and says whose the state dir is when this
// user may not look into it.
func haveJournal(stateDir string) error {
	_, err := os.Lstat(StatePath(stateDir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w in %s: supervise has not run with this state dir (check --name or --state-dir)", ErrNoJournal, stateDir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: the state dir %s is private to the user supervise runs as%s: run this command as that user", err, stateDir, ownerOf(stateDir))
	}
	return nil
}

// ownerOf names the uid that owns dir, as " (uid N)", or nothing when it
// cannot be read.
func ownerOf(dir string) string {
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf(" (uid %d)", st.Uid)
	}
	return ""
}

// openOffline opens the journal of a supervise that does not answer on its
// control socket, read-only.
func openOffline(stateDir string) (*journal.DB, error) {
	if err := haveJournal(stateDir); err != nil {
		return nil, err
	}
	db, err := journal.Open(StatePath(stateDir), journal.Options{ReadOnly: true})
	if errors.Is(err, journal.ErrLocked) {
		return nil, fmt.Errorf("%w, but its control socket %s does not answer", err, ControlPath(stateDir))
	}
	return db, err
}

// ManualResume is `supervise resume`: the supervise running on stateDir
// resumes session id (RequestResume); when none runs, the session is
// marked in the journal and the next supervise dispatches it. It returns
// how the resume will be delivered, for the user.
func ManualResume(ctx context.Context, stateDir, id string) (string, error) {
	delivery, err := RequestResume(ctx, stateDir, id)
	if !errors.Is(err, ErrNoSupervisor) {
		return delivery, err
	}
	// Never create a journal here: a typo in --name must not leave a state
	// dir behind, with a journal that knows no session.
	if err := haveJournal(stateDir); err != nil {
		return "", err
	}
	db, err := journal.Open(StatePath(stateDir), journal.Options{})
	if err != nil {
		return "", err
	}
	defer db.Close()
	err = db.Update(func(tx *journal.Tx) error {
		s, ok, err := tx.Session(id)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w %q in %s", ErrUnknownSession, id, stateDir)
		}
		before := s
		s, err = resume.Manual(s, time.Now(), "")
		if err != nil {
			return err
		}
		if machine.LiftsBudget(before) {
			// The running supervise's --max-tokens-total is unknown here: a
			// person's resume of a budget park counts it again from now.
			var b machine.Budget
			if _, err := tx.State(policyBudget, &b); err != nil {
				return err
			}
			if err := tx.PutState(policyBudget, b.Lift()); err != nil {
				return err
			}
		}
		return tx.PutSession(s)
	})
	if err != nil {
		return "", err
	}
	return "at the next start of supervise", nil
}
