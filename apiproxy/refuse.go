package apiproxy

import (
	"encoding/json"
	"net/http"
)

// refusalStatus is the HTTP status of a refused call, per API: the one
// on which each pinned CLI stops at once, printing the message, without
// retrying (tested with claude -p, codex exec and gemini -p by
// integration/refuse_realcli_test.go). On a 429, claude -p and
// gemini -p retry with backoff for minutes, and codex exec exits without
// printing the message.
var refusalStatus = [...]int{
	apiMessages:  http.StatusBadRequest,
	apiResponses: http.StatusBadRequest,
	apiChat:      http.StatusBadRequest,
	apiGemini:    http.StatusBadRequest,
}

// refusalBody is the error a refused call gets, in the API's own format:
//
//   - Anthropic Messages: {"type":"error","error":{"type":"invalid_request_error","message":...}}
//   - OpenAI Responses and Chat Completions: {"error":{"message":...,"type":"invalid_request_error","param":null,"code":"supervise_refused"}}
//   - Gemini (google.rpc.Status): {"error":{"code":400,"message":...,"status":"FAILED_PRECONDITION"}}
func refusalBody(a api, msg string) []byte {
	var v any
	switch a {
	case apiMessages:
		v = map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
	case apiGemini:
		v = map[string]any{"error": map[string]any{"code": refusalStatus[a], "message": msg, "status": "FAILED_PRECONDITION"}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil,
			"code": "supervise_refused"}}
	}
	b, _ := json.Marshal(v) // maps of strings: never fails
	return b
}

// writeRefusal answers a refused model call.
func writeRefusal(w http.ResponseWriter, a api, msg string) {
	b := refusalBody(a, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	// The request may still be arriving; the connection is not reused.
	h.Set("Connection", "close")
	w.WriteHeader(refusalStatus[a])
	w.Write(b)
}
