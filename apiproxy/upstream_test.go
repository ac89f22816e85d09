package apiproxy

import (
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// TestUpstreamErrorClasses: each failure of the upstream is told once, by
// class: a 429 or 529 (a limit), another 5xx, and an upstream that cannot
// be reached (the agent gets 502). A success, or a 4xx, is not.
func TestUpstreamErrorClasses(t *testing.T) {
	statuses := []int{429, 503, 529, 200, 400}
	api := mockapi.Anthropic(func(q mockapi.Request) mockapi.Reply {
		switch s := statuses[(q.N-1)%len(statuses)]; s {
		case 200:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
		case 429, 529:
			return mockapi.Reply{Kind: mockapi.Limit, Status: s, RetryAfter: time.Second}
		default:
			return mockapi.Reply{Kind: mockapi.Error, Status: s}
		}
	})
	defer api.Close()
	var mu sync.Mutex
	var got []string
	tell := func(class string) { mu.Lock(); got = append(got, class); mu.Unlock() }
	p, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": api.URL()}, Config{UpstreamError: tell})
	for range statuses {
		post(t, p.URL(Anthropic)+"/v1/messages", nil, claudeRequest(true))
	}
	// An upstream nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	q, _ := start(t, map[string]string{"ANTHROPIC_BASE_URL": dead}, Config{UpstreamError: tell})
	if resp, _ := post(t, q.URL(Anthropic)+"/v1/messages", nil, claudeRequest(true)); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d from an unreachable upstream, want 502", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"429", "5xx", "429", "connect"}; !slices.Equal(got, want) {
		t.Fatalf("told %q, want %q", got, want)
	}
}
