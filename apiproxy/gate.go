package apiproxy

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"time"
)

// Strangers cost the agent nothing. Every connection is accepted at once
// and read by a gate before the HTTP server sees it: only a connection
// whose request line begins with a method and the secret path prefix
// ("POST /SECRET/") takes one of the maxConns places the agent's calls are
// served in. One whose first bytes differ is answered 404 and closed as
// soon as a byte differs; one that does not send them within
// Config.PrefixTimeout is closed. Connections at the gate have places of
// their own, maxAtGate, and when those are full the oldest is closed to
// make room: a new connection is never kept waiting by older ones that
// say nothing.
const (
	// maxConns bounds the connections served at once; more that passed
	// the gate wait for a place (at most maxWaiting of them; beyond, they
	// are closed). With MaxHeaderBytes, it bounds what connections cost
	// beyond the budgets.
	maxConns   = 256
	maxWaiting = 256
	// maxAtGate bounds the connections at the gate.
	maxAtGate = 512
	// defaultPrefixTimeout is Config.PrefixTimeout's default: the CLIs
	// send their request as soon as they are connected.
	defaultPrefixTimeout = 5 * time.Second
	// maxMethod bounds a request line's method.
	maxMethod = 16
	// strangerLinger bounds what a refused connection is given to read
	// its 404 before it is closed.
	strangerLinger = time.Second
)

// notFound is what a connection without the secret prefix is answered.
const notFound = "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Content-Length: 19\r\nConnection: close\r\n\r\n404 page not found\n"

// gateListener accepts every connection, and hands the HTTP server only
// those that begin with the secret prefix, each holding one of maxConns
// places until it is closed. Close ends every goroutine it started.
type gateListener struct {
	ln      net.Listener
	prefix  []byte // "/SECRET/"
	timeout time.Duration
	ready   chan net.Conn // connections through the gate, each with its place
	places  chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]uint64 // connections at the gate -> order of arrival
	seq     uint64
	waiting int // through the gate, waiting for a place
	closed  bool
}

func newGateListener(ln net.Listener, secret string, timeout time.Duration) *gateListener {
	g := &gateListener{ln: ln, prefix: []byte("/" + secret + "/"), timeout: timeout,
		ready: make(chan net.Conn), places: make(chan struct{}, maxConns), done: make(chan struct{}),
		pending: map[net.Conn]uint64{}}
	g.wg.Add(1)
	go g.acceptLoop()
	return g
}

// Accept returns the next connection through the gate.
func (g *gateListener) Accept() (net.Conn, error) {
	select {
	case c := <-g.ready:
		return c, nil
	case <-g.done:
		return nil, net.ErrClosed
	}
}

func (g *gateListener) Addr() net.Addr { return g.ln.Addr() }

// Close stops accepting, closes the connections at the gate and waits
// for the gate's goroutines. Connections handed on are the server's.
func (g *gateListener) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	close(g.done)
	for c := range g.pending {
		c.Close()
	}
	g.mu.Unlock()
	err := g.ln.Close()
	g.wg.Wait()
	return err
}

func (g *gateListener) acceptLoop() {
	defer g.wg.Done()
	var delay time.Duration
	for {
		c, err := g.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, or another passing error: back off as
			// net/http does, and go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-g.done:
				t.Stop()
				return
			}
			continue
		}
		delay = 0
		if !g.admit(c) {
			c.Close()
			return
		}
		g.wg.Add(1)
		go g.check(c)
	}
}

// admit puts c at the gate, closing the oldest connection there when the
// gate is full; false once the gate is closed.
func (g *gateListener) admit(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	if len(g.pending) >= maxAtGate {
		var oldest net.Conn
		var at uint64
		for pc, s := range g.pending {
			if oldest == nil || s < at {
				oldest, at = pc, s
			}
		}
		// Its check ends on the closed connection and leaves the gate.
		delete(g.pending, oldest)
		oldest.Close()
	}
	g.seq++
	g.pending[c] = g.seq
	return true
}

// leave takes c from the gate; false if it was closed there (evicted, or
// the gate closed).
func (g *gateListener) leave(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, ok := g.pending[c]
	delete(g.pending, c)
	return ok && !g.closed
}

// check reads c's first bytes: the secret prefix hands it on, anything
// else closes it.
func (g *gateListener) check(c net.Conn) {
	defer g.wg.Done()
	// The deadline is the wall clock's (the kernel's).
	c.SetReadDeadline(time.Now().Add(g.timeout))
	head, v := g.readPrefix(c)
	if v != passed {
		if v == differs {
			// Still at the gate while it reads its 404: eviction and
			// Close can end it.
			refuseStranger(c)
		}
		g.leave(c)
		c.Close()
		return
	}
	if !g.leave(c) {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	g.mu.Lock()
	full := g.waiting >= maxWaiting
	if !full {
		g.waiting++
	}
	g.mu.Unlock()
	if full {
		c.Close()
		return
	}
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	select {
	case g.places <- struct{}{}:
	case <-g.done:
		c.Close()
		return
	}
	gc := &gateConn{Conn: c, head: head, release: func() { <-g.places }}
	select {
	case g.ready <- gc:
	case <-g.done:
		gc.Close()
	}
}

// verdict is what the gate made of a connection's first bytes.
type verdict int

const (
	passed  verdict = iota // a method and the secret prefix
	differs                // a byte that cannot begin such a line
	silent                 // its deadline passed (or it ended) first
)

// readPrefix reads a request line's method, one space and the secret
// prefix, deciding at the first byte that differs; the bytes read are
// returned to be read again by the server.
func (g *gateListener) readPrefix(c net.Conn) ([]byte, verdict) {
	buf := make([]byte, 0, maxMethod+1+len(g.prefix))
	method := -1 // length of the method once its space is read
	for {
		n, err := c.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if method < 0 {
			i := bytes.IndexByte(buf, ' ')
			switch {
			case i < 0 && (len(buf) > maxMethod || !isToken(buf)):
				return nil, differs
			case i == 0 || i > maxMethod || (i > 0 && !isToken(buf[:i])):
				return nil, differs
			case i > 0:
				method = i
			}
		}
		if method >= 0 {
			got := buf[method+1:]
			m := min(len(got), len(g.prefix))
			if !bytes.Equal(got[:m], g.prefix[:m]) {
				return nil, differs
			}
			if m == len(g.prefix) {
				return buf, passed
			}
		}
		if err != nil {
			return nil, silent
		}
		if len(buf) == cap(buf) {
			return nil, differs // cannot happen: the bound is there for safety
		}
	}
}

// isToken reports whether b is made of upper-case letters (a method).
func isToken(b []byte) bool {
	for _, c := range b {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

// refuseStranger answers a connection without the secret prefix 404,
// bounded in time, and lets it read the answer before it is closed.
func refuseStranger(c net.Conn) {
	c.SetDeadline(time.Now().Add(strangerLinger))
	if _, err := c.Write([]byte(notFound)); err != nil {
		return
	}
	if tc, ok := c.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	// Closing with bytes unread would reset the connection before the
	// client read the 404: what it sends is read, up to a bound, until it
	// closes or the linger ends.
	var sink [4096]byte
	for n := 0; n < 64<<10; {
		m, err := c.Read(sink[:])
		if err != nil {
			return
		}
		n += m
	}
}

// gateConn is a connection through the gate: the bytes the gate read
// come first, and closing it frees its place.
type gateConn struct {
	net.Conn
	head    []byte
	once    sync.Once
	release func()
}

func (c *gateConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *gateConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
