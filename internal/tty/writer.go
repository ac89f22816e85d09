package tty

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// QueueMax bounds the bytes a Writer holds while the terminal takes none.
const QueueMax = 256 << 10

// Writer writes to a terminal without ever blocking its caller. Write
// appends to a bounded queue and returns at once; one goroutine of the
// Writer's own drains the queue into the terminal, and it alone waits
// when the terminal's output is stopped (^S, tcflow(TCOOFF), a pty whose
// reader stopped reading). A Write that finds the queue full is dropped
// whole and counted; once output flows again the count is written, once,
// in one line.
//
// Writes reach the terminal in the order they were made. Close waits, up
// to a bound, for the queue to drain; the caller must call it once it
// writes no more.
type Writer struct {
	w io.Writer

	mu      sync.Mutex
	buf     []byte
	dropped int           // writes dropped since the last note
	wake    chan struct{} // 1: there is something to write
	queued  uint64        // bytes taken into the queue, ever
	sent    uint64        // of those, bytes the drain has written (or lost to an error)
	moved   chan struct{} // closed, and replaced, each time sent grows
	closed  bool
	done    chan struct{} // closed when the drain goroutine returned
}

// NewWriter starts the Writer's drain into w (the terminal).
func NewWriter(w io.Writer) *Writer {
	t := &Writer{w: w, wake: make(chan struct{}, 1), done: make(chan struct{}), moved: make(chan struct{})}
	go t.drain()
	return t
}

// Write queues p whole or drops it whole; it never blocks on the
// terminal and never fails.
func (t *Writer) Write(p []byte) (int, error) {
	t.mu.Lock()
	switch {
	case t.closed:
	case len(t.buf)+len(p) > QueueMax:
		t.dropped++
	default:
		t.buf = append(t.buf, p...)
		t.queued += uint64(len(p))
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
	return len(p), nil
}

// Dropped is the number of writes dropped and not yet noted.
func (t *Writer) Dropped() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

func (t *Writer) drain() {
	defer close(t.done)
	for range t.wake {
		for {
			t.mu.Lock()
			p := t.buf
			t.buf = nil
			if len(p) == 0 {
				closed := t.closed
				t.mu.Unlock()
				if closed {
					return
				}
				break
			}
			t.mu.Unlock()
			t.w.Write(p) // a write error (the terminal went away) loses p: nothing better to do with it
			t.mu.Lock()
			t.sent += uint64(len(p))
			close(t.moved)
			t.moved = make(chan struct{})
			if n := t.dropped; n > 0 && len(t.buf)+128 <= QueueMax {
				// Output flows again: say what it missed.
				t.dropped = 0
				note := fmt.Sprintf("\r\nsupervise: %d lines were not shown: the terminal's output was stopped\r\n", n)
				t.buf = append(t.buf, note...)
				t.queued += uint64(len(note))
			}
			t.mu.Unlock()
		}
	}
}

// Flush waits until what was queued before it reached the terminal, or
// at most timeout (output stopped); it reports whether it did. A caller
// that must have its lines on the screen before something else draws
// there (the next run of an agent) waits this long at most.
func (t *Writer) Flush(timeout time.Duration) bool {
	t.mu.Lock()
	want := t.queued
	t.mu.Unlock()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		t.mu.Lock()
		if t.sent >= want {
			t.mu.Unlock()
			return true
		}
		moved := t.moved
		t.mu.Unlock()
		select {
		case <-moved:
		case <-timer.C:
			return false
		}
	}
}

// Close stops taking writes and waits up to timeout for what is queued to
// reach the terminal. It reports whether everything did; if not (output
// is still stopped), the rest is dropped when the process exits.
func (t *Writer) Close(timeout time.Duration) bool {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.wake)
	}
	t.mu.Unlock()
	select {
	case <-t.done:
		return true
	case <-time.After(timeout):
		return false
	}
}
