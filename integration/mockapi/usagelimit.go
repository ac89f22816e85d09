package mockapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// UsageLimit is a plan's usage (quota) limit, as each provider answers one
// when the subscription or the project's quota is spent until Reset (see
// Reply.Reset), not the short rate limit of Limit:
//
//   - Anthropic: 429 with anthropic-ratelimit-unified-status: rejected, the
//     unified reset as a unix time, the representative claim (five_hour)
//     and its window's status, utilization and reset, retry-after in
//     seconds to the reset, and the Messages API's error body of type
//     rate_limit_error;
//   - OpenAI (Codex with a ChatGPT plan): 429 with the body
//     {"error":{"type":"usage_limit_reached","message":...,"plan_type":...,
//     "resets_at":UNIX,"resets_in_seconds":N}} and the x-codex-primary-*
//     window headers;
//   - Gemini: 429 RESOURCE_EXHAUSTED whose QuotaFailure names a daily quota
//     (GenerateRequestsPerDayPerProjectPerModel-FreeTier) and whose
//     RetryInfo retryDelay is the time to the reset, with the message the
//     API writes ("... Please retry in 37.6s.").
//
// The constant comes after the existing Kinds so their values stay.
const UsageLimit Kind = Pings + 1

// usageLimitText is a UsageLimit's default message per provider, as each
// writes it.
var usageLimitText = map[string]string{
	"anthropic": "This request would exceed your account's rate limit. Please try again later.",
	"openai":    "The usage limit has been reached",
	"gemini":    "You exceeded your current quota, please check your plan and billing details.",
}

// usageReset is when a UsageLimit lifts: Reply.Reset, else now plus
// RetryAfter (set by ServeHTTP's defaults), to the whole second as the
// providers send it (rounded up: never earlier than asked).
func usageReset(reply Reply, now time.Time) time.Time {
	r := reply.Reset
	if r.IsZero() {
		r = now.Add(reply.RetryAfter)
	}
	if t := r.Truncate(time.Second); t.Before(r) {
		r = t.Add(time.Second)
	}
	return r
}

// secondsTo is whole seconds from now to t, at least 1.
func secondsTo(t, now time.Time) int64 {
	return max(1, int64((t.Sub(now)+time.Second-1)/time.Second))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func anthropicUsageLimit(w http.ResponseWriter, reply Reply, now time.Time) {
	reset := usageReset(reply, now)
	unix := strconv.FormatInt(reset.Unix(), 10)
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(secondsTo(reset, now), 10))
	h.Set("Anthropic-Ratelimit-Unified-Status", "rejected")
	h.Set("Anthropic-Ratelimit-Unified-Reset", unix)
	h.Set("Anthropic-Ratelimit-Unified-Representative-Claim", "five_hour")
	h.Set("Anthropic-Ratelimit-Unified-5h-Status", "rejected")
	h.Set("Anthropic-Ratelimit-Unified-5h-Reset", unix)
	h.Set("Anthropic-Ratelimit-Unified-5h-Utilization", "1.0")
	h.Set("Anthropic-Ratelimit-Unified-7d-Status", "allowed")
	h.Set("Anthropic-Ratelimit-Unified-7d-Reset", strconv.FormatInt(reset.Add(96*time.Hour).Unix(), 10))
	h.Set("Anthropic-Ratelimit-Unified-7d-Utilization", "0.42")
	h.Set("Anthropic-Ratelimit-Unified-Fallback", "unavailable")
	h.Set("Anthropic-Ratelimit-Unified-Overage-Status", "rejected")
	h.Set("Anthropic-Ratelimit-Unified-Overage-Disabled-Reason", "org_level_disabled")
	h.Set("Request-Id", "req_mock_usage_limit")
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"type": "error",
		"error": map[string]any{"type": "rate_limit_error", "message": reply.Text}})
}

func openaiUsageLimit(w http.ResponseWriter, reply Reply, now time.Time) {
	reset := usageReset(reply, now)
	in := secondsTo(reset, now)
	plan := reply.Plan
	if plan == "" {
		plan = "plus"
	}
	h := w.Header()
	h.Set("X-Codex-Active-Limit", "codex")
	h.Set("X-Codex-Primary-Used-Percent", "100.0")
	h.Set("X-Codex-Primary-Window-Minutes", "300")
	h.Set("X-Codex-Primary-Reset-After-Seconds", strconv.FormatInt(in, 10))
	h.Set("X-Codex-Primary-Reset-At", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-Codex-Secondary-Used-Percent", "42.0")
	h.Set("X-Codex-Secondary-Window-Minutes", "10080")
	h.Set("X-Codex-Secondary-Reset-After-Seconds", strconv.FormatInt(in+96*3600, 10))
	h.Set("X-Codex-Secondary-Reset-At", strconv.FormatInt(reset.Add(96*time.Hour).Unix(), 10))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
		"type": "usage_limit_reached", "message": reply.Text, "plan_type": plan,
		"resets_at": reset.Unix(), "resets_in_seconds": in}})
}

func geminiUsageLimit(w http.ResponseWriter, reply Reply, now time.Time) {
	reset := usageReset(reply, now)
	d := reset.Sub(now).Seconds()
	msg := fmt.Sprintf("%s For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n"+
		"* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 50, model: gemini-2.5-pro\n"+
		"Please retry in %.1fs.", reply.Text, d)
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
		"code": http.StatusTooManyRequests, "message": msg, "status": "RESOURCE_EXHAUSTED",
		"details": []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{
				map[string]any{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
					"quotaId":         "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
					"quotaDimensions": map[string]any{"location": "global", "model": "gemini-2.5-pro"},
					"quotaValue":      "50"}}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.Help", "links": []any{
				map[string]any{"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": fmt.Sprintf("%ds", int64(d))},
		}}})
}

// Until answers every agent-loop request with a UsageLimit that lifts at
// reset, and from reset on (and every side request, always) as then does.
//
// The mockapi command's -reply usage and spent, and the integration tests.
func Until(reset time.Time, then func(Request) Reply) func(Request) Reply {
	return func(r Request) Reply {
		if r.Agent && r.Time.Before(reset) {
			return Reply{Kind: UsageLimit, Reset: reset}
		}
		return then(r)
	}
}

// NeverLifts answers every agent-loop request with a UsageLimit that says
// it lifts after every (from each request), and never does: a spent plan
// or a spend cap. Side requests get a text answer.
//
// The mockapi command's -reply usage and spent, and the integration tests.
func NeverLifts(every time.Duration) func(Request) Reply {
	return func(r Request) Reply {
		if r.Agent {
			return Reply{Kind: UsageLimit, Reset: r.Time.Add(every)}
		}
		return Reply{Kind: Text, Text: "OK."}
	}
}
