// Package mockapi serves test-only stand-ins for the streaming model APIs of
// Anthropic (Messages), OpenAI (Responses) and Google (Gemini
// streamGenerateContent) on 127.0.0.1, so the real agent CLIs can run under
// supervise without any other network traffic. Each server records every
// request and answers it as the test's script says: text, a shell tool call,
// a stall (the stream stays open until the client goes away or the server is
// closed), an API error, a rate-limit refusal with the provider's retry
// headers, or a stream of keep-alive pings only. Every answer reports token
// usage as its API does (10 input and 5 output tokens unless the reply says
// otherwise).
package mockapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Kind is what a reply does.
type Kind int

const (
	Text  Kind = iota // a text answer that ends the turn
	Tool              // a call of the CLI's shell tool with Command
	Stall             // headers and a first event, then nothing until the client leaves
	Error             // an HTTP error with an API error body
	// Limit is a rate-limit refusal: HTTP Status (default 429; 529 is
	// Anthropic's "overloaded") with the provider's retry hints for
	// RetryAfter: retry-after in seconds and anthropic-ratelimit-requests-*
	// (Anthropic), retry-after and x-ratelimit-*-requests (OpenAI), a
	// google.rpc.RetryInfo retryDelay in the error body (Gemini, which
	// sends no retry header).
	Limit
	// Pings is a stream that sends only keep-alive pings, every Every,
	// until the client leaves or the server closes: Anthropic's
	// "event: ping", an SSE comment ": keep-alive" for OpenAI and Gemini.
	Pings
)

// Reply is the answer to one request.
type Reply struct {
	Kind    Kind
	Text    string // Text
	Command string // Tool: the shell command
	Status  int    // Error: the HTTP status (default 400, which no CLI retries); Limit: 429 or 529 (default 429)

	// InputTokens and OutputTokens are the usage a Text or Tool answer
	// reports (default 10 and 5).
	InputTokens, OutputTokens int
	// RetryAfter is when a Limit says to retry (default 30s; whole
	// seconds in retry-after).
	RetryAfter time.Duration
	// Every is the interval of Pings (default 200ms).
	Every time.Duration
	// Reset is when a UsageLimit lifts (default: RetryAfter from the
	// request, and RetryAfter defaults to 5h for it).
	Reset time.Time
	// Plan is a UsageLimit's plan_type for OpenAI (default "plus").
	Plan string
	// HoldEnd keeps a Text or Tool stream open after its final event,
	// until the client leaves or the server closes: the agent has its
	// whole answer while the stream's own end has not come (a provider's
	// edge may hold a connection so; a CLI exits at the final event).
	HoldEnd bool
}

// Request is one recorded request, with the parts tests ask about.
type Request struct {
	N      int // 1-based arrival order
	Time   time.Time
	Method string
	Path   string
	Header http.Header
	Body   []byte

	// Agent is true for a request of the agent loop (it offers tools),
	// false for a side request (titles, quota probes, counting).
	Agent bool
	// FirstUser is the text of the conversation's first user message,
	// LastUser the text of its last one (for a tool result, its output).
	FirstUser, LastUser string
	// Messages is the number of messages in the conversation sent, Replies
	// the number of those the model wrote (0: a conversation's first call).
	Messages, Replies int
	// ToolResult: the last message carries a tool's result.
	ToolResult bool
	// Session is the CLI's session id as the request carries it (a header
	// or the body's metadata), "" if it carries none.
	Session string
}

// Contains reports whether the request's body contains s.
func (r Request) Contains(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

// provider encodes one API's wire format.
type provider interface {
	// match reports whether the request is a model call of this API.
	match(r *http.Request) bool
	// parse fills the provider-neutral fields of req from its body.
	parse(req *Request)
	// write streams reply; stall is closed when the server shuts down.
	write(w http.ResponseWriter, r *http.Request, req Request, reply Reply, stall <-chan struct{})
}

// Server is one mock API.
type Server struct {
	srv    *httptest.Server
	p      provider
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	reqs   []Request
	script func(Request) Reply
	other  []string // requests this API does not know, "METHOD PATH"
}

// Anthropic serves POST /v1/messages (SSE).
func Anthropic(script func(Request) Reply) *Server { return start(anthropic{}, script) }

// OpenAI serves POST /v1/responses (SSE).
func OpenAI(script func(Request) Reply) *Server { return start(openai{}, script) }

// Gemini serves POST /v1beta/models/MODEL:streamGenerateContent (SSE) and
// :generateContent.
func Gemini(script func(Request) Reply) *Server { return start(gemini{}, script) }

// OpenAI serves POST /v1/responses (SSE).

// Gemini serves POST /v1beta/models/MODEL:streamGenerateContent?alt=sse.

func start(p provider, script func(Request) Reply) *Server {
	s := &Server{p: p, stop: make(chan struct{}), script: script}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("mockapi: listen on 127.0.0.1: %v", err))
	}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: s}}
	s.srv.Start()
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.srv.URL }

// Close ends stalled streams and stops the server.
func (s *Server) Close() {
	s.once.Do(func() { close(s.stop) })
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// SetScript replaces the script for the requests that follow.
func (s *Server) SetScript(script func(Request) Reply) {
	s.mu.Lock()
	s.script = script
	s.mu.Unlock()
}

// Requests returns the model requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// AgentRequests returns the agent-loop requests so far.
func (s *Server) AgentRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Agent {
			out = append(out, r)
		}
	}
	return out
}

// Other returns the requests that were not model calls ("METHOD PATH").
func (s *Server) Other() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.other...)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !s.p.match(r) {
		s.mu.Lock()
		s.other = append(s.other, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		http.NotFound(w, r)
		return
	}
	req := Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.p.parse(&req)
	s.mu.Lock()
	req.N = len(s.reqs) + 1
	s.reqs = append(s.reqs, req)
	script := s.script
	s.mu.Unlock()
	reply := Reply{Kind: Text, Text: "OK."}
	if script != nil {
		reply = script(req)
	}
	switch reply.Kind {
	case Error:
		if reply.Status == 0 {
			reply.Status = http.StatusBadRequest
		}
		if reply.Text == "" {
			reply.Text = "mockapi: the test asked for an error"
		}
	case Limit:
		if reply.Status == 0 {
			reply.Status = http.StatusTooManyRequests
		}
		if reply.RetryAfter <= 0 {
			reply.RetryAfter = 30 * time.Second
		}
		if reply.Text == "" {
			reply.Text = "mockapi: rate limited (the test asked for a limit)"
		}
	case UsageLimit:
		if reply.RetryAfter <= 0 {
			reply.RetryAfter = 5 * time.Hour
		}
	case Pings:
		if reply.Every <= 0 {
			reply.Every = 200 * time.Millisecond
		}
	}
	if reply.InputTokens == 0 {
		reply.InputTokens = 10
	}
	if reply.OutputTokens == 0 {
		reply.OutputTokens = 5
	}
	s.p.write(w, r, req, reply, s.stop)
	if reply.HoldEnd && (reply.Kind == Text || reply.Kind == Tool) {
		hold(r, s.stop)
	}
}

// retrySeconds is a Limit's retry-after value: whole seconds, at least 1.
func retrySeconds(reply Reply) string {
	return fmt.Sprint(max(1, int((reply.RetryAfter+time.Second-1)/time.Second)))
}

// pings sends ping every interval until the client leaves or the server
// stops.
func pings(r *http.Request, stop <-chan struct{}, every time.Duration, ping func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-stop:
			return
		case <-t.C:
			ping()
		}
	}
}

// comment writes an SSE comment line (a keep-alive), flushed.
func (e sse) comment(text string) {
	fmt.Fprintf(e.w, ": %s\n\n", text)
	e.w.(http.Flusher).Flush()
}

// sse writes Server-Sent Events, flushing each.
type sse struct {
	w http.ResponseWriter
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sse{w}
}

func (e sse) event(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	e.w.(http.Flusher).Flush()
}

// hold keeps a stalled stream open until the client leaves or the server
// stops.
func hold(r *http.Request, stop <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-stop:
	}
}

// textOf joins the text parts of a decoded JSON content value: a string, or
// a list of parts with "text" (or, for tool results, "content"/"output").
func textOf(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case []any:
		var parts []string
		for _, p := range v {
			if t := textOf(p); t != "" {
				parts = append(parts, t)
			}
		}
		return strings.Join(parts, "\n")
	case map[string]any:
		for _, k := range []string{"text", "content", "output"} {
			if t := textOf(v[k]); t != "" {
				return t
			}
		}
		if fr, ok := v["functionResponse"].(map[string]any); ok {
			b, _ := json.Marshal(fr["response"])
			return string(b)
		}
	}
	return ""
}

func itoa(n int) string { return fmt.Sprint(n) }
