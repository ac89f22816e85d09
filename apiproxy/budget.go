package apiproxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// The proxy's memory is bounded whatever the agent or the upstream sends:
// every buffer that holds bytes of the traffic is drawn from a budget
// before a byte is appended, and nothing waits for one. Request bodies
// read to derive events draw from one budget shared by all connections,
// maxBuffered bytes; a body it cannot hold now is refused (503, never
// forwarded). Answers (a non-stream answer or a limit error kept for
// parsing, an SSE line and event) draw from another, maxAnswerBuffered
// bytes, of which each model call reserves answerFloor before it is
// forwarded (refused 503 when it cannot): what counts an answer's tokens
// never depends on space a request body holds, and an answer within its
// floor never on space another answer holds. An answer that outgrows
// what it can hold is cut, never passed on uncounted. A request body
// must arrive within Config.BodyTimeout.
const (
	maxBuffered = 64 << 20
	// maxAnswerBuffered bounds the buffers of all answers together.
	maxAnswerBuffered = 32 << 20
	// answerFloor is what each model call in flight holds for its
	// answer: more than the events that carry usage need (Anthropic's
	// message_start and message_delta, a Responses response.completed of a
	// long answer, a non-stream answer), so that counting them depends on
	// nothing another call holds.
	answerFloor = 512 << 10
	// defaultBodyTimeout is Config.BodyTimeout's default.
	defaultBodyTimeout = 60 * time.Second
	// firstChunk is the first size of a body buffer whose length is not
	// announced.
	firstChunk = 64 << 10
)

// pool is where a buffer's bytes are taken from: the shared budget, or
// one exchange's reserve.
type pool interface {
	take(n int64) bool
	give(n int64)
}

// reserve is one model call's share of the answers' budget: floor bytes
// taken when the call is forwarded, more from the budget when its answer
// needs them. Bytes given back stay in the reserve until release.
type reserve struct {
	mu       sync.Mutex
	budget   *budget
	free     int64 // bytes of the reserve not in use
	taken    int64 // bytes the reserve took from the budget
	released bool
}

// newReserve takes floor bytes from b; nil when b cannot hold them.
func newReserve(b *budget, floor int64) *reserve {
	if !b.take(floor) {
		return nil
	}
	return &reserve{budget: b, free: floor, taken: floor}
}

func (r *reserve) take(n int64) bool {
	if n <= 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return false
	}
	if n <= r.free {
		r.free -= n
		return true
	}
	more := n - r.free
	if !r.budget.take(more) {
		return false
	}
	r.taken += more
	r.free = 0
	return true
}

func (r *reserve) give(n int64) {
	if n <= 0 {
		return
	}
	r.mu.Lock()
	r.free += n
	r.mu.Unlock()
}

// release gives everything the reserve took back to the budget; the
// reserve takes nothing afterwards. A nil reserve releases nothing.
func (r *reserve) release() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return
	}
	r.released = true
	r.budget.give(r.taken)
	r.free, r.taken = 0, 0
}

// budget is a byte count shared by all connections. A nil budget
// never refuses.
type budget struct {
	mu   sync.Mutex
	left int64
}

func newBudget(n int64) *budget { return &budget{left: n} }

// take reserves n bytes; false (nothing reserved) when fewer are left.
func (b *budget) take(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

// give returns n bytes taken before.
func (b *budget) give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}

// grow returns buf with room for n more bytes, its capacity at most
// limit; the growth is taken from b and added to *held. ok is false, buf
// unchanged, when the room would pass limit or b cannot hold it (a nil b
// holds anything). The check comes before any byte is appended.
func grow(b pool, buf []byte, n, limit int, held *int64) ([]byte, bool) {
	need := len(buf) + n
	if need > limit {
		return buf, false
	}
	if need <= cap(buf) {
		return buf, true
	}
	c := min(max(2*cap(buf), need, 4096), limit)
	if b != nil && !b.take(int64(c-cap(buf))) {
		return buf, false
	}
	*held += int64(c - cap(buf))
	nb := make([]byte, len(buf), c)
	copy(nb, buf)
	return nb, true
}

// readBody reads a model call's body to derive its events, within the
// budget and the body deadline, and sets ex.session and ex.req. It
// returns the budget held by the body (to give back when the exchange
// ends) and false when nothing is to be forwarded: the client went away
// or did not send its body in time (the connection is then closed).
//
// A body the client compressed and one over maxBody are forwarded unread
// (ex.parsed false): their session comes from the headers alone, their
// answer is still read for usage, and they change no turn. One the budget
// cannot hold now is refused (writeBusy): false, nothing forwarded.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request, ex *exchange, a api, path string) (int64, bool) {
	if s := headerSessionOf(a, r.Header); s != "" {
		ex.session = s
	}
	rc := http.NewResponseController(w)
	// The deadline is the wall clock's (the kernel's), not Config.Now.
	rc.SetReadDeadline(time.Now().Add(p.bodyTimeout))
	if !identity(r.Header.Get("Content-Encoding")) {
		r.Body = &deadlineBody{Reader: r.Body, rc: r.Body, ctl: rc, ex: ex}
		return 0, true
	}
	var held int64
	var buf []byte
	cl := r.ContentLength
	unread := func(why string) (int64, bool) {
		p.warn(why, "provider", ex.provider.String(), "limit_bytes", maxBody, "budget_bytes", maxBuffered)
		r.Body = &deadlineBody{Reader: io.MultiReader(bytes.NewReader(buf), r.Body), rc: r.Body, ctl: rc, ex: ex}
		return held, true
	}
	if cl > maxBody {
		return unread("api proxy: a request body is over the read limit: forwarded without deriving events")
	}
	for {
		if cl >= 0 && int64(len(buf)) == cl {
			break // net/http ends a body at its Content-Length
		}
		if len(buf) == cap(buf) {
			n := min(firstChunk, maxBody+1-len(buf))
			if cl >= 0 {
				n = int(cl) - len(buf)
			}
			var ok bool
			// n never takes buf past maxBody+1: only the budget refuses.
			if buf, ok = grow(p.budget, buf, n, maxBody+1, &held); !ok {
				// Fail closed: not forwarded unread (no turn derived from
				// it), refused; the CLI retries a 503.
				p.warn("api proxy: the proxy's buffers for request bodies are full: a request refused (503)",
					"provider", ex.provider.String(), "budget_bytes", maxBuffered)
				writeBusy(w, a)
				return held, false
			}
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > maxBody {
			return unread("api proxy: a request body is over the read limit: forwarded without deriving events")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			w.Header().Set("Connection", "close")
			if errors.Is(err, os.ErrDeadlineExceeded) {
				p.warn("api proxy: a request body did not arrive in time: the connection is closed",
					"provider", ex.provider.String(), "timeout", p.bodyTimeout.String())
				w.WriteHeader(http.StatusRequestTimeout)
			} else {
				w.WriteHeader(http.StatusBadRequest)
			}
			return held, false
		}
	}
	rc.SetReadDeadline(time.Time{})
	ex.parsed = true
	r.Body = io.NopCloser(bytes.NewReader(buf))
	r.ContentLength = int64(len(buf))
	ex.req = parseRequest(a, path, r.Header, buf)
	if ex.req.session != "" {
		ex.session = ex.req.session
	}
	return held, true
}

// deadlineBody is a body forwarded unread: the body deadline holds until
// its end, then is lifted (a deadline left on the connection would cut
// the answer's stream).
type deadlineBody struct {
	io.Reader
	rc   io.Closer
	ctl  *http.ResponseController
	ex   *exchange
	once sync.Once
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	n, err := d.Reader.Read(p)
	if err == io.EOF {
		d.once.Do(func() {
			d.ex.mu.Lock()
			if !d.ex.over {
				d.ctl.SetReadDeadline(time.Time{})
			}
			d.ex.mu.Unlock()
		})
	}
	return n, err
}

func (d *deadlineBody) Close() error { return d.rc.Close() }
