package mockapi

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

type api struct {
	name  string
	start func(func(Request) Reply) *Server
	path  string
	body  string
}

var apis = []api{
	{"anthropic", Anthropic, "/v1/messages", `{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"}]}`},
	{"openai", OpenAI, "/v1/responses", `{"stream":true,"tools":[{"type":"function","name":"shell"}],"input":[{"role":"user","content":"hi"}]}`},
	{"gemini", Gemini, "/v1beta/models/g:streamGenerateContent", `{"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}],"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
}

func do(t *testing.T, s *Server, a api) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(s.URL()+a.path, "application/json", strings.NewReader(a.body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestUsage: answers report 10 and 5 tokens unless the reply says.
func TestUsage(t *testing.T) {
	want := map[string][2]string{
		"anthropic": {`"input_tokens":%d`, `"output_tokens":%d`},
		"openai":    {`"input_tokens":%d`, `"output_tokens":%d`},
		"gemini":    {`"promptTokenCount":%d`, `"candidatesTokenCount":%d`},
	}
	for _, a := range apis {
		for _, reply := range []Reply{{Kind: Text, Text: "x"}, {Kind: Tool, Command: "ls", InputTokens: 20, OutputTokens: 10}} {
			s := a.start(func(Request) Reply { return reply })
			_, body := do(t, s, a)
			s.Close()
			in, out := 10, 5
			if reply.InputTokens != 0 {
				in, out = reply.InputTokens, reply.OutputTokens
			}
			for i, n := range []int{in, out} {
				if f := strings.Replace(want[a.name][i], "%d", itoa(n), 1); !strings.Contains(body, f) {
					t.Errorf("%s %v: no %s in %s", a.name, reply.Kind, f, body)
				}
			}
		}
	}
}

// TestLimit: a 429 with each provider's retry hints.
func TestLimit(t *testing.T) {
	for _, a := range apis {
		s := a.start(func(Request) Reply { return Reply{Kind: Limit} })
		resp, body := do(t, s, a)
		s.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: %s", a.name, resp.Status)
		}
		switch a.name {
		case "anthropic":
			reset, err := time.Parse(time.RFC3339, resp.Header.Get("Anthropic-Ratelimit-Requests-Reset"))
			if resp.Header.Get("Retry-After") != "30" || resp.Header.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" ||
				err != nil || time.Until(reset) > 31*time.Second || !strings.Contains(body, "rate_limit_error") {
				t.Errorf("anthropic: %v %s", resp.Header, body)
			}
		case "openai":
			if resp.Header.Get("Retry-After") != "30" || resp.Header.Get("X-Ratelimit-Reset-Requests") != "30s" ||
				resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" || !strings.Contains(body, "rate_limit_exceeded") {
				t.Errorf("openai: %v %s", resp.Header, body)
			}
		case "gemini":
			if !strings.Contains(body, `"retryDelay":"30s"`) || !strings.Contains(body, "google.rpc.RetryInfo") {
				t.Errorf("gemini: %s", body)
			}
		}
	}
	s := Anthropic(func(Request) Reply { return Reply{Kind: Limit, Status: 529, RetryAfter: 1500 * time.Millisecond} })
	defer s.Close()
	resp, body := do(t, s, apis[0])
	if resp.StatusCode != 529 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(body, "overloaded_error") {
		t.Errorf("529: %s %v %s", resp.Status, resp.Header, body)
	}
}

// TestPings: a stream of keep-alives only, until the client leaves.
func TestPings(t *testing.T) {
	for _, a := range apis {
		s := a.start(func(Request) Reply { return Reply{Kind: Pings, Every: time.Millisecond} })
		resp, err := http.Post(s.URL()+a.path, "application/json", strings.NewReader(a.body))
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		var pings int
		for pings < 3 {
			l, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", a.name, err)
			}
			switch l = strings.TrimSpace(l); {
			case l == "event: ping" || l == ": keep-alive":
				pings++
			case l == "" || l == `data: {"type":"ping"}`:
			default:
				t.Fatalf("%s: not a ping: %q", a.name, l)
			}
		}
		resp.Body.Close()
		s.Close()
	}
}
