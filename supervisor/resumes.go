package supervisor

import (
	"context"
	"errors"
	"time"

	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// ResumePath returns the resume file path inside a state dir.
func ResumePath(stateDir string) string { return statedir.ResumePath(stateDir) }

// startVerify runs the journal's full check in the background.
func (s *Supervisor) startVerify() {
	s.verifyc = make(chan error, 1)
	s.log.Info("checking the journal in the background after an unclean stop; automatic resumes wait for it")
	go func() { s.verifyc <- s.db.Verify() }()
}

// awaitVerified waits for the background check, ticking: a long check of a
// large journal is not a stuck loop.
func (s *Supervisor) awaitVerified() error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.tick(s.clock.Now())
		select {
		case err := <-s.verifyc:
			return err
		case <-t.C:
		}
	}
}

// verified hands the background check's result to the machine.
func (s *Supervisor) verified(err error) {
	s.verifyc = nil
	ev := machine.Verified{}
	if err != nil {
		ev.Err = err.Error()
	}
	s.step(ev)
}

// manualResume applies `supervise resume ID` on the loop goroutine.
func (s *Supervisor) manualResume(id string) (delivery string, err error) {
	ev := machine.ManualResume{ID: id}
	if !s.m.Held(id) {
		ev.Stored = s.stored(id)
	}
	s.run.reply, s.run.liveDelivered = nil, false
	cerr := s.step(ev)
	switch {
	case s.run.reply == nil:
		return "", errors.New("no reply")
	case s.run.reply.Err != nil:
		return "", s.run.reply.Err
	case cerr != nil:
		return "", cerr
	case s.run.liveDelivered:
		return "delivered to the running agent", nil
	case s.run.proc == nil:
		return "delivered when the agent starts", nil
	}
	return "delivered at the agent's next start", nil
}

// ask sends a request to the loop and waits for its answer.
func (s *Supervisor) ask(ctx context.Context, req request) (response, error) {
	req.reply = make(chan response, 1)
	select {
	case s.ch.reqc <- req:
	case <-s.ch.done:
		return response{}, ErrNotRunning
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r, r.err
	case <-ctx.Done():
		return response{}, ctx.Err()
	}
}
