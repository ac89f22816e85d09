package apiproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// TestRefuse: a call Config.Refuse refuses is answered by the proxy in
// the provider's own error format, with the callback's message, and never
// reaches the upstream; it sends Refused and changes no turn. A session
// the callback lets through is forwarded as before.
func TestRefuse(t *testing.T) {
	const msg = "over the budget (--max-tokens 10): supervise resume s1"
	for _, c := range []struct {
		name     string
		env      string
		server   func(func(mockapi.Request) mockapi.Reply) *mockapi.Server
		provider Provider
		path     string
		header   http.Header
		body     []byte
		// check the error body's shape, message included
		check func(t *testing.T, body []byte)
	}{
		{"anthropic", "ANTHROPIC_BASE_URL", mockapi.Anthropic, Anthropic, "/v1/messages",
			http.Header{"X-Claude-Code-Session-Id": {"s1"}}, claudeRequest(true), func(t *testing.T, b []byte) {
				var v struct {
					Type  string `json:"type"`
					Error struct{ Type, Message string }
				}
				if json.Unmarshal(b, &v) != nil || v.Type != "error" || v.Error.Type != "invalid_request_error" || v.Error.Message != msg {
					t.Errorf("not an Anthropic error naming the budget: %s", b)
				}
			}},
		{"responses", "OPENAI_BASE_URL", mockapi.OpenAI, OpenAI, "/v1/responses",
			http.Header{"Session-Id": {"s1"}}, codexRequest(true), openAIError(msg)},
		{"chat", "OPENAI_BASE_URL", mockapi.OpenAI, OpenAI, "/v1/chat/completions",
			http.Header{"Session-Id": {"s1"}}, codexRequest(true), openAIError(msg)},
		{"gemini", "GOOGLE_GEMINI_BASE_URL", mockapi.Gemini, Gemini, "/v1beta/models/g:streamGenerateContent?alt=sse",
			http.Header{"X-Gemini-Session-Id": {"s1"}}, geminiRequest(true, false), func(t *testing.T, b []byte) {
				var v struct {
					Error struct {
						Code            int
						Message, Status string
					}
				}
				if json.Unmarshal(b, &v) != nil || v.Error.Code != 400 || v.Error.Status != "FAILED_PRECONDITION" || v.Error.Message != msg {
					t.Errorf("not a google.rpc.Status error naming the budget: %s", b)
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := c.server(nil)
			defer api.Close()
			var asked []string
			p, rec := start(t, map[string]string{c.env: api.URL()}, Config{Refuse: func(s string) (string, bool) {
				asked = append(asked, s)
				return msg, s == "s1"
			}})
			resp, body := post(t, p.URL(c.provider)+c.path, c.header, c.body)
			if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("refused call answered %s %q, want 400 JSON", resp.Status, resp.Header.Get("Content-Type"))
			}
			c.check(t, body)
			if n := len(api.Requests()); n != 0 {
				t.Errorf("%d requests reached the upstream, want 0", n)
			}
			if got := strip(rec.all()); len(got) != 1 || got[0] != (Event{Kind: Refused, Provider: c.provider, Session: "s1"}) {
				t.Errorf("events %+v, want one Refused of s1", got)
			}
			if c.name == "chat" {
				return // the mock serves no Chat Completions
			}
			// Another session passes, and its turn is seen.
			h := http.Header{}
			for k := range c.header {
				h.Set(k, "s2")
			}
			resp, _ = post(t, p.URL(c.provider)+c.path, h, c.body)
			if resp.StatusCode != 200 || len(api.Requests()) != 1 {
				t.Errorf("a session not refused: %s, %d upstream", resp.Status, len(api.Requests()))
			}
			rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnBegin && e.Session == "s2" })
			if len(asked) != 2 || asked[0] != "s1" || asked[1] != "s2" {
				t.Errorf("Refuse asked for %q, want [s1 s2]", asked)
			}
		})
	}
}

func openAIError(msg string) func(*testing.T, []byte) {
	return func(t *testing.T, b []byte) {
		var v struct {
			Error struct {
				Message, Type, Code string
			}
		}
		if json.Unmarshal(b, &v) != nil || v.Error.Type != "invalid_request_error" || v.Error.Code != "supervise_refused" || v.Error.Message != msg {
			t.Errorf("not an OpenAI error naming the budget: %s", b)
		}
	}
}

// TestRefuseUnreadBody: a body the proxy does not read (compressed) is
// refused too, by the session its headers name: compressing does not get
// around a budget.
func TestRefuseUnreadBody(t *testing.T) {
	api := mockapi.Anthropic(nil)
	defer api.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{Refuse: func(s string) (string, bool) {
		return "no", s == "s1"
	}})
	resp, _ := post(t, p.URL(Anthropic)+"/v1/messages", http.Header{"Content-Encoding": {"zstd"}, "X-Claude-Code-Session-Id": {"s1"}}, claudeRequest(true))
	if resp.StatusCode != 400 || len(api.Requests()) != 0 {
		t.Fatalf("%s, %d upstream: want 400, 0", resp.Status, len(api.Requests()))
	}
	if got := rec.all(); len(got) != 1 || got[0].Kind != Refused {
		t.Fatalf("events %+v", got)
	}
}

// TestUpstreamRefusesCaller: a call the upstream answers 401 or 403 (a
// caller without the agent's credentials) opens no turn and names no
// session: no event at all, and a later call of the agent's own opens its
// turn as the first.
func TestUpstreamRefusesCaller(t *testing.T) {
	for _, code := range []int{401, 403} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			var n atomic.Int32
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(code)
					io.WriteString(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "data: {\"type\":\"response.completed\",\"response\":{\"object\":\"response\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":4}}}\n\n")
			}))
			defer up.Close()
			p, rec := start(t, map[string]string{"OPENAI_BASE_URL": up.URL}, Config{})
			resp, _ := post(t, p.URL(OpenAI)+"/responses", http.Header{"Session-Id": {"chosen-by-another-user"}}, codexRequest(true))
			if resp.StatusCode != code {
				t.Fatalf("status %s", resp.Status)
			}
			post(t, p.URL(OpenAI)+"/responses", http.Header{"Session-Id": {"agent"}}, codexRequest(true))
			rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnEnd })
			for _, e := range rec.all() {
				if e.Session != "agent" {
					t.Errorf("an event names the refused caller's session: %+v", e)
				}
			}
			if got := rec.all(); got[0].Kind != TurnBegin || got[0].Turn != "t1" {
				t.Errorf("the agent's call is not the first turn: %+v", got)
			}
			p.track.mu.Lock()
			_, known := p.track.sessions["chosen-by-another-user"]
			p.track.mu.Unlock()
			if known {
				t.Error("the refused caller's session is in the proxy's table")
			}
		})
	}
}

// TestCodexResponsesLite: Codex's default model sends its tools as an
// input item (additional_tools) with tool_choice and no tools field,
// under X-Openai-Internal-Codex-Responses-Lite: a main request by its
// shape. A request whose turn metadata names another kind than "turn" is
// a side request whatever it offers. Bodies as Codex 0.171.0 sent them
// to the mock (trimmed).
func TestCodexResponsesLite(t *testing.T) {
	lite := mustJSON(map[string]any{"model": "gpt-6.2-sol", "stream": true, "tool_choice": "auto", "parallel_tool_calls": false,
		"input": []any{
			map[string]any{"type": "additional_tools", "id": "at_1", "role": "developer", "tools": []any{
				map[string]any{"type": "namespace", "name": "functions", "tools": []any{map[string]any{"type": "custom", "name": "exec"}}}}},
			map[string]any{"type": "message", "id": "m1", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "say hi"}}},
		}, "store": false, "prompt_cache_key": "th-1"})
	meta := func(kind string) string {
		return `{"session_id":"th-1","thread_id":"th-1","turn_id":"turn-1","request_kind":"` + kind + `","model":"gpt-6.2-sol"}`
	}
	h := func(kind string) http.Header {
		return http.Header{"Session-Id": {"th-1"}, "X-Codex-Turn-Metadata": {meta(kind)},
			"X-Openai-Internal-Codex-Responses-Lite": {"true"}}
	}
	noTools := mustJSON(map[string]any{"model": "m", "stream": true, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": "Summarize"}}})
	for _, c := range []struct {
		name string
		h    http.Header
		body []byte
		main bool
	}{
		{"lite turn", h("turn"), lite, true},
		{"lite, no metadata", http.Header{"Session-Id": {"th-1"}}, lite, true},
		{"tools field", h("turn"), codexRequest(true), true},
		{"tool_choice none, no tools", http.Header{}, mustJSON(map[string]any{"tool_choice": "none", "input": []any{}}), false},
		{"plain side request", http.Header{}, noTools, false},
		{"another kind", h("compaction"), lite, false},
		{"another kind with tools", h("title"), codexRequest(true), false},
		{"empty additional_tools", http.Header{}, mustJSON(map[string]any{"input": []any{map[string]any{"type": "additional_tools", "tools": []any{}}}}), false},
	} {
		r := parseRequest(apiResponses, "/v1/responses", c.h, c.body)
		if r.main != c.main {
			t.Errorf("%s: main %v, want %v", c.name, r.main, c.main)
		}
	}
	if r := parseRequest(apiResponses, "/v1/responses", h("turn"), lite); r.session != "th-1" || r.turn != "turn-1" {
		t.Errorf("session %q turn %q, want th-1 turn-1", r.session, r.turn)
	}
}

// TestUsageCounts: counts that are not counts (negative, fractions,
// exponents, strings, beyond int64) are ignored and logged; sums
// saturate at 2^63-1 instead of wrapping (2^62 + 2^62, 2^63-1 + 1).
func TestUsageCounts(t *testing.T) {
	const max = math.MaxInt64
	p62 := int64(1) << 62
	for _, c := range []struct {
		name    string
		usage   string // message_start usage
		in, out int64
		bad     bool
	}{
		{"plain", `{"input_tokens":10,"output_tokens":5}`, 10, 5, false},
		{"2^62 + 2^62", fmt.Sprintf(`{"input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}`, p62, p62), max, 1, false},
		{"2^63-1 + 1", fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":1,"output_tokens":%d}`, int64(max), int64(max)), max, max, false},
		{"negative", `{"input_tokens":-5,"output_tokens":5}`, 0, 5, true},
		{"fraction", `{"input_tokens":1.5,"output_tokens":5}`, 0, 5, true},
		{"exponent", `{"input_tokens":1e3,"output_tokens":5}`, 0, 5, true},
		{"string", `{"input_tokens":"7","output_tokens":5}`, 0, 5, true},
		{"beyond int64", `{"input_tokens":9223372036854775808,"output_tokens":5}`, 0, 5, true},
	} {
		a := &answer{api: apiMessages}
		a.event(nil, []byte(`{"type":"message_start","message":{"type":"message","usage":`+c.usage+`}}`))
		if a.in != c.in || a.out != c.out || a.badUsage != c.bad {
			t.Errorf("%s: in %d out %d bad %v, want %d %d %v", c.name, a.in, a.out, a.badUsage, c.in, c.out, c.bad)
		}
	}
	// The other APIs.
	r := &answer{api: apiResponses}
	r.event(nil, []byte(fmt.Sprintf(`{"type":"response.completed","response":{"object":"response","status":"completed","usage":{"input_tokens":%d,"output_tokens":-1}}}`, int64(max))))
	if r.in != max || r.out != 0 || !r.badUsage || !r.complete {
		t.Errorf("responses: %+v", r)
	}
	g := &answer{api: apiGemini}
	g.event(nil, []byte(fmt.Sprintf(`{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":%d,"thoughtsTokenCount":%d}}`, p62, p62)))
	if g.in != 3 || g.out != max || g.badUsage {
		t.Errorf("gemini: %+v", g)
	}
	ch := &answer{api: apiChat}
	ch.event(nil, []byte(`{"choices":[],"usage":{"prompt_tokens":2.5,"completion_tokens":4}}`))
	if ch.in != 0 || ch.out != 4 || !ch.badUsage {
		t.Errorf("chat: %+v", ch)
	}
}

// TestUsageLogged: an answer with a bad count still gives its good ones
// as Usage, and the proxy logs it (rate-limited: once for two answers).
func TestUsageLogged(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":-3,\"output_tokens\":2}}}\n\n"+
			"data: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	var logs syncBuffer
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL}, Config{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 2 {
		post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(false))
	}
	rec.waitFor(t, 2, func(e Event) bool { return e.Kind == Usage && e.Input == 0 && e.Output == 2 })
	n := strings.Count(logs.String(), "token usage is not a count")
	if n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, logs.String())
	}
}

// TestSSEBoundBeforeAppend: data lines without the blank line that ends
// an event (a hostile or broken upstream) hold the parser to maxLine: the
// newline joining each further line is not appended once the event is
// cut.
func TestSSEBoundBeforeAppend(t *testing.T) {
	var kinds []sseKind
	s := &sseParser{event: func(_, _ []byte, k sseKind) { kinds = append(kinds, k) }, budget: newBudget(maxBuffered)}
	line := []byte("data: " + strings.Repeat("x", 1<<16) + "\n")
	for range 2 * maxLine / len(line) {
		s.feed(line)
	}
	// Then a million short lines: each would have added a byte.
	short := bytes.Repeat([]byte("data: x\n"), 1<<20)
	s.feed(short)
	if cap(s.data) > maxLine || cap(s.line) > maxLine {
		t.Fatalf("parser holds data %d line %d bytes, bound %d", cap(s.data), cap(s.line), maxLine)
	}
	if s.held > 2*maxLine {
		t.Fatalf("budget held %d", s.held)
	}
	s.feed([]byte("\n"))
	if len(kinds) != 1 || kinds[0] != sseCut {
		t.Fatalf("events %v, want one cut", kinds)
	}
	s.release()
	if s.held != 0 {
		t.Fatal("release kept budget")
	}
}

// TestBudgetShared: bodies are buffered within one budget for all
// connections. Bodies that stall mid-way hold it; one more that does not
// fit is refused at once (503, never forwarded, never waiting, never
// growing the proxy), and each stalled body is cut at BodyTimeout, after
// which the budget is whole again.
func TestBudgetShared(t *testing.T) {
	api := mockapi.Anthropic(nil)
	defer api.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{BodyTimeout: 500 * time.Millisecond})
	// Two stalled bodies of maxBody-1 bytes announced, all but one byte sent.
	conns := stallUploads(t, p, 2, maxBody-1, maxBuffered-2*(maxBody-1))
	// A third, whole: over what is left, so refused: nothing reaches the
	// upstream and nothing changes.
	resp, _ := post(t, p.URL(Anthropic)+"/v1/messages", http.Header{"X-Claude-Code-Session-Id": {"s3"}}, claudeRequest(true))
	if resp.StatusCode != http.StatusServiceUnavailable || len(api.Requests()) != 0 {
		t.Fatalf("the request over the budget: %s, %d upstream", resp.Status, len(api.Requests()))
	}
	if e := rec.all(); len(e) != 0 {
		t.Errorf("a refused request sent events: %+v", e)
	}
	// The stalled bodies are cut: their connections close, nothing of them
	// went upstream, and the budget is whole again.
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(wait))
		// EOF or a reset (the proxy closed it with bytes unread): closed.
		if _, err := io.Copy(io.Discard, c); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("stalled connection not closed by the proxy: %v", err)
		}
		c.Close()
	}
	waitBudget(t, p, func(left int64) bool { return left == maxBuffered })
	if n := len(api.Requests()); n != 0 {
		t.Errorf("%d requests upstream, want 0", n)
	}
}

func waitBudget(t *testing.T, p *Proxy, ok func(left int64) bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		p.budget.mu.Lock()
		left := p.budget.left
		p.budget.mu.Unlock()
		if ok(left) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("budget left %d after %v", left, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAnswerBudget: a non-stream answer is kept for parsing within its
// call's floor and then the answers' budget, and given back at its end;
// the request bodies' budget plays no part in it.
func TestAnswerBudget(t *testing.T) {
	big := `{"type":"message","stop_reason":"end_turn","content":[{"type":"text","text":"` + strings.Repeat("y", 1<<20) + `"}],"usage":{"input_tokens":1,"output_tokens":2}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, big)
	}))
	defer up.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL}, Config{})
	// The request bodies' budget all but spent: a small body still fits.
	if !p.budget.take(maxBuffered - 1<<19) {
		t.Fatal("take")
	}
	_, b := post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(false))
	if string(b) != big {
		t.Fatal("answer changed")
	}
	rec.waitFor(t, 1, func(e Event) bool { return e.Kind == Usage && e.Output == 2 })
	p.budget.give(maxBuffered - 1<<19)
	waitBudget(t, p, func(left int64) bool { return left == maxBuffered })
	waitAnswers(t, p, func(left int64) bool { return left == maxAnswerBuffered })
}

// TestSessionFlood: a flood of fresh session ids, each opening a turn,
// is bounded: at most maxSessions are tracked, at most maxAdmitted ever
// named by one proxy, and the rest passes without events.
func TestSessionFlood(t *testing.T) {
	for _, open := range []bool{false, true} {
		tr := newTracker("t", func(Event) {})
		var warned int
		tr.warn = func(string, ...any) { warned++ }
		for i := range maxAdmitted + 2000 {
			id := "s" + strconv.Itoa(i)
			tr.request(OpenAI, id, request{api: apiResponses, main: true})
			if !open {
				tr.answer(OpenAI, id, request{main: true}, &answer{complete: true})
			}
		}
		if len(tr.sessions) > maxSessions || tr.admitted > maxAdmitted || tr.dropped < 2000 || warned == 0 {
			t.Errorf("open turns %v: %d sessions tracked (bound %d), admitted %d (bound %d), dropped %d, warned %d",
				open, len(tr.sessions), maxSessions, tr.admitted, maxAdmitted, tr.dropped, warned)
		}
	}
}

// TestChunkedBodyAtLimit: a body of unannounced length (chunked) is read
// up to maxBody exactly; one byte more and it is forwarded unread.
func TestChunkedBodyAtLimit(t *testing.T) {
	api := mockapi.Anthropic(nil)
	defer api.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{})
	body := func(size int) []byte {
		b := claudeRequest(true)
		pad := size - len(b) - len(`,"pad":""`)
		return append(b[:len(b)-1:len(b)-1], []byte(`,"pad":"`+strings.Repeat("p", pad)+`"}`)...)
	}
	for i, size := range []int{maxBody, maxBody + 1} {
		b := body(size)
		if len(b) != size {
			t.Fatalf("body of %d bytes, want %d", len(b), size)
		}
		req, _ := http.NewRequest(http.MethodPost, p.URL(Anthropic)+"/v1/messages", io.MultiReader(bytes.NewReader(b)))
		req.Header.Set("X-Claude-Code-Session-Id", "s"+strconv.Itoa(i))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if req.ContentLength != 0 || resp.StatusCode != 200 {
			t.Fatalf("content length %d (want unannounced), %s", req.ContentLength, resp.Status)
		}
	}
	rec.waitFor(t, 2, func(e Event) bool { return e.Kind == Usage })
	for _, e := range rec.all() {
		if e.Kind == TurnBegin && e.Session != "s0" {
			t.Errorf("the body over the limit was read: %+v", e)
		}
	}
	if len(rec.waitFor(t, 1, func(e Event) bool { return e.Kind == TurnBegin })) != 1 {
		t.Error("want one turn: the body at the limit")
	}
	if q := api.Requests(); len(q) != 2 || len(q[1].Body) != maxBody+1 {
		t.Errorf("upstream got %d requests", len(q))
	}
}
