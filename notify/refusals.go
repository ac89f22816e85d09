package notify

import "sync"

// maxRefusers bounds the senders Refusals remembers. Past it, the set fails
// closed: every barrier is answered "refused" until Forget.
const maxRefusers = 4096

// Refusals remembers which senders (by pid) had a datagram refused since
// their last barrier, so that the barrier can answer NackByte instead of
// AckByte. It is safe for concurrent use; the zero value is ready.
type Refusals struct {
	mu   sync.Mutex
	pids map[int32]struct{}
	// lost is set when more senders refused than the set can hold: then
	// any barrier may follow a refusal it no longer remembers.
	lost bool
}

// Add records a refusal for pid.
func (r *Refusals) Add(pid int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pids == nil {
		r.pids = map[int32]struct{}{}
	}
	if _, ok := r.pids[pid]; !ok && len(r.pids) >= maxRefusers {
		r.lost = true
		return
	}
	r.pids[pid] = struct{}{}
}

// Take reports whether pid had a refusal since its last barrier, and
// forgets it: the next barrier starts afresh.
func (r *Refusals) Take(pid int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.pids[pid]
	delete(r.pids, pid)
	return ok || r.lost
}

// Forget clears every refusal, for a new process tree whose pids have
// nothing to do with the last one's.
func (r *Refusals) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.pids)
	r.lost = false
}
