package supervisor

import (
	"log/slog"
	"time"
)

// rateLog logs one warning at most once per interval and counts the ones it
// suppressed in between, so an agent that floods supervise with refused
// messages costs a line a second, not a line per message. It is used on the
// loop goroutine only.
type rateLog struct {
	interval   time.Duration
	last       time.Time
	suppressed uint64
}

// warn logs msg with args unless one was logged within the interval; the
// line carries "suppressed", the count since the previous line.
func (r *rateLog) warn(log *slog.Logger, now time.Time, msg string, args ...any) {
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.suppressed++
		return
	}
	log.Warn(msg, append(args, "suppressed", r.suppressed)...)
	r.last, r.suppressed = now, 0
}

// debug is warn at Debug level.
func (r *rateLog) debug(log *slog.Logger, now time.Time, msg string, args ...any) {
	if !r.last.IsZero() && now.Sub(r.last) < r.interval {
		r.suppressed++
		return
	}
	log.Debug(msg, append(args, "suppressed", r.suppressed)...)
	r.last, r.suppressed = now, 0
}
