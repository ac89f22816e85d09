package apiproxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// budgetOf is the supervisor's token budget as the proxy meets it
// (machine.Refusal): past limit tokens, counted from the Usage events the
// proxy sent, a call is refused. perSession: --max-tokens (a session's own
// spend); else --max-tokens-total (every session's).
func budgetOf(rec *recorder, limit int64, perSession bool) func(string) (string, bool) {
	return func(session string) (string, bool) {
		var spent int64
		for _, e := range rec.all() {
			if e.Kind == Usage && (!perSession || e.Session == session) {
				spent += e.Input + e.Output
			}
		}
		if spent > limit {
			return "over the budget: " + strconv.FormatInt(spent, 10) + " tokens", true
		}
		return "", false
	}
}

// stallUploads opens n connections, each announcing a model call's body
// of size bytes and sending all but its last byte, and returns them once
// the proxy's request buffers hold all of them (left is what they leave).
func stallUploads(t *testing.T, p *Proxy, n, size int, left int64) []net.Conn {
	t.Helper()
	host, path, _ := strings.Cut(strings.TrimPrefix(p.URL(Anthropic), "http://"), "/")
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /%s/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, size)
		go c.Write(make([]byte, size-1))
	}
	waitBudget(t, p, func(l int64) bool { return l <= left })
	return conns
}

// TestBudgetNotStarved (issue 46 B1): the agent holds two unfinished
// uploads of 32 MiB, which fill the proxy's 64 MiB of request buffers;
// then it makes five calls whose answers carry 1 100 tokens each, under
// a budget of 1 000 (per session, and for all sessions). Before, the
// answers could not be buffered either and no token was counted: all five
// passed. Now no call is forwarded uncounted: while the uploads hold the
// buffers each call is refused (503, a body saying why, nothing
// forwarded); once they are gone, the first call's 1 100 tokens are
// counted and the budget refuses the four others.
func TestBudgetNotStarved(t *testing.T) {
	for _, perSession := range []bool{true, false} {
		name := map[bool]string{true: "max-tokens", false: "max-tokens-total"}[perSession]
		t.Run(name, func(t *testing.T) {
			api := mockapi.Anthropic(func(mockapi.Request) mockapi.Reply {
				return mockapi.Reply{Kind: mockapi.Text, Text: "ok", InputTokens: 1000, OutputTokens: 100}
			})
			defer api.Close()
			// The budget reads the events of the recorder start makes.
			var events atomic.Pointer[recorder]
			p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{BodyTimeout: time.Hour,
				Refuse: func(s string) (string, bool) { return budgetOf(events.Load(), 1000, perSession)(s) }})
			events.Store(rec)
			conns := stallUploads(t, p, 2, maxBody-1, 2)
			call := func(i int) (*http.Response, []byte) {
				session := "s1"
				if !perSession {
					session = "s" + strconv.Itoa(i)
				}
				return post(t, p.URL(Anthropic)+"/v1/messages", http.Header{"X-Claude-Code-Session-Id": {session}},
					claudeRequest(true))
			}
			for i := range 5 {
				resp, b := call(i)
				if resp.StatusCode == http.StatusOK {
					t.Errorf("call %d forwarded while the buffers are full: %d upstream, %d tokens counted",
						i, len(api.Requests()), spent(rec))
					continue
				}
				if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "buffers are full") ||
					!strings.Contains(string(b), `"api_error"`) {
					t.Errorf("call %d: %s %s, want 503 saying the buffers are full", i, resp.Status, b)
				}
			}
			if n := len(api.Requests()); n != 0 {
				t.Fatalf("%d calls went upstream uncounted (%d tokens counted)", n, spent(rec))
			}
			// The uploads end: the buffers are whole again, and the budget
			// counts and refuses.
			for _, c := range conns {
				c.Close()
			}
			waitBudget(t, p, func(l int64) bool { return l == maxBuffered })
			var codes []int
			for i := range 5 {
				resp, _ := call(i)
				codes = append(codes, resp.StatusCode)
			}
			if fmt.Sprint(codes) != "[200 400 400 400 400]" || len(api.Requests()) != 1 || spent(rec) != 1100 {
				t.Errorf("statuses %v, %d upstream, %d tokens counted; want one call of 1100 tokens, then refusals",
					codes, len(api.Requests()), spent(rec))
			}
		})
	}
}

func spent(rec *recorder) int64 {
	var n int64
	for _, e := range rec.all() {
		if e.Kind == Usage {
			n += e.Input + e.Output
		}
	}
	return n
}

// TestAnswerCutWhenUnheld: an answer that outgrows its call's floor while
// the answers' buffers are spent is cut (the client's connection breaks
// before the answer's end), never passed whole with its tokens uncounted;
// a call that cannot get its floor is refused (503) before it is
// forwarded; and the buffers are whole again afterwards.
func TestAnswerCutWhenUnheld(t *testing.T) {
	big := `{"type":"message","stop_reason":"end_turn","content":[{"type":"text","text":"` + strings.Repeat("y", 1<<20) +
		`"}],"usage":{"input_tokens":1,"output_tokens":2}}`
	var calls int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, big)
	}))
	defer up.Close()
	p, rec := start(t, map[string]string{"ANTHROPIC_BASE_URL": up.URL}, Config{})
	others := int64(maxAnswerBuffered - answerFloor)
	if !p.answers.take(others) {
		t.Fatal("take")
	}
	req, _ := http.NewRequest(http.MethodPost, p.URL(Anthropic)+"/v1/messages", strings.NewReader(string(claudeRequest(false))))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || string(b) == big {
		t.Errorf("an answer the proxy could not hold passed whole (%d bytes, err %v)", len(b), err)
	}
	// The floor is back: with every byte of it taken, a call is refused.
	waitAnswers(t, p, func(left int64) bool { return left == answerFloor })
	if !p.answers.take(answerFloor) {
		t.Fatal("take")
	}
	resp, b = post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(false))
	if resp.StatusCode != http.StatusServiceUnavailable || calls != 1 {
		t.Errorf("with no floor left: %s %s, %d calls upstream, want 503 and none forwarded", resp.Status, b, calls)
	}
	p.answers.give(others + answerFloor)
	post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(false))
	rec.waitFor(t, 1, func(e Event) bool { return e.Kind == Usage && e.Output == 2 })
	waitAnswers(t, p, func(left int64) bool { return left == maxAnswerBuffered })
}

func waitAnswers(t *testing.T, p *Proxy, ok func(left int64) bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		p.answers.mu.Lock()
		left := p.answers.left
		p.answers.mu.Unlock()
		if ok(left) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("answers' budget left %d after %v", left, wait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUsageBeyondSessionTable (issue 46, a budget a new session id must
// not escape): an agent that names more sessions than the proxy tracks
// (maxAdmitted over a run; or a new one while every tracked session has a
// turn open) still has every answer's tokens sent. Before, the usage of
// sessions beyond the table was dropped with their turn events: past
// 4 096 fresh ids, answers were free under --max-tokens-total.
func TestUsageBeyondSessionTable(t *testing.T) {
	for _, open := range []bool{false, true} {
		var usage []Event
		tr := newTracker("t", func(e Event) {
			if e.Kind == Usage {
				usage = append(usage, e)
			}
		})
		tr.warn = func(string, ...any) {}
		n := maxAdmitted + 100
		if open {
			n = maxSessions + 100
		}
		for i := range n {
			id := "s" + strconv.Itoa(i)
			tr.request(Anthropic, id, request{api: apiMessages, main: true})
			tr.answer(Anthropic, id, request{api: apiMessages, main: true},
				&answer{usage: true, in: 1000, out: 100, complete: true, more: open})
		}
		var tokens int64
		for _, e := range usage {
			tokens += e.Input + e.Output
		}
		if len(usage) != n || tokens != int64(n)*1100 || usage[n-1].Session != "s"+strconv.Itoa(n-1) {
			t.Errorf("open turns %v: %d usage events of %d answers, %d tokens of %d", open, len(usage), n, tokens, int64(n)*1100)
		}
	}
}
