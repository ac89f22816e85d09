package supervisor

import (
	"context"
	"log/slog"
	"sync"
)

// logHold lets the loop keep log output off the restart path: between a
// death's commit and the next fork, records are queued (in order, from
// every goroutine logging through s.log) and written once the child is
// started, or as soon as the loop does anything else. A log line costs a
// formatted write to stderr (a pipe to journald or a terminal, which can
// block); the death itself is already durable in the journal.
type logHold struct {
	mu      sync.Mutex
	holding bool
	queue   []heldRecord
}

type heldRecord struct {
	h slog.Handler
	r slog.Record
}

// holdHandler is a slog.Handler that queues while its logHold holds.
type holdHandler struct {
	h    slog.Handler
	hold *logHold
}

func newHoldLogger(l *slog.Logger, hold *logHold) *slog.Logger {
	return slog.New(&holdHandler{h: l.Handler(), hold: hold})
}

func (h *holdHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.h.Enabled(ctx, level)
}

func (h *holdHandler) Handle(ctx context.Context, r slog.Record) error {
	h.hold.mu.Lock()
	if h.hold.holding {
		h.hold.queue = append(h.hold.queue, heldRecord{h.h, r.Clone()})
		h.hold.mu.Unlock()
		return nil
	}
	h.hold.mu.Unlock()
	return h.h.Handle(ctx, r)
}

func (h *holdHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &holdHandler{h: h.h.WithAttrs(attrs), hold: h.hold}
}

func (h *holdHandler) WithGroup(name string) slog.Handler {
	return &holdHandler{h: h.h.WithGroup(name), hold: h.hold}
}

// start queues log records until release.
func (l *logHold) start() {
	l.mu.Lock()
	l.holding = true
	l.mu.Unlock()
}

// release writes the queued records, in order, and stops queueing. Cheap
// when nothing is held.
func (l *logHold) release() {
	l.mu.Lock()
	if !l.holding {
		l.mu.Unlock()
		return
	}
	defer l.mu.Unlock()
	l.holding = false
	for _, hr := range l.queue { // under mu: nothing logged meanwhile jumps the queue
		_ = hr.h.Handle(context.Background(), hr.r)
	}
	l.queue = nil
}
