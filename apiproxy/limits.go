package apiproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxWait caps a retry time: a reset header further out than this is
// taken as this far out.
const maxWait = 24 * time.Hour

// limitStatus reports whether an HTTP status is a limit the CLI waits out:
// 429 (rate limited) or 529 (Anthropic overloaded).
func limitStatus(code int) bool { return code == http.StatusTooManyRequests || code == 529 }

// retryAt returns when a limited request may be retried, from the answer's
// headers and (Gemini) its error body, in this order: retry-after-ms,
// retry-after (seconds or an HTTP date), Gemini's RetryInfo retryDelay,
// then the provider's reset headers (anthropic-ratelimit-*-reset in RFC
// 3339 or Unix seconds, x-ratelimit-reset-* as durations such as "1s" or
// "6m0s"): the latest reset among the limits whose remaining count is 0,
// else the latest of all. Zero when none of them says.
func retryAt(h http.Header, body []byte, now time.Time) time.Time {
	clamp := func(t time.Time) time.Time {
		switch {
		case t.Before(now):
			return now
		case t.After(now.Add(maxWait)):
			return now.Add(maxWait)
		}
		return t
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < float64(maxWait/time.Millisecond) {
			return clamp(now.Add(time.Duration(ms * float64(time.Millisecond))))
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			if s > maxWait.Seconds() {
				s = maxWait.Seconds()
			}
			return clamp(now.Add(time.Duration(s * float64(time.Second))))
		}
		if t, err := http.ParseTime(v); err == nil {
			return clamp(t)
		}
	}
	if d, ok := geminiRetryDelay(body); ok {
		return clamp(now.Add(d))
	}
	var exhausted, all time.Time
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		var t time.Time
		var remaining string
		switch {
		case strings.HasPrefix(lk, "anthropic-ratelimit-") && strings.HasSuffix(lk, "-reset"):
			t = parseReset(vs[0], now)
			remaining = h.Get(strings.TrimSuffix(k, "-Reset") + "-Remaining")
		case strings.HasPrefix(lk, "x-ratelimit-reset"):
			// x-ratelimit-reset-requests pairs with x-ratelimit-remaining-requests.
			t = parseReset(vs[0], now)
			remaining = h.Get("X-Ratelimit-Remaining" + k[len("X-Ratelimit-Reset"):])
		default:
			continue
		}
		if t.IsZero() {
			continue
		}
		if t.After(all) {
			all = t
		}
		if strings.TrimSpace(remaining) == "0" && t.After(exhausted) {
			exhausted = t
		}
	}
	switch {
	case !exhausted.IsZero():
		return clamp(exhausted)
	case !all.IsZero():
		return clamp(all)
	}
	return time.Time{}
}

// parseReset reads a reset time: RFC 3339, Unix seconds, a Go-style
// duration ("1s", "6m0s", "20ms") or a number of seconds from now. Zero
// when it is none of these.
func parseReset(v string, now time.Time) time.Time {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return time.Time{}
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(min(d, maxWait))
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		if n > 1e9 { // Unix seconds (anthropic-ratelimit-unified-reset)
			return time.Unix(int64(n), 0)
		}
		return now.Add(time.Duration(min(n, maxWait.Seconds()) * float64(time.Second)))
	}
	return time.Time{}
}

// geminiRetryDelay returns the retryDelay of a google.rpc.RetryInfo in a
// Gemini error body ({"error": {"details": [...]}}, or a one-element array
// of it from a streaming endpoint).
func geminiRetryDelay(body []byte) (time.Duration, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return 0, false
	}
	type errBody struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	var bodies []errBody
	if body[0] == '[' {
		if json.Unmarshal(body, &bodies) != nil {
			return 0, false
		}
	} else {
		var b errBody
		if json.Unmarshal(body, &b) != nil {
			return 0, false
		}
		bodies = append(bodies, b)
	}
	for _, b := range bodies {
		for _, d := range b.Error.Details {
			if !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
				continue
			}
			if dur, err := time.ParseDuration(d.RetryDelay); err == nil && dur >= 0 {
				return min(dur, maxWait), true
			}
		}
	}
	return 0, false
}
