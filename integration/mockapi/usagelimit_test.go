package mockapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// A UsageLimit is answered as each provider answers a spent plan: 429,
// the reset as the provider states it (a unix time in Anthropic's unified
// headers and OpenAI's body, a RetryInfo delay for Gemini, whose quota is
// a daily one), and the provider's error body.
func TestUsageLimitAnswers(t *testing.T) {
	reset := time.Now().Add(90 * time.Second).Truncate(time.Second).Add(time.Second)
	for _, a := range apis {
		s := a.start(func(Request) Reply { return Reply{Kind: UsageLimit, Reset: reset} })
		resp, body := do(t, s, a)
		s.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: status %d", a.name, resp.StatusCode)
		}
		var b map[string]any
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("%s: body %q: %v", a.name, body, err)
		}
		e, _ := b["error"].(map[string]any)
		unix := strconv.FormatInt(reset.Unix(), 10)
		switch a.name {
		case "anthropic":
			h := resp.Header
			if h.Get("anthropic-ratelimit-unified-status") != "rejected" || h.Get("anthropic-ratelimit-unified-reset") != unix ||
				h.Get("anthropic-ratelimit-unified-representative-claim") != "five_hour" {
				t.Errorf("anthropic: unified headers %v, want rejected until %s", h, unix)
			}
			if ra, _ := strconv.Atoi(h.Get("Retry-After")); ra < 60 || ra > 91 {
				t.Errorf("anthropic: retry-after %q, want the seconds to the reset", h.Get("Retry-After"))
			}
			if b["type"] != "error" || e["type"] != "rate_limit_error" || e["message"] == "" {
				t.Errorf("anthropic: body %s", body)
			}
		case "openai":
			if e["type"] != "usage_limit_reached" || e["plan_type"] != "plus" || e["resets_at"] != float64(reset.Unix()) {
				t.Errorf("openai: body %s, want usage_limit_reached until %s", body, unix)
			}
			if n, _ := e["resets_in_seconds"].(float64); n < 60 || n > 91 {
				t.Errorf("openai: resets_in_seconds %v", e["resets_in_seconds"])
			}
		case "gemini":
			if e["status"] != "RESOURCE_EXHAUSTED" || e["code"] != float64(429) {
				t.Errorf("gemini: body %s", body)
			}
			var quota, delay string
			details, _ := e["details"].([]any)
			for _, d := range details {
				d, _ := d.(map[string]any)
				switch d["@type"] {
				case "type.googleapis.com/google.rpc.QuotaFailure":
					v := d["violations"].([]any)[0].(map[string]any)
					quota, _ = v["quotaId"].(string)
				case "type.googleapis.com/google.rpc.RetryInfo":
					delay, _ = d["retryDelay"].(string)
				}
			}
			if quota != "GenerateRequestsPerDayPerProjectPerModel-FreeTier" {
				t.Errorf("gemini: quotaId %q", quota)
			}
			if d, err := time.ParseDuration(delay); err != nil || d < 60*time.Second || d > 91*time.Second {
				t.Errorf("gemini: retryDelay %q", delay)
			}
		}
	}
}

// Until limits agent requests before the reset and answers as told after
// it; NeverLifts limits every agent request, each with a reset ahead.
func TestUntilAndNeverLifts(t *testing.T) {
	now := time.Now()
	then := func(Request) Reply { return Reply{Kind: Text, Text: "after"} }
	u := Until(now.Add(time.Minute), then)
	if r := u(Request{Agent: true, Time: now}); r.Kind != UsageLimit || !r.Reset.Equal(now.Add(time.Minute)) {
		t.Errorf("before the reset: %+v", r)
	}
	if r := u(Request{Agent: true, Time: now.Add(time.Minute)}); r.Kind != Text {
		t.Errorf("at the reset: %+v", r)
	}
	if r := u(Request{Agent: false, Time: now}); r.Kind != Text {
		t.Errorf("a side request: %+v", r)
	}
	n := NeverLifts(90 * time.Second)
	for _, at := range []time.Time{now, now.Add(24 * time.Hour)} {
		if r := n(Request{Agent: true, Time: at}); r.Kind != UsageLimit || !r.Reset.Equal(at.Add(90*time.Second)) {
			t.Errorf("at %v: %+v", at, r)
		}
	}
}
