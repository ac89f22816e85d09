package apiproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/supervise-dev/supervise/notify"
)

// ErrUpstream is returned by Start when a base URL in supervise's
// environment is not an absolute http or https URL.
var ErrUpstream = errors.New("apiproxy: bad upstream base URL")

// maxBody bounds a request body the proxy reads to derive events; a
// larger one is forwarded unread (no events). maxJSON bounds a non-stream
// answer kept for parsing, maxErrBody a limit error's body.
const (
	maxHeader  = 64 << 10
	maxBody    = 32 << 20
	maxJSON    = 32 << 20
	maxErrBody = 64 << 10
)

// upstreams are the providers' environment variables and public
// endpoints.
var upstreams = [...]struct {
	env, def string
}{
	Anthropic: {"ANTHROPIC_BASE_URL", "https://api.anthropic.com"},
	OpenAI:    {"OPENAI_BASE_URL", "https://api.openai.com/v1"},
	Gemini:    {"GOOGLE_GEMINI_BASE_URL", "https://generativelanguage.googleapis.com"},
}

// Config configures a Proxy. The zero value is usable.
type Config struct {
	// Env reads supervise's own environment, for the upstream base URLs
	// (ANTHROPIC_BASE_URL, OPENAI_BASE_URL, GOOGLE_GEMINI_BASE_URL); an
	// empty value means the provider's public endpoint. nil = os.Getenv.
	Env func(string) string
	// Sink receives each derived event, in order per session, from the
	// proxy's request goroutines while it holds the tracker's lock: it
	// must not block (queue the event and return).
	Sink func(Event)
	// StreamStall reports a Stall for a streamed answer to a main request
	// that sends no content event (keep-alive pings and comments do not
	// count) for this long, from the request on. 0 = off.
	StreamStall time.Duration
	// Now is the clock for RetryAt and for judging stalls (a stall timer
	// that fires re-arms while Now says less than StreamStall passed).
	// nil = time.Now.
	Now func() time.Time
	// Transport carries requests upstream. nil = a clone of
	// http.DefaultTransport (TLS verified with the system roots, proxy
	// from the environment) that asks for no compression.
	Transport http.RoundTripper
	// Log gets the proxy's own errors, each message at most once per 10
	// seconds (with the count of those left out); never a body, a header
	// value, a query or a path. nil = discard.
	Log *slog.Logger
	// Session names the session of requests that carry no session id
	// (Gemini CLI with an API key sends none): one session per proxy.
	// "" = "proxy-" and 8 random hex digits. It must be a valid session id.
	Session string
	// TurnPrefix starts the id of a turn the CLI does not name (all but
	// Codex's): TurnPrefix followed by 1, 2, ... per session. "" = "p",
	// 6 random hex digits and "-", so that turns of different runs of one
	// session never share an id.
	TurnPrefix string
	// Refuse, when set, is asked before a model call is forwarded, once
	// the call's session is known (side requests too): refused true
	// answers the call in the proxy, never forwarding it, with an error
	// in the provider's own format whose text is message (400: each
	// pinned CLI stops at once on it, without retrying), and sends a
	// Refused event. It is called from the proxy's request goroutines
	// and must not block. nil = forward every call.
	Refuse func(session string) (message string, refused bool)
	// UpstreamError, when set, is told of each failure of the upstream, by
	// class: "connect" (it could not be reached: the agent got 502),
	// "5xx" (it answered a server error), "429" (a rate or usage limit:
	// 429, or Anthropic's 529 overloaded). It must not block.
	UpstreamError func(class string)
	// BodyTimeout bounds the time a request body may take to arrive
	// (a body that stalls holds the proxy's memory): past it, the
	// connection is closed and nothing is forwarded. 0 = 60 seconds.
	BodyTimeout time.Duration
	// PrefixTimeout bounds the time a new connection may take to send
	// its request line up to the secret path prefix; past it, the
	// connection is closed without taking a place the agent's calls are
	// served in (a connection whose first bytes differ is answered 404
	// and closed at once). 0 = 5 seconds.
	PrefixTimeout time.Duration
}

// Proxy is one running proxy. Close stops it; whoever Starts it must
// Close it.
type Proxy struct {
	cfg         Config
	ln          net.Listener
	srv         *http.Server
	rp          *httputil.ReverseProxy
	secret      string
	base        string // http://127.0.0.1:PORT/SECRET
	upstream    [len(upstreams)]*url.URL
	track       *tracker
	budget      *budget // bytes of request bodies buffered, all connections together
	answers     *budget // bytes of answers buffered, all connections together
	bodyTimeout time.Duration
	now         func() time.Time
	log         *slog.Logger
	done        chan struct{}
	wg          sync.WaitGroup
	inflight    inflight // the handlers running

	logMu      sync.Mutex
	logged     map[string]time.Time // message -> when last logged
	suppressed map[string]int       // message -> times not logged since
}

// logEvery is the least time between two log lines of one message.
const logEvery = 10 * time.Second

// warn logs msg at most once per logEvery, with the count of the ones
// left out since the last.
func (p *Proxy) warn(msg string, args ...any) {
	p.logMu.Lock()
	now := time.Now()
	if last, ok := p.logged[msg]; ok && now.Sub(last) < logEvery {
		p.suppressed[msg]++
		p.logMu.Unlock()
		return
	}
	n := p.suppressed[msg]
	p.logged[msg], p.suppressed[msg] = now, 0
	p.logMu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	p.log.Warn(msg, args...)
}

// Start listens on 127.0.0.1 on a free port and serves the proxy under a
// random secret path prefix until Close.
func Start(cfg Config) (*Proxy, error) {
	p := &Proxy{cfg: cfg, now: cfg.Now, log: cfg.Log, done: make(chan struct{}),
		logged: map[string]time.Time{}, suppressed: map[string]int{}}
	if p.now == nil {
		p.now = time.Now
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	getenv := cfg.Env
	if getenv == nil {
		getenv = os.Getenv
	}
	for i, u := range upstreams {
		raw := strings.TrimSpace(getenv(u.env))
		if raw == "" {
			raw = u.def
		}
		pu, err := url.Parse(raw)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			// The value is not echoed: it may hold credentials.
			return nil, fmt.Errorf("%w: %s is not an absolute http(s) URL", ErrUpstream, u.env)
		}
		pu.Path = strings.TrimSuffix(pu.Path, "/")
		pu.RawPath = ""
		p.upstream[i] = pu
	}
	p.secret = randomHex(16)
	if cfg.Session == "" {
		cfg.Session = "proxy-" + randomHex(4)
	} else if !validSession(cfg.Session) {
		return nil, fmt.Errorf("apiproxy: Config.Session is not a valid session id")
	}
	if cfg.TurnPrefix == "" {
		cfg.TurnPrefix = "p" + randomHex(3) + "-"
	}
	p.cfg = cfg
	p.track = newTracker(cfg.TurnPrefix, cfg.Sink)
	p.budget = newBudget(maxBuffered)
	p.answers = newBudget(maxAnswerBuffered)
	p.bodyTimeout = cfg.BodyTimeout
	if p.bodyTimeout <= 0 {
		p.bodyTimeout = defaultBodyTimeout
	}
	prefixTimeout := cfg.PrefixTimeout
	if prefixTimeout <= 0 {
		prefixTimeout = defaultPrefixTimeout
	}
	p.track.warn = p.warn
	tr := cfg.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Ask for identity: the proxy reads the stream as it passes.
		t.DisableCompression = true
		tr = t
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      tr,
		FlushInterval:  -1, // flush after every write: streams pass event by event
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apiproxy: listen: %w", err)
	}
	p.ln = newGateListener(ln, p.secret, prefixTimeout)
	p.base = "http://" + ln.Addr().String() + "/" + p.secret
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		// The CLIs send a few KiB of headers; with maxConns, this bounds
		// what header floods cost.
		MaxHeaderBytes: maxHeader,
		// Server errors name connections, never contents.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.srv.Serve(p.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.Error("api proxy: serving failed", "err", err)
		}
	}()
	return p, nil
}

// Env returns the agent's environment entries that point each provider's
// SDK at the proxy:
// ANTHROPIC_BASE_URL=http://127.0.0.1:PORT/SECRET/anthropic, and the same
// with /openai for OPENAI_BASE_URL and /gemini for GOOGLE_GEMINI_BASE_URL.
func (p *Proxy) Env() []string {
	out := make([]string, 0, len(upstreams))
	for i, u := range upstreams {
		out = append(out, u.env+"="+p.URL(Provider(i)))
	}
	return out
}

// URL returns the base URL the agent uses for provider.
func (p *Proxy) URL(provider Provider) string { return p.base + "/" + provider.String() }

// Session returns the session id of requests that name none.
func (p *Proxy) Session() string { return p.cfg.Session }

// closeWait bounds Close's wait for the handlers its cut streams end.
const closeWait = 2 * time.Second

// Close stops the proxy: the listener closes and open streams are cut;
// what the handlers derive from the traffic up to the cut (the end of a
// turn whose final answer the agent read just before it exited) is sent,
// and no event is sent once Close returns. It waits at most closeWait for
// the handlers: each ends as soon as its connections are closed.
func (p *Proxy) Close() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	close(p.done)
	err := p.srv.Close()
	if !p.inflight.close(closeWait) {
		p.log.Warn("api proxy: a request was still being handled after its connection was cut: what it saw is not counted",
			"waited", closeWait.String())
	}
	p.track.close()
	p.wg.Wait()
	return err
}

// inflight counts the handlers running, so that Close can wait for them;
// once closed, it admits none.
type inflight struct {
	mu     sync.Mutex
	n      int
	closed bool
	idle   chan struct{} // made by close when handlers run; closed when the last ends
}

// enter admits a handler; false once closed.
func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.n++
	return true
}

// leave ends a handler that enter admitted.
func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// close admits no more handlers and waits, at most d, for the running
// ones to end; false if some still run.
func (f *inflight) close(d time.Duration) bool {
	f.mu.Lock()
	f.closed = true
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	idle := make(chan struct{})
	f.idle = idle
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// exchange is one proxied request, carried in its context.
type exchange struct {
	provider Provider
	rest     string // the path after /SECRET/PROVIDER
	session  string
	req      request
	parsed   bool     // the body was read: events may be derived
	answers  *reserve // the buffers of its answer (a model call)
	stall    *stallTimer

	mu   sync.Mutex
	over bool // the handler returned
}

type ctxKey struct{}

// ServeHTTP routes /SECRET/PROVIDER/... upstream; anything else is 404
// and not forwarded.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.inflight.enter() {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer p.inflight.leave()
	prov, rest, ok := p.route(r.URL.EscapedPath())
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// WebSockets (Codex's Responses WebSocket) are not carried: the
		// proxy could not read them. Codex falls back to HTTP streaming.
		http.NotFound(w, r)
		return
	}
	ex := &exchange{provider: prov, rest: rest, session: p.cfg.Session}
	path, err := url.PathUnescape(rest)
	if err != nil {
		path = rest
	}
	if a := classify(prov, r.Method, path); a != apiNone {
		ex.req.api = a
		// The body is read only within the shared budget and its
		// deadline; a body the client compressed and one over maxBody
		// are forwarded unread (their session from the headers, their
		// answer still read for usage); one the budget cannot hold now
		// is refused.
		held, ok := p.readBody(w, r, ex, a, path)
		defer p.budget.give(held)
		if !ok {
			return
		}
		if p.cfg.Refuse != nil {
			if msg, refused := p.cfg.Refuse(ex.session); refused {
				// Answered here, never forwarded: the provider's own error
				// format, so that the CLI stops at once.
				p.track.refused(prov, ex.session)
				writeRefusal(w, a, msg)
				return
			}
		}
		// What reads the answer's tokens is held before the call goes:
		// nothing another call holds can leave it uncounted.
		if ex.answers = newReserve(p.answers, answerFloor); ex.answers == nil {
			p.warn("api proxy: the proxy's buffers for answers are full: a request refused (503)",
				"provider", prov.String(), "budget_bytes", maxAnswerBuffered)
			writeBusy(w, a)
			return
		}
		defer ex.answers.release()
		// Only main requests: a side request's stream (a title) does not
		// hold the agent up.
		if ex.parsed && ex.req.main && ex.req.stream && p.cfg.StreamStall > 0 {
			ex.stall = p.startStall(ex)
			defer ex.stall.stop()
		}
	}
	defer func() {
		ex.mu.Lock()
		ex.over = true
		ex.mu.Unlock()
	}()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, ex)))
}

// route splits /SECRET/PROVIDER/REST; ok is false for any other path.
func (p *Proxy) route(path string) (Provider, string, bool) {
	rest, ok := strings.CutPrefix(path, "/")
	if !ok {
		return 0, "", false
	}
	secret, rest, _ := strings.Cut(rest, "/")
	if subtle.ConstantTimeCompare([]byte(secret), []byte(p.secret)) != 1 {
		return 0, "", false
	}
	name, rest, _ := strings.Cut(rest, "/")
	for i := range upstreams {
		if Provider(i).String() == name {
			return Provider(i), "/" + rest, true
		}
	}
	return 0, "", false
}

// rewrite points the outgoing request at the provider's upstream: its
// base URL's path followed by the rest of the request's path, the query
// kept. Headers pass unchanged but for the hop-by-hop ones (removed by
// ReverseProxy), Host (the upstream's) and Accept-Encoding (removed, so
// that the answer comes back as identity and can be read as it passes).
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	ex := pr.In.Context().Value(ctxKey{}).(*exchange)
	u := p.upstream[ex.provider]
	out := pr.Out
	rest, err := url.PathUnescape(ex.rest)
	if err != nil {
		rest = ex.rest
	}
	out.URL.Scheme, out.URL.Host = u.Scheme, u.Host
	// Path and RawPath both: the path goes upstream as the client
	// escaped it.
	out.URL.Path = u.Path + rest
	out.URL.RawPath = u.EscapedPath() + ex.rest
	if u.RawQuery != "" {
		if out.URL.RawQuery == "" {
			out.URL.RawQuery = u.RawQuery
		} else {
			out.URL.RawQuery = u.RawQuery + "&" + out.URL.RawQuery
		}
	}
	if u.User != nil {
		out.URL.User = u.User
	}
	out.Host = ""
	out.Header.Del("Accept-Encoding")
}

// errorHandler answers 502 when the upstream cannot be reached. It logs
// the error's kind, never the URL (it may carry a key in its query).
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ex := r.Context().Value(ctxKey{}).(*exchange)
	if ex.stall != nil {
		ex.stall.stop()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if r.Context().Err() == nil {
		p.warn("api proxy: the upstream cannot be reached: the agent gets 502", "provider", ex.provider.String(), "err", err)
		p.upstreamError("connect")
	}
	w.WriteHeader(http.StatusBadGateway)
}

// modifyResponse wraps the answer's body so that it is read as it passes
// to the client. Nothing is changed in it.
func (p *Proxy) modifyResponse(resp *http.Response) error {
	ex := resp.Request.Context().Value(ctxKey{}).(*exchange)
	switch {
	case limitStatus(resp.StatusCode):
		p.upstreamError("429")
	case resp.StatusCode >= 500:
		p.upstreamError("5xx")
	}
	if ex.req.api == apiNone {
		return nil
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		// The upstream refused the caller: whoever sent it, it opens no
		// turn and names no session.
		if ex.stall != nil {
			ex.stall.stop()
		}
		return nil
	}
	// The upstream took the call: now it is a step of its session's turn.
	if ex.parsed {
		p.track.request(ex.provider, ex.session, ex.req)
	}
	tb := &tapBody{rc: resp.Body, p: p, ex: ex, status: resp.StatusCode, header: resp.Header}
	switch {
	case limitStatus(resp.StatusCode):
		tb.keep = maxErrBody
	case resp.StatusCode >= 300:
		// Other errors end nothing: the CLI retries 5xx itself and
		// decides what a 4xx means; its hooks or its next request say.
		if ex.stall != nil {
			ex.stall.stop()
		}
		return nil
	case !identity(resp.Header.Get("Content-Encoding")):
		// Compressed although not asked for: passed through unread.
		if ex.stall != nil {
			ex.stall.stop()
		}
		return nil
	case strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream"):
		tb.ans = &answer{api: ex.req.api}
		tb.sse = &sseParser{event: tb.event, budget: ex.answers}
	default:
		tb.ans = &answer{api: ex.req.api}
		tb.keep = maxJSON
		if ex.stall != nil {
			ex.stall.stop()
		}
	}
	resp.Body = tb
	return nil
}

// identity reports whether a Content-Encoding leaves the bytes as they are.
func identity(enc string) bool { return enc == "" || strings.EqualFold(enc, "identity") }

// tapBody passes an answer's body through and reads it on the way.
type tapBody struct {
	rc     io.ReadCloser
	p      *Proxy
	ex     *exchange
	status int
	header http.Header
	ans    *answer    // nil for a limit error
	sse    *sseParser // nil for a body read whole
	keep   int        // bytes of a whole body to keep
	buf    []byte
	held   int64 // budget held by buf and the SSE parser
	over   bool  // a limit error's body too large to keep
	cut    bool  // an answer that could not be held: cut (cutAnswer)
	eof    bool
	// delivered: the answer said it ended, and the client was handed every
	// byte up to that event (the copy asks for more only once it wrote and
	// flushed the last read).
	delivered bool
	once      sync.Once
}

func (b *tapBody) Read(q []byte) (int, error) {
	if b.ans != nil && b.ans.complete {
		b.delivered = true
	}
	if b.cut {
		return 0, errAnswerCut
	}
	n, err := b.rc.Read(q)
	if n > 0 {
		switch {
		case b.sse != nil:
			b.sse.feed(q[:n])
			if b.sse.starved {
				return b.cutAnswer()
			}
		case !b.over:
			var ok bool
			if b.buf, ok = grow(b.ex.answers, b.buf, n, b.keep, &b.held); ok {
				b.buf = append(b.buf, q[:n]...)
			} else if b.ans != nil {
				return b.cutAnswer()
			} else {
				// A limit error's body past maxErrBody: its RetryInfo
				// goes unread, it holds no tokens.
				b.over, b.buf = true, nil
			}
		}
	}
	if err == io.EOF {
		b.eof = true
		b.finish()
	}
	return n, err
}

// errAnswerCut ends the copy of an answer the proxy cannot read: the
// client's connection is cut.
var errAnswerCut = errors.New("apiproxy: an answer the proxy cannot read for its tokens is cut")

// cutAnswer fails closed: an answer whose tokens the proxy could not
// count (its buffers could not hold it) is cut, not passed on whole; the
// bytes of the last read are not passed either.
func (b *tapBody) cutAnswer() (int, error) {
	b.cut = true
	b.p.warn("api proxy: an answer the proxy could not hold to count its tokens is cut: the agent gets a broken answer",
		"provider", b.ex.provider.String(), "budget_bytes", maxAnswerBuffered)
	return 0, errAnswerCut
}

func (b *tapBody) Close() error {
	b.finish()
	return b.rc.Close()
}

// event takes one SSE event of the answer.
func (b *tapBody) event(name, data []byte, kind sseKind) {
	if kind == sseComment || (kind == sseData && keepAlive(name, data)) {
		return
	}
	if b.ex.stall != nil {
		b.ex.stall.content()
	}
	if kind == sseData {
		b.ans.event(name, data)
	}
}

// keepAlive reports whether an SSE event is a keep-alive (Anthropic's
// "ping", or an event without data), which does not count as content.
func keepAlive(name, data []byte) bool {
	switch strings.ToLower(string(name)) {
	case "ping", "keepalive", "keep-alive", "heartbeat":
		return true
	}
	return len(bytes.TrimSpace(data)) == 0
}

// finish derives the answer's events once the body ended or was closed.
func (b *tapBody) finish() {
	b.once.Do(func() {
		ex, t := b.ex, b.p.track
		if ex.stall != nil {
			ex.stall.stop()
		}
		if b.ans == nil {
			// A limit: the body may hold Gemini's RetryInfo.
			var body []byte
			if !b.over {
				body = b.buf
			}
			t.limited(ex.provider, ex.session, ex.req, retryAt(b.header, body, b.p.now()))
			b.buf = nil
			b.ex.answers.give(b.held)
			b.held = 0
			return
		}
		if b.sse != nil {
			if b.eof {
				b.sse.end()
			}
		} else if b.eof && !b.over {
			b.ans.body(b.buf)
		}
		if !b.eof && (!b.delivered || ex.stall.hasFired()) {
			// Cut before its end (the client left, the upstream broke):
			// tokens count, the turn's state stays. An answer whose final
			// event reached the client is whole to the agent, though the
			// stream's own end never came: an agent may exit as soon as it
			// read its last answer (Codex does). Not when the stream was
			// reported stalled: that agent was still waiting for the end
			// (Claude Code waits for it), and is stopped for it.
			b.ans.complete = false
		}
		if b.ans.badUsage {
			b.p.warn("api proxy: an answer's token usage is not a count of tokens: that count is ignored",
				"provider", ex.provider.String())
		}
		t.answer(ex.provider, ex.session, ex.req, b.ans)
		b.buf = nil
		b.ex.answers.give(b.held)
		b.held = 0
		if b.sse != nil {
			b.sse.release()
		}
	})
}

// stallTimer reports a stream that sent no content for the stall time.
type stallTimer struct {
	p     *Proxy
	ex    *exchange
	mu    sync.Mutex
	last  time.Time // Now at the last content (or the request)
	timer *time.Timer
	fired bool
	done  bool
}

func (p *Proxy) startStall(ex *exchange) *stallTimer {
	s := &stallTimer{p: p, ex: ex, last: p.now()}
	s.timer = time.AfterFunc(p.cfg.StreamStall, s.check)
	return s
}

// content marks a content event.
func (s *stallTimer) content() {
	s.mu.Lock()
	s.last = s.p.now()
	s.mu.Unlock()
}

// hasFired reports whether the stall was reported; false for a nil timer.
func (s *stallTimer) hasFired() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired
}

func (s *stallTimer) stop() {
	s.mu.Lock()
	s.done = true
	s.timer.Stop()
	s.mu.Unlock()
}

// check runs when the timer fires: a stall if Now says StreamStall passed
// since the last content, else the timer is armed for what is left.
func (s *stallTimer) check() {
	s.mu.Lock()
	if s.done || s.fired {
		s.mu.Unlock()
		return
	}
	left := s.p.cfg.StreamStall - s.p.now().Sub(s.last)
	if left > 0 {
		s.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	s.fired = true
	s.mu.Unlock()
	s.p.track.stalled(s.ex.provider, s.ex.session)
}

// oneLine bounds a detail.
func oneLine(s string) string { return notify.OneLine(s, notify.MaxDetailLen) }

// upstreamError tells Config.UpstreamError of a failure of class.
func (p *Proxy) upstreamError(class string) {
	if p.cfg.UpstreamError != nil {
		p.cfg.UpstreamError(class)
	}
}
