// Package failpoint holds supervise's test failpoints: environment
// variables that the integration tests set to make supervise misbehave in
// one precise way. They are read once, when supervise starts; in
// production none is set and every point is off.
//
//	SUPERVISE_FAILPOINT_WEDGE=FILE           the loop blocks while FILE exists
//	SUPERVISE_FAILPOINT_COMMIT_DELAY=DUR     every journal commit waits DUR first
//	SUPERVISE_FAILPOINT_VERIFY_INLINE=BYTES  journals larger than this are
//	                                         checked in the background
//	SUPERVISE_FAILPOINT_ACTOR_FAIL=FILE      an actor fails once FILE exists,
//	                                         as a broken socket's would
package failpoint

import (
	"errors"
	"os"
	"strconv"
	"time"
)

// Environment variables of the failpoints.
const (
	EnvWedge        = "SUPERVISE_FAILPOINT_WEDGE"
	EnvCommitDelay  = "SUPERVISE_FAILPOINT_COMMIT_DELAY"
	EnvVerifyInline = "SUPERVISE_FAILPOINT_VERIFY_INLINE"
	EnvActorFail    = "SUPERVISE_FAILPOINT_ACTOR_FAIL"
)

// Points are the failpoints in force. The zero value is production: all off.
type Points struct {
	// Wedge is a file: while it exists the loop blocks (as a wedged loop
	// would), so tests can check that health checks and the upward
	// watchdog notice. Empty: off.
	Wedge string
	// CommitDelay is how long every journal commit waits first, as on a
	// slow disk. 0: off.
	CommitDelay time.Duration
	// VerifyInline, when set (HasVerifyInline), replaces the journal size
	// up to which the full check after an unclean stop runs before boot.
	VerifyInline    int64
	HasVerifyInline bool
	// ActorFail is a file: once it exists, an extra actor in supervise's
	// run group returns an error, as the notify, control or metrics actor
	// does when its socket breaks. Empty: off.
	ActorFail string
}

// FromEnv reads the failpoints from the environment. Unset or invalid
// values mean off. supervise calls it once, at start, and hands the Points
// to what uses them.
func FromEnv() Points {
	var p Points
	p.Wedge = os.Getenv(EnvWedge)
	p.ActorFail = os.Getenv(EnvActorFail)
	if d, err := time.ParseDuration(os.Getenv(EnvCommitDelay)); err == nil {
		p.CommitDelay = max(d, 0)
	}
	if n, err := strconv.ParseInt(os.Getenv(EnvVerifyInline), 10, 64); err == nil {
		p.VerifyInline, p.HasVerifyInline = n, true
	}
	return p
}

// BlockWhileWedged blocks while the Wedge file exists (tests only).
func (p Points) BlockWhileWedged() {
	if p.Wedge == "" {
		return
	}
	for {
		if _, err := os.Stat(p.Wedge); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ErrActor is the error of the ActorFail failpoint's actor.
var ErrActor = errors.New("failpoint: actor failed")

// FailActor blocks until the ActorFail file exists, then returns ErrActor,
// or until stop is closed, then returns nil.
func (p Points) FailActor(stop <-chan struct{}) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if _, err := os.Stat(p.ActorFail); err == nil {
			return ErrActor
		}
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
	}
}
