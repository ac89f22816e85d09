package apiproxy

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// readAnswer parses a recorded answer as the proxy does: an SSE stream fed
// in pieces of n bytes, or a whole JSON body.
func readAnswer(t *testing.T, a api, file string, n int) *answer {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	ans := &answer{api: a}
	if !strings.HasSuffix(file, ".sse") {
		ans.body(raw)
		return ans
	}
	p := &sseParser{event: func(name, data []byte, kind sseKind) {
		if kind == sseData && !keepAlive(name, data) {
			ans.event(name, data)
		}
	}}
	for len(raw) > 0 {
		k := min(n, len(raw))
		p.feed(raw[:k])
		raw = raw[k:]
	}
	p.end()
	return ans
}

type toolWant struct{ id, name, detail string }

// TestAnswers parses each recorded answer, fed whole and a byte at a time.
func TestAnswers(t *testing.T) {
	for _, c := range []struct {
		file            string
		api             api
		tools           []toolWant
		in, out         int64
		complete, final bool
		limited         bool
	}{
		{file: "anthropic-tool.sse", api: apiMessages, tools: []toolWant{{"toolu_01T1x1fJ34qAmk2tNTrN7Up6", "Bash", "npm test"}},
			in: 12 + 100 + 2000, out: 89, complete: true},
		{file: "anthropic-text.sse", api: apiMessages, in: 25, out: 42, complete: true, final: true},
		{file: "anthropic-overloaded.sse", api: apiMessages, in: 30, out: 1, limited: true},
		{file: "anthropic-tool.json", api: apiMessages, tools: []toolWant{{"toolu_01A09q90qw90lq917835lq9", "Read", "/repo/src/parser.go"}},
			in: 2095, out: 503, complete: true},
		{file: "openai-responses-tool.sse", api: apiResponses, tools: []toolWant{{"call_12345xyz", "shell_command", "npm test"}},
			in: 1200, out: 31, complete: true},
		{file: "openai-responses-text.sse", api: apiResponses, in: 1500, out: 320, complete: true, final: true},
		{file: "openai-response-tool.json", api: apiResponses, tools: []toolWant{{"call_patch1", "apply_patch", "*** Begin Patch"}},
			in: 900, out: 60, complete: true},
		{file: "openai-chat-tool.sse", api: apiChat, tools: []toolWant{{"call_abc", "shell", "ls -la"}}, in: 82, out: 17, complete: true},
		{file: "openai-chat-text.sse", api: apiChat, in: 40, out: 3, complete: true, final: true},
		{file: "openai-chat-text.json", api: apiChat, in: 19, out: 10, complete: true, final: true},
		{file: "gemini-tool.sse", api: apiGemini, tools: []toolWant{{"", "run_shell_command", "npm test"}}, in: 1000, out: 100, complete: true},
		{file: "gemini-text.sse", api: apiGemini, in: 900, out: 34, complete: true, final: true},
		{file: "gemini-text-array.json", api: apiGemini, in: 900, out: 4, complete: true, final: true},
	} {
		for _, n := range []int{1 << 20, 1, 7} {
			a := readAnswer(t, c.api, c.file, n)
			var tools []toolWant
			for _, tc := range a.tools {
				tools = append(tools, toolWant{tc.id, tc.name, tc.detail})
			}
			if !reflect.DeepEqual(tools, c.tools) {
				t.Errorf("%s (pieces of %d): tools %q, want %q", c.file, n, tools, c.tools)
			}
			if !a.usage || a.in != c.in || a.out != c.out {
				t.Errorf("%s (pieces of %d): usage %v in %d out %d, want in %d out %d", c.file, n, a.usage, a.in, a.out, c.in, c.out)
			}
			if a.complete != c.complete || a.final() != c.final || a.limited != c.limited {
				t.Errorf("%s (pieces of %d): complete %v final %v limited %v, want %v %v %v", c.file, n,
					a.complete, a.final(), a.limited, c.complete, c.final, c.limited)
			}
		}
	}
}

// recorded is a request recorded from a CLI (testdata/*.request.json).
type recorded struct {
	Method, Path string
	Header       map[string]string
	Body         json.RawMessage
}

func loadRequest(t *testing.T, file string) (http.Header, recorded) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, v := range r.Header {
		h.Set(k, v)
	}
	return h, r
}

// TestRequests reads the requests recorded from the real CLIs.
func TestRequests(t *testing.T) {
	for _, c := range []struct {
		file     string
		provider Provider
		want     request
	}{
		{"claude-code-2.1.197.request.json", Anthropic, request{api: apiMessages, session: "c26b47f2-f019-40f7-b0bd-f1fce6a84002",
			main: true, stream: true, results: []string{"toolu_mock1"}}},
		{"codex-0.171.0.request.json", OpenAI, request{api: apiResponses, session: "01a2329e-e174-79b0-ba44-d95404acbe8c",
			main: true, stream: true, results: []string{"call_mock1"}, turn: "01a2329e-e19d-7370-bd23-e09d71cef07f"}},
		{"gemini-cli-0.61.0.request.json", Gemini, request{api: apiGemini, main: true, stream: true,
			results: []string{"run_shell_command_1796145609720_0"}}},
		{"gemini-cli-0.61.0.side-request.json", Gemini, request{api: apiGemini}},
	} {
		h, r := loadRequest(t, c.file)
		a := classify(c.provider, r.Method, r.Path)
		if a != c.want.api {
			t.Errorf("%s: classified %d, want %d", c.file, a, c.want.api)
		}
		got := parseRequest(a, r.Path, h, r.Body)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.file, got, c.want)
		}
	}
}

// TestClaudeSession: the session in metadata.user_id, in both forms, when
// the header is absent; hostile values are not sessions.
func TestClaudeSession(t *testing.T) {
	const id = "6b7f1bb4-3c52-4a8c-9d2e-0c3a5f1e2d7a"
	for uid, want := range map[string]string{
		`{"device_id":"5ea4","account_uuid":"","session_id":"` + id + `"}`:                 id,
		"user_5ea427261645424b_account_0b1c2d3e-aaaa-bbbb-cccc-111122223333_session_" + id: id,
		"user_5ea4_account__session_" + id:                                                 id,
		`{"session_id":"-rf"}`:                                                             "",
		`{"session_id":"a\u0000b"}`:                                                        "",
		"user_x_session_":                                                                  "",
		`{"session_id":"` + strings.Repeat("a", 300) + `"}`:                                "",
		"": "",
	} {
		if got := claudeUserSession(uid); got != want {
			t.Errorf("claudeUserSession(%.60q) = %q, want %q", uid, got, want)
		}
		body, _ := json.Marshal(map[string]any{"tools": []any{map[string]any{"name": "Bash"}}, "metadata": map[string]any{"user_id": uid}})
		if got := parseRequest(apiMessages, "/v1/messages", http.Header{}, body).session; got != want {
			t.Errorf("request with user_id %.60q: session %q, want %q", uid, got, want)
		}
	}
}

// TestHeaderSession: hostile session headers fall back to the run's
// session rather than reaching an event.
func TestHeaderSession(t *testing.T) {
	for v, want := range map[string]string{
		"abc":                       "abc",
		"-abc":                      "",
		strings.Repeat("x", 257):    "",
		strings.Repeat("x", 256):    strings.Repeat("x", 256),
		"a\tb":                      "",
		"\xff\xfe":                  "",
		"ünïcode-ok":                "ünïcode-ok",
		"line\u2028separator-is-ok": "line\u2028separator-is-ok",
	} {
		h := http.Header{"Session-Id": {v}}
		if got := headerSession(h, "Session-Id"); got != want {
			t.Errorf("Session-Id %.40q: %q, want %q", v, got, want)
		}
	}
	// Codex's older header spelling, not canonical.
	h := http.Header{"session_id": {"s-old"}}
	if got := headerSession(h, "Session-Id", "session_id"); got != "s-old" {
		t.Errorf("session_id header: %q", got)
	}
}

func TestToolDetail(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"npm test","description":"x"}`:       "npm test",
		`{"command":["bash","-lc","go test ./..."]}`:     "go test ./...",
		`{"command":["ls","-la"]}`:                       "ls -la",
		`{"cmd":"make"}`:                                 "make",
		`{"file_path":"/a/b.go","old_string":"x"}`:       "/a/b.go",
		`"{\"command\":\"echo hi\"}"`:                    "echo hi",
		`"*** Begin Patch\n*** Update File: a.go"`:       "*** Begin Patch",
		`{"command":"a\nb\u0007c"}`:                      "a b c",
		`{"other":1}`:                                    "",
		`{"command":`:                                    "",
		``:                                               "",
		`{"command":"` + strings.Repeat("é", 600) + `"}`: strings.Repeat("é", 254) + "…",
	} {
		if got := toolDetail([]byte(in)); got != want {
			t.Errorf("toolDetail(%.50q) = %.60q, want %.60q", in, got, want)
		}
	}
}

func TestRetryAt(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	gemini, err := os.ReadFile(filepath.Join("testdata", "gemini-429.json"))
	if err != nil {
		t.Fatal(err)
	}
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, c := range []struct {
		name   string
		header http.Header
		body   []byte
		want   time.Time
	}{
		{"retry-after seconds", h("Retry-After", "30"), nil, now.Add(30 * time.Second)},
		{"retry-after date", h("Retry-After", "Sun, 01 Mar 2026 12:01:00 GMT"), nil, now.Add(time.Minute)},
		{"retry-after-ms first", h("Retry-After-Ms", "1500", "Retry-After", "30"), nil, now.Add(1500 * time.Millisecond)},
		{"anthropic reset", h("Anthropic-Ratelimit-Requests-Reset", "2026-03-01T12:00:45Z",
			"Anthropic-Ratelimit-Requests-Remaining", "0",
			"Anthropic-Ratelimit-Tokens-Reset", "2026-03-01T12:00:05Z",
			"Anthropic-Ratelimit-Tokens-Remaining", "1000"), nil, now.Add(45 * time.Second)},
		{"anthropic exhausted wins over later", h("Anthropic-Ratelimit-Input-Tokens-Reset", "2026-03-01T12:00:10Z",
			"Anthropic-Ratelimit-Input-Tokens-Remaining", "0",
			"Anthropic-Ratelimit-Requests-Reset", "2026-03-01T12:00:50Z",
			"Anthropic-Ratelimit-Requests-Remaining", "7"), nil, now.Add(10 * time.Second)},
		{"anthropic unified epoch", h("Anthropic-Ratelimit-Unified-Reset", "1772366700"), nil, time.Unix(1772366700, 0)},
		{"openai durations", h("X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Remaining-Requests", "0",
			"X-Ratelimit-Reset-Tokens", "6m0s", "X-Ratelimit-Remaining-Tokens", "5000"), nil, now.Add(time.Second)},
		{"openai none exhausted: latest", h("X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Reset-Tokens", "6m0s"), nil, now.Add(6 * time.Minute)},
		{"gemini body", nil, gemini, now.Add(22 * time.Second)},
		{"gemini array body", nil, []byte(`[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}]}}]`), now.Add(1500 * time.Millisecond)},
		{"nothing", h("Content-Type", "application/json"), []byte(`{"error":{}}`), time.Time{}},
		{"past is now", h("Retry-After", "Sun, 01 Mar 2026 11:00:00 GMT"), nil, now},
		{"capped", h("Retry-After", "99999999"), nil, now.Add(maxWait)},
		{"garbage", h("Retry-After", "soon", "X-Ratelimit-Reset-Requests", "later"), []byte("{"), time.Time{}},
	} {
		if got := retryAt(c.header, c.body, now); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSSE: events split across any chunking, comments, CRLF, a line too
// long to keep.
func TestSSE(t *testing.T) {
	stream := ": hello\n\nevent: a\ndata: 1\ndata: 2\n\r\ndata: x\r\n\r\nevent: ping\ndata: {}\n\ndata: " +
		strings.Repeat("z", maxLine+10) + "\n\nevent: last\ndata: end"
	type ev struct {
		name, data string
		kind       sseKind
	}
	want := []ev{{"", "", sseComment}, {"a", "1\n2", sseData}, {"", "x", sseData}, {"ping", "{}", sseData},
		{"", "", sseCut}, {"last", "end", sseData}}
	for _, n := range []int{1, 3, 1 << 30} {
		var got []ev
		p := &sseParser{event: func(name, data []byte, kind sseKind) { got = append(got, ev{string(name), string(data), kind}) }}
		b := []byte(stream)
		for len(b) > 0 {
			k := min(n, len(b))
			p.feed(b[:k])
			b = b[k:]
		}
		p.end()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("pieces of %d: %+v", n, got)
		}
	}
}
