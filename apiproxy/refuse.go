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

// busyMessage is the text of a call the proxy cannot hold now.
const busyMessage = "supervise's API proxy: its buffers are full (other requests in flight hold them): " +
	"the call was not forwarded; retry it"

// busyBody is the error of a call the proxy cannot buffer now (503), in
// the API's own format, as the providers answer an overloaded server:
//
//   - Anthropic Messages: {"type":"error","error":{"type":"api_error","message":...}}
//   - OpenAI: {"error":{"message":...,"type":"server_error","param":null,"code":"supervise_proxy_busy"}}
//   - Gemini: {"error":{"code":503,"message":...,"status":"UNAVAILABLE"}}
func busyBody(a api) []byte {
	var v any
	switch a {
	case apiMessages:
		v = map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": busyMessage}}
	case apiGemini:
		v = map[string]any{"error": map[string]any{"code": http.StatusServiceUnavailable, "message": busyMessage,
			"status": "UNAVAILABLE"}}
	default:
		v = map[string]any{"error": map[string]any{"message": busyMessage, "type": "server_error", "param": nil,
			"code": "supervise_proxy_busy"}}
	}
	b, _ := json.Marshal(v) // maps of strings: never fails
	return b
}

// writeBusy answers a model call the proxy cannot buffer now: 503, a 5xx
// that the CLIs' SDKs retry with backoff. Nothing of it was forwarded.
func writeBusy(w http.ResponseWriter, a api) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", "1")
	// The request may still be arriving; the connection is not reused.
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(busyBody(a))
}
