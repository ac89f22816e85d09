package mockapi

import (
	"encoding/json"
	"net/http"
	"strings"
)

// openai is the Responses API as Codex CLI uses it with a custom
// model_provider (wire_api "responses"): POST {base_url}/responses with
// "stream": true, answered as SSE (response.created, output items,
// response.completed). The shell tool is whichever of Codex's shell tools
// the request offers.
type openai struct{}

func (openai) match(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses")
}

type openaiBody struct {
	Model string `json:"model"`
	Tools []struct {
		Type       string          `json:"type"`
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	Input []struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content any    `json:"content"`
		Output  any    `json:"output"`
	} `json:"input"`
	PromptCacheKey string `json:"prompt_cache_key"`
}

func (openai) parse(req *Request) {
	var b openaiBody
	if json.Unmarshal(req.Body, &b) != nil {
		return
	}
	req.Agent = len(b.Tools) > 0
	req.Session = req.Header.Get("Session-Id")
	if req.Session == "" {
		req.Session = b.PromptCacheKey
	}
	var users []string
	for _, it := range b.Input {
		switch {
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			req.Messages++
			req.ToolResult = true
			users = append(users, textOf(it.Output))
		case it.Role == "assistant" || it.Type == "function_call" || it.Type == "custom_tool_call":
			req.Messages++
			req.Replies++
		case it.Role == "user":
			t := textOf(it.Content)
			// Codex sends its environment context and instructions as user
			// messages of their own; they are not the user's words.
			if strings.HasPrefix(t, "<environment_context>") || strings.HasPrefix(t, "<user_instructions>") ||
				strings.HasPrefix(t, "# AGENTS.md") {
				continue
			}
			req.Messages++
			req.ToolResult = false
			users = append(users, t)
		}
	}
	if len(users) > 0 {
		req.FirstUser, req.LastUser = users[0], users[len(users)-1]
	}
}

func (openai) write(w http.ResponseWriter, r *http.Request, req Request, reply Reply, stop <-chan struct{}) {
	if reply.Kind == UsageLimit {
		if reply.Text == "" {
			reply.Text = usageLimitText["openai"]
		}
		openaiUsageLimit(w, reply, req.Time)
		return
	}
	if reply.Kind == Limit {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Retry-After", retrySeconds(reply))
		h.Set("X-Ratelimit-Limit-Requests", "500")
		h.Set("X-Ratelimit-Remaining-Requests", "0")
		h.Set("X-Ratelimit-Reset-Requests", reply.RetryAfter.String())
		w.WriteHeader(reply.Status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"type": "requests", "code": "rate_limit_exceeded", "message": reply.Text, "param": nil}})
		return
	}
	if reply.Kind == Pings {
		e := newSSE(w)
		pings(r, stop, reply.Every, func() { e.comment("keep-alive") })
		return
	}
	if reply.Kind == Error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"type": "invalid_request_error", "code": "invalid_request", "message": reply.Text, "param": nil}})
		return
	}
	var b openaiBody
	json.Unmarshal(req.Body, &b)
	id := "resp_mock" + itoa(req.N)
	e := newSSE(w)
	e.event("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	if reply.Kind == Stall {
		hold(r, stop)
		return
	}
	var item map[string]any
	if reply.Kind == Tool {
		name, args := "shell", map[string]any{"command": []string{"bash", "-lc", reply.Command}}
		for _, t := range b.Tools {
			switch t.Name {
			case "shell_command":
				name, args = t.Name, map[string]any{"command": reply.Command}
			case "exec_command":
				if name != "shell_command" {
					name, args = t.Name, map[string]any{"cmd": reply.Command}
				}
			}
		}
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_mock" + itoa(req.N), "call_id": "call_mock" + itoa(req.N),
			"name": name, "arguments": string(a), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": "msg_mock" + itoa(req.N), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}}
		e.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
			"item": map[string]any{"type": "message", "id": item["id"], "role": "assistant", "status": "in_progress", "content": []any{}}})
		e.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": item["id"],
			"output_index": 0, "content_index": 0, "delta": reply.Text})
	}
	e.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	e.event("response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": id, "object": "response", "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": reply.InputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": reply.OutputTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": reply.InputTokens + reply.OutputTokens}}})
}
