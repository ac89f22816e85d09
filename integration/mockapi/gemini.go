package mockapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// gemini is the Gemini API as Gemini CLI uses it with an API key:
// POST /v1beta/models/MODEL:streamGenerateContent?alt=sse (SSE of
// GenerateContentResponse) and :generateContent (one JSON answer, for the
// CLI's side calls). The shell tool is run_shell_command.
type gemini struct{}

func (gemini) match(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/models/") &&
		(strings.HasSuffix(r.URL.Path, ":streamGenerateContent") || strings.HasSuffix(r.URL.Path, ":generateContent"))
}

type geminiBody struct {
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		ResponseSchema     map[string]any `json:"responseSchema"`
	} `json:"generationConfig"`
	Contents []struct {
		Role  string `json:"role"`
		Parts []any  `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

func (gemini) parse(req *Request) {
	var b geminiBody
	if json.Unmarshal(req.Body, &b) != nil {
		return
	}
	for _, t := range b.Tools {
		req.Agent = req.Agent || len(t.FunctionDeclarations) > 0
	}
	req.Agent = req.Agent && strings.HasSuffix(req.Path, ":streamGenerateContent")
	req.Session = req.Header.Get("X-Gemini-Session-Id")
	var users []string
	for _, c := range b.Contents {
		req.Messages++
		if c.Role == "model" {
			req.Replies++
			continue
		}
		t := strings.TrimSpace(textOf(c.Parts))
		if strings.HasPrefix(t, "<session_context>") {
			// The CLI's own context is not the user's words.
			_, rest, _ := strings.Cut(t, "</session_context>")
			t = strings.TrimSpace(rest)
			if t == "" {
				continue
			}
		}
		req.ToolResult = false
		for _, p := range c.Parts {
			if p, ok := p.(map[string]any); ok && p["functionResponse"] != nil {
				req.ToolResult = true
			}
		}
		users = append(users, t)
	}
	if len(users) > 0 {
		req.FirstUser, req.LastUser = users[0], users[len(users)-1]
	}
}

func (gemini) write(w http.ResponseWriter, r *http.Request, req Request, reply Reply, stop <-chan struct{}) {
	if reply.Kind == UsageLimit {
		if reply.Text == "" {
			reply.Text = usageLimitText["gemini"]
		}
		geminiUsageLimit(w, reply, req.Time)
		return
	}
	if reply.Kind == Limit {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.Status)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"code": reply.Status, "message": reply.Text, "status": "RESOURCE_EXHAUSTED",
			"details": []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{
					map[string]any{"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
						"quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
					"retryDelay": fmt.Sprintf("%gs", reply.RetryAfter.Seconds())},
			}}})
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
			"code": reply.Status, "message": reply.Text, "status": "INVALID_ARGUMENT"}})
		return
	}
	var b geminiBody
	json.Unmarshal(req.Body, &b)
	if reply.Kind == Text && b.GenerationConfig.ResponseMimeType == "application/json" {
		// A side call (model routing, next-speaker check) that wants JSON
		// of a schema: the least answer that fits it.
		schema := b.GenerationConfig.ResponseJSONSchema
		if schema == nil {
			schema = b.GenerationConfig.ResponseSchema
		}
		j, _ := json.Marshal(fill(schema))
		reply.Text = string(j)
	}
	var part map[string]any
	finish := "STOP"
	if reply.Kind == Tool {
		part = map[string]any{"functionCall": map[string]any{"name": "run_shell_command",
			"args": map[string]any{"command": reply.Command, "description": "run the command"}}}
	} else {
		part = map[string]any{"text": reply.Text}
	}
	chunk := map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": finish, "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": reply.InputTokens, "candidatesTokenCount": reply.OutputTokens,
			"totalTokenCount": reply.InputTokens + reply.OutputTokens},
		"modelVersion": "gemini-mock",
	}
	if !strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
		if reply.Kind == Stall {
			hold(r, stop)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(chunk)
		return
	}
	e := newSSE(w)
	if reply.Kind == Stall {
		hold(r, stop)
		return
	}
	e.event("", chunk)
}

// fill returns a value that satisfies a (Gemini-style) JSON schema: an enum's
// first value, "ok" for a string, 10 for a number.
func fill(schema map[string]any) any {
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch strings.ToLower(fmt.Sprint(schema["type"])) {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		for k, v := range props {
			if v, ok := v.(map[string]any); ok {
				out[k] = fill(v)
			}
		}
		return out
	case "array":
		return []any{}
	case "integer", "number":
		return 10
	case "boolean":
		return false
	}
	return "ok"
}
