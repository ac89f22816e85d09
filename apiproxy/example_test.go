package apiproxy_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/supervise-dev/supervise/apiproxy"
)

// A proxy in front of a stand-in for the Anthropic API: the agent's one
// request opens a turn, and the answer, which calls no tool, ends it.
func Example() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"+
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":30}}\n\n"+
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		w.(http.Flusher).Flush() // a stream, as the API sends it
	}))
	defer upstream.Close()

	var mu sync.Mutex
	var events []apiproxy.Event
	p, err := apiproxy.Start(apiproxy.Config{
		Env:        func(k string) string { return map[string]string{"ANTHROPIC_BASE_URL": upstream.URL}[k] },
		Sink:       func(e apiproxy.Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
		TurnPrefix: "t",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	// The agent, with p.Env() in its environment, calls the API.
	base := strings.TrimPrefix(p.Env()[0], "ANTHROPIC_BASE_URL=")
	req, _ := http.NewRequest("POST", base+"/v1/messages",
		strings.NewReader(`{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"fix the tests"}]}`))
	req.Header.Set("X-Claude-Code-Session-Id", "s1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body) // the events are in once the stream ended
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		fmt.Println(e.Kind, e.Session, e.Turn, e.Outcome, e.Input, e.Output)
	}
	// Output:
	// turn-begin s1 t1  0 0
	// usage s1 t1  12 30
	// turn-end s1 t1 completed 0 0
}
