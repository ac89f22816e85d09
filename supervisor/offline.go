package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/resume"
)

// LoadStatus is `supervise status`: it asks the supervise running on
// stateDir over its control socket, or reads the journal when none runs.
// It gives up after 5 s.
func LoadStatus(ctx context.Context, stateDir, name string, all bool) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := FetchStatus(ctx, stateDir, all)
	if err == nil || !errors.Is(err, ErrNoSupervisor) {
		return st, err
	}
	db, err := journal.Open(StatePath(stateDir), journal.Options{ReadOnly: true})
	if err != nil {
		if errors.Is(err, journal.ErrLocked) {
			return st, fmt.Errorf("%w, but its control socket %s does not answer", err, ControlPath(stateDir))
		}
		return st, err
	}
	defer db.Close()
	return ReadStatus(db, name, stateDir, all)
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
		s, err = resume.Manual(s, time.Now(), "")
		if err != nil {
			return err
		}
		return tx.PutSession(s)
	})
	if err != nil {
		return "", err
	}
	return "at the next start of supervise", nil
}
