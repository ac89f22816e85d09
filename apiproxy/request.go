package apiproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/notify"
)

// api is the wire format of a model call.
type api int

const (
	apiNone      api = iota // not a model call: passed through, not read
	apiMessages             // Anthropic Messages
	apiResponses            // OpenAI Responses
	apiChat                 // OpenAI Chat Completions
	apiGemini               // Gemini generateContent / streamGenerateContent
)

// request is what the proxy reads from one model call.
type request struct {
	api     api
	session string   // the session the CLI names; "" = none (the run's session)
	main    bool     // it offers tools: a step of the agent loop
	stream  bool     // the answer is a stream
	results []string // ids of tool calls whose results it carries
	turn    string   // a turn id the CLI names (Codex), else ""
}

// classify returns the API of a request to path (the part after the
// provider's prefix), apiNone for anything that is not a model call.
func classify(p Provider, method, path string) api {
	if method != http.MethodPost {
		return apiNone
	}
	switch p {
	case Anthropic:
		if strings.HasSuffix(path, "/messages") {
			return apiMessages
		}
	case OpenAI:
		switch {
		case strings.HasSuffix(path, "/responses"):
			return apiResponses
		case strings.HasSuffix(path, "/chat/completions"):
			return apiChat
		}
	case Gemini:
		if strings.HasSuffix(path, ":streamGenerateContent") || strings.HasSuffix(path, ":generateContent") {
			return apiGemini
		}
	}
	return apiNone
}

// parseRequest reads a model call. A body that is not the API's JSON
// yields a side request (no tools) of the named session: nothing derived
// from it changes a turn. Only the fields read are decoded (see scan.go).
func parseRequest(a api, path string, h http.Header, body []byte) request {
	r := request{api: a}
	switch a {
	case apiMessages:
		r.session = headerSessionOf(a, h)
		var userID string
		fields(body, func(k, v []byte) bool {
			switch string(k) {
			case "stream":
				r.stream = string(v) == "true"
			case "tools":
				r.main = nonEmptyArray(v)
			case "metadata":
				userID = str(field(v, "user_id"))
			case "messages":
				// tool_use_id is a member of tool_result blocks only.
				keyValues(v, "tool_use_id", func(id []byte) {
					if id := str(id); id != "" {
						r.results = append(r.results, id)
					}
				})
			}
			return true
		})
		if r.session == "" {
			r.session = claudeUserSession(userID)
		}
	case apiResponses, apiChat:
		r.session = headerSessionOf(a, h)
		var kind string
		r.turn, kind = codexTurn(h.Get("X-Codex-Turn-Metadata"))
		// Responses: input items *_call_output; Chat: messages of role tool.
		fields(body, func(k, v []byte) bool {
			switch string(k) {
			case "stream":
				r.stream = string(v) == "true"
			case "tools":
				r.main = r.main || nonEmptyArray(v)
			case "tool_choice":
				// Offered tools, wherever they are: Codex's default model
				// (Responses Lite) sends them as an input item of type
				// additional_tools, with tool_choice and no tools field.
				r.main = r.main || (len(v) > 0 && string(v) != "null" && string(v) != `"none"`)
			case "input":
				// call_id names both calls and their outputs: read the
				// items that are outputs.
				elems(v, func(it []byte) {
					if bytes.Contains(it, []byte(`"additional_tools"`)) {
						var typ []byte
						var tools bool
						fields(it, func(k, v []byte) bool {
							switch string(k) {
							case "type":
								typ = v
							case "tools":
								tools = nonEmptyArray(v)
							}
							return true
						})
						r.main = r.main || (string(typ) == `"additional_tools"` && tools)
					}
					if !bytes.Contains(it, []byte(`_call_output"`)) {
						return
					}
					var out bool
					var id string
					fields(it, func(k, v []byte) bool {
						switch string(k) {
						case "type":
							out = bytes.HasSuffix(v, []byte(`_call_output"`))
						case "call_id":
							id = str(v)
						}
						return true
					})
					if out && id != "" {
						r.results = append(r.results, id)
					}
				})
			case "messages":
				// tool_call_id is a member of tool messages only.
				keyValues(v, "tool_call_id", func(id []byte) {
					if id := str(id); id != "" {
						r.results = append(r.results, id)
					}
				})
			}
			return true
		})
		// Codex names what each request is for: a kind other than "turn"
		// (a compaction, a summary) is a side request whatever it offers.
		if kind != "" && kind != "turn" {
			r.main = false
		}
	case apiGemini:
		r.session = headerSessionOf(a, h)
		r.stream = strings.HasSuffix(path, ":streamGenerateContent")
		fields(body, func(k, v []byte) bool {
			switch string(k) {
			case "tools":
				elems(v, func(t []byte) {
					r.main = r.main || nonEmptyArray(field(t, "functionDeclarations"))
				})
			case "contents":
				keyValues(v, "functionResponse", func(fr []byte) {
					if id := str(field(fr, "id")); id != "" {
						r.results = append(r.results, id)
					}
				})
			}
			return true
		})
		// Gemini CLI's own side calls (routing, next-speaker checks) use
		// generateContent; its agent loop streams.
		r.main = r.main && r.stream
	}
	return r
}

// headerSessionOf returns the session a model call of API a names in its
// headers, "" if none: Claude Code's X-Claude-Code-Session-Id, Codex's
// Session-Id (older versions session_id, conversation_id), Gemini's
// X-Gemini-Session-Id. A body read or not, this is known.
func headerSessionOf(a api, h http.Header) string {
	switch a {
	case apiMessages:
		return headerSession(h, "X-Claude-Code-Session-Id")
	case apiResponses, apiChat:
		return headerSession(h, "Session-Id", "session_id", "Conversation-Id", "conversation_id")
	case apiGemini:
		return headerSession(h, "X-Gemini-Session-Id")
	}
	return ""
}

// headerSession returns the first of the named headers that holds a valid
// session id, "" if none does.
func headerSession(h http.Header, names ...string) string {
	for _, n := range names {
		var v string
		if vs := h[n]; len(vs) > 0 { // exact key: "session_id" is not canonical
			v = vs[0]
		} else {
			v = h.Get(n)
		}
		if validSession(v) {
			return v
		}
	}
	return ""
}

// claudeUserSession returns the session in Claude Code's metadata.user_id:
// a JSON object {"session_id": ...} in a string (current versions), or
// "user_<hash>_account_<uuid>_session_<uuid>" (older ones).
func claudeUserSession(uid string) string {
	if uid == "" || len(uid) > 4096 {
		return ""
	}
	if uid[0] == '{' {
		var v struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(uid), &v) == nil && validSession(v.SessionID) {
			return v.SessionID
		}
		return ""
	}
	if i := strings.LastIndex(uid, "_session_"); i >= 0 && validSession(uid[i+len("_session_"):]) {
		return uid[i+len("_session_"):]
	}
	return ""
}

// codexTurn returns turn_id and request_kind from Codex's
// X-Codex-Turn-Metadata header (a JSON object), "" for each that is
// absent or unusable. Codex's hooks report the same turn_id, so proxy and
// hooks name the turn alike.
func codexTurn(meta string) (turn, kind string) {
	if meta == "" || len(meta) > 16<<10 {
		return "", ""
	}
	var v struct {
		TurnID      string `json:"turn_id"`
		RequestKind string `json:"request_kind"`
	}
	if json.Unmarshal([]byte(meta), &v) != nil {
		return "", ""
	}
	if validID(v.TurnID) {
		turn = v.TurnID
	}
	if validID(v.RequestKind) {
		kind = v.RequestKind
	}
	return turn, kind
}

// validID reports whether v is a usable protocol id: 1 to notify.MaxIDLen
// bytes of valid UTF-8 without control characters (notify's rule).
func validID(v string) bool {
	if len(v) == 0 || len(v) > notify.MaxIDLen || !utf8.ValidString(v) {
		return false
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// validSession reports whether v is a usable session id: a valid id that
// does not begin with '-' (it lands in --resume-exec argv templates).
func validSession(v string) bool { return validID(v) && v[0] != '-' }

// toolName bounds a tool name the model gave to a valid id.
func toolName(n string) string {
	if validID(n) {
		return n
	}
	if n = notify.OneLine(n, notify.MaxIDLen); n != "" {
		return n
	}
	return "tool"
}

// detailKeys are the tool arguments that say what a tool runs, in the
// order they are looked for.
var detailKeys = []string{"command", "cmd", "file_path", "path", "notebook_path", "pattern", "url", "query", "prompt", "description"}

// toolDetail returns one bounded line saying what a tool call runs, from
// its arguments (a JSON object, or for a free-form tool its raw input).
func toolDetail(args []byte) string {
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		return ""
	}
	if args[0] != '{' {
		var s string
		if json.Unmarshal(args, &s) == nil {
			// A JSON string: arguments encoded once more (OpenAI), or a
			// free-form input.
			if t := bytes.TrimSpace([]byte(s)); len(t) > 0 && t[0] == '{' {
				return toolDetail(t)
			}
			return firstLine(s)
		}
		return ""
	}
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	return detailOf(m)
}

func detailOf(m map[string]any) string {
	for _, k := range detailKeys {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				return notify.OneLine(v, notify.MaxDetailLen)
			}
		case []any:
			var words []string
			for _, w := range v {
				if s, ok := w.(string); ok {
					words = append(words, s)
				}
			}
			// ["bash", "-lc", "npm test"]: the script is what runs.
			if len(words) == 3 && (words[1] == "-c" || words[1] == "-lc") {
				words = words[2:]
			}
			if len(words) > 0 {
				return notify.OneLine(strings.Join(words, " "), notify.MaxDetailLen)
			}
		}
	}
	return ""
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return notify.OneLine(s, notify.MaxDetailLen)
}
