package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/supervise-dev/supervise/apiproxy"
	"github.com/supervise-dev/supervise/integration/mockapi"
)

// proxy measures what the model-API proxy (--api-proxy on) adds to a model
// call: a streamed Messages request sent to the mock Anthropic API
// directly and through apiproxy in front of it, interleaved in one run (the
// order alternating), over keep-alive connections on both legs. Latency is
// from the request's start to the answer's last byte; first byte is to the
// first byte of the stream. The proxy reads every request and answer as in
// production: turns, tool phases, usage and a stall timer per stream.
func (b *bench) proxy() error {
	n := 2000
	if b.cfg.quick {
		n = 300
	}
	api := mockapi.Anthropic(func(mockapi.Request) mockapi.Reply {
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	})
	defer api.Close()
	var events atomic.Int64
	p, err := apiproxy.Start(apiproxy.Config{
		Env:         func(k string) string { return map[string]string{"ANTHROPIC_BASE_URL": api.URL()}[k] },
		Sink:        func(apiproxy.Event) { events.Add(1) },
		StreamStall: time.Minute,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, body := range []struct {
		name string
		size int
	}{{"2 KiB request", 2 << 10}, {"76 KiB request (Claude Code's first request)", 76 << 10}} {
		req := messagesRequest(body.size)
		progress("proxy: %s, %d calls each way", body.name, n)
		var direct, proxied, directFirst, proxiedFirst sample
		urls := [2]string{api.URL() + "/v1/messages", p.URL(apiproxy.Anthropic) + "/v1/messages"}
		for i := -50; i < n; i++ { // 50 warm-up rounds
			for k := range 2 {
				leg := (i + k) & 1
				total, first, err := call(client, urls[leg], req)
				if err != nil {
					return err
				}
				if i < 0 {
					continue
				}
				if leg == 0 {
					direct, directFirst = append(direct, total), append(directFirst, first)
				} else {
					proxied, proxiedFirst = append(proxied, total), append(proxiedFirst, first)
				}
			}
			if b.ctx.Err() != nil {
				return b.ctx.Err()
			}
		}
		direct, proxied = direct.sorted(), proxied.sorted()
		directFirst, proxiedFirst = directFirst.sorted(), proxiedFirst.sorted()
		added := proxied.q(0.5) - direct.q(0.5)
		b.add(row{"model-API proxy: added latency per request (start to last byte)", body.name + ", Messages stream",
			signedMS(added) + " median",
			fmt.Sprintf("p99 %s; direct median %s, p99 %s; through the proxy median %s, p99 %s; n=%d each way, interleaved",
				signedMS(proxied.q(0.99)-direct.q(0.99)), ms(direct.q(0.5)), ms(direct.q(0.99)), ms(proxied.q(0.5)), ms(proxied.q(0.99)), n),
			"<= 0.5 ms added median", metMissed(added <= 500*time.Microsecond)})
		addedFirst := proxiedFirst.q(0.5) - directFirst.q(0.5)
		b.add(row{"model-API proxy: added time to first byte of a stream", body.name + ", Messages stream",
			signedMS(addedFirst) + " median",
			fmt.Sprintf("p99 %s; direct median %s; through the proxy median %s",
				signedMS(proxiedFirst.q(0.99)-directFirst.q(0.99)), ms(directFirst.q(0.5)), ms(proxiedFirst.q(0.5))),
			"within 1 ms of the upstream's", metMissed(addedFirst <= time.Millisecond)})
	}
	if events.Load() == 0 {
		return fmt.Errorf("the proxy derived no events")
	}
	return nil
}

// call posts body and returns the time to the answer's last and first
// byte.
func call(c *http.Client, url string, body []byte) (total, first time.Duration, err error) {
	t0 := time.Now()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	r := bufio.NewReader(resp.Body)
	if _, err := r.ReadByte(); err != nil {
		return 0, 0, err
	}
	first = time.Since(t0)
	if _, err := io.Copy(io.Discard, r); err != nil {
		return 0, 0, err
	}
	return time.Since(t0), first, nil
}

// messagesRequest is a streamed Messages request with tools (a main
// request, as Claude Code sends) of about size bytes: a conversation of
// user and assistant messages whose text is full of quotes and newlines,
// as JSON-escaped prompts are.
func messagesRequest(size int) []byte {
	const text = "Run \"npm test\" in ./web and fix what fails.\n\tThen run `go vet ./...` and report.\n"
	msgs := []any{}
	for n := 0; n < size; n += len(text) * 3 {
		role := "user"
		if len(msgs)%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": strings.Repeat(text, 2)}}})
	}
	if len(msgs)%2 == 0 {
		msgs = append(msgs, map[string]any{"role": "user", "content": "go on"})
	}
	b, _ := json.Marshal(map[string]any{
		"model": "claude-bench", "stream": true, "max_tokens": 32000,
		"metadata": map[string]any{"user_id": `{"device_id":"d","account_uuid":"","session_id":"6b7f1bb4-3c52-4a8c-9d2e-0c3a5f1e2d7a"}`},
		"tools":    []any{map[string]any{"name": "Bash", "description": "Run a command", "input_schema": map[string]any{"type": "object"}}},
		"messages": msgs,
	})
	return b
}

// signedMS formats an added duration with its sign.
func signedMS(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return "+" + ms(d)
}
