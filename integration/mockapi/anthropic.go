package mockapi

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// anthropic is the Messages API: POST /v1/messages with "stream": true,
// answered as SSE (message_start, content blocks, message_delta,
// message_stop). Its shell tool is Claude Code's Bash.
type anthropic struct{}

func (anthropic) match(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages")
}

var claudeSession = regexp.MustCompile(`session_([0-9a-f-]{36})`)

func (anthropic) parse(req *Request) {
	var b struct {
		Tools    []json.RawMessage `json:"tools"`
		Metadata struct {
			UserID string `json:"user_id"`
		} `json:"metadata"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(req.Body, &b) != nil {
		return
	}
	req.Agent = len(b.Tools) > 0
	req.Messages = len(b.Messages)
	req.Session = req.Header.Get("X-Claude-Code-Session-Id")
	if req.Session == "" {
		if m := claudeSession.FindStringSubmatch(b.Metadata.UserID); m != nil {
			req.Session = m[1]
		}
	}
	var users []string
	for _, m := range b.Messages {
		if m.Role == "assistant" {
			req.Replies++
		}
		if m.Role != "user" {
			continue
		}
		users = append(users, textOf(m.Content))
		req.ToolResult = false
		if parts, ok := m.Content.([]any); ok {
			for _, p := range parts {
				if p, ok := p.(map[string]any); ok && p["type"] == "tool_result" {
					req.ToolResult = true
				}
			}
		}
	}
	if len(users) > 0 {
		req.FirstUser, req.LastUser = users[0], users[len(users)-1]
	}
}

func (anthropic) write(w http.ResponseWriter, r *http.Request, req Request, reply Reply, stop <-chan struct{}) {
	if reply.Kind == UsageLimit {
		if reply.Text == "" {
			reply.Text = usageLimitText["anthropic"]
		}
		anthropicUsageLimit(w, reply, req.Time)
		return
	}
	if reply.Kind == Limit {
		typ := "rate_limit_error"
		if reply.Status == 529 {
			typ = "overloaded_error"
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Retry-After", retrySeconds(reply))
		h.Set("Anthropic-Ratelimit-Requests-Limit", "50")
		h.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		h.Set("Anthropic-Ratelimit-Requests-Reset", time.Now().Add(reply.RetryAfter).UTC().Format(time.RFC3339))
		w.WriteHeader(reply.Status)
		json.NewEncoder(w).Encode(map[string]any{"type": "error",
			"error": map[string]any{"type": typ, "message": reply.Text}})
		return
	}
	if reply.Kind == Pings {
		e := newSSE(w)
		pings(r, stop, reply.Every, func() { e.event("ping", map[string]any{"type": "ping"}) })
		return
	}
	if reply.Kind == Error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		json.NewEncoder(w).Encode(map[string]any{"type": "error",
			"error": map[string]any{"type": "invalid_request_error", "message": reply.Text}})
		return
	}
	model := "claude-mock"
	var b struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(req.Body, &b) == nil && b.Model != "" {
		model = b.Model
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": reply.InputTokens, "output_tokens": 1}}})
	if reply.Kind == Stall {
		e.event("ping", map[string]any{"type": "ping"})
		hold(r, stop)
		return
	}
	stopReason := "end_turn"
	if reply.Kind == Tool {
		stopReason = "tool_use"
		input, _ := json.Marshal(map[string]any{"command": reply.Command, "description": "run the command"})
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_mock" + itoa(req.N), "name": "Bash", "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": reply.Text}})
	}
	e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": reply.OutputTokens}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}
