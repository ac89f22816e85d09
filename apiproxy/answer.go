package apiproxy

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// maxToolInput bounds the streamed arguments of one tool call kept for its
// detail; maxTools the tool calls kept per answer.
const (
	maxToolInput = 64 << 10
	maxTools     = 64
)

// toolCall is one tool call in an answer.
type toolCall struct {
	id, name string
	input    []byte // arguments as streamed (Anthropic), for the detail
	detail   string
}

// answer accumulates what one answer says, from its stream events or its
// JSON body.
type answer struct {
	api      api
	tools    []toolCall
	byIndex  map[int]int // stream index -> tools index (Anthropic, Chat)
	complete bool        // the answer says it ended (message_stop, response.completed, [DONE], a finishReason)
	more     bool        // the answer ended but the turn goes on (stop reason tool_use, pause_turn; finish_reason tool_calls)
	limited  bool        // an in-stream rate-limit or overload error
	usage    bool
	badUsage bool // a usage count was not a count (negative, not an integer, out of range): ignored
	in, out  int64
	// Anthropic reports input in message_start and output (cumulative) in
	// message_delta; keep each part's latest value.
	aIn, aCacheW, aCacheR, aOut int64
}

// final reports whether the answer ends the turn: complete, no tool calls,
// nothing saying the turn goes on.
func (a *answer) final() bool { return a.complete && !a.more && len(a.tools) == 0 }

func (a *answer) addTool(id, name string) *toolCall {
	if len(a.tools) >= maxTools {
		return nil
	}
	a.tools = append(a.tools, toolCall{id: id, name: toolName(name)})
	return &a.tools[len(a.tools)-1]
}

// event takes one SSE event.
func (a *answer) event(name, data []byte) {
	switch a.api {
	case apiMessages:
		a.anthropicEvent(data)
	case apiResponses:
		a.responsesEvent(data)
	case apiChat:
		if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
			a.complete = true
			return
		}
		a.chatChunk(data)
	case apiGemini:
		a.geminiChunk(data)
	}
}

// body takes a whole non-stream answer.
func (a *answer) body(b []byte) {
	b = bytes.TrimSpace(b)
	switch a.api {
	case apiMessages:
		var m anthropicMessage
		if json.Unmarshal(b, &m) != nil || m.Type != "message" {
			return
		}
		a.anthropicUsage(m.Usage)
		a.anthropicStop(m.StopReason)
		for _, c := range m.Content {
			if c.Type == "tool_use" {
				if t := a.addTool(c.ID, c.Name); t != nil {
					t.detail = toolDetail(c.Input)
				}
			}
		}
		a.complete = true
	case apiResponses:
		var r responsesObject
		if json.Unmarshal(b, &r) != nil || r.Object != "response" {
			return
		}
		a.responsesDone(r)
	case apiChat:
		a.chatChunk(b)
	case apiGemini:
		if len(b) > 0 && b[0] == '[' {
			// streamGenerateContent without alt=sse: a JSON array of
			// the chunks.
			var chunks []json.RawMessage
			if json.Unmarshal(b, &chunks) != nil {
				return
			}
			for _, c := range chunks {
				a.geminiChunk(c)
			}
			return
		}
		a.geminiChunk(b)
	}
}

// Anthropic Messages.

type anthropicUsage struct {
	InputTokens              count `json:"input_tokens"`
	OutputTokens             count `json:"output_tokens"`
	CacheCreationInputTokens count `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     count `json:"cache_read_input_tokens"`
}

type anthropicBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicMessage struct {
	Type       string           `json:"type"`
	StopReason string           `json:"stop_reason"`
	Content    []anthropicBlock `json:"content"`
	Usage      *anthropicUsage  `json:"usage"`
}

func (a *answer) anthropicUsage(u *anthropicUsage) {
	if u == nil {
		return
	}
	set := func(dst *int64, v count) {
		a.badUsage = a.badUsage || v.bad
		if v.set {
			*dst = v.v
			a.usage = true
		}
	}
	set(&a.aIn, u.InputTokens)
	set(&a.aCacheW, u.CacheCreationInputTokens)
	set(&a.aCacheR, u.CacheReadInputTokens)
	set(&a.aOut, u.OutputTokens)
	a.in, a.out = satAdd(satAdd(a.aIn, a.aCacheW), a.aCacheR), a.aOut
}

func (a *answer) anthropicStop(reason string) {
	if reason == "tool_use" || reason == "pause_turn" {
		a.more = true
	}
}

func (a *answer) anthropicEvent(data []byte) {
	var e struct {
		Type         string            `json:"type"`
		Index        int               `json:"index"`
		Message      *anthropicMessage `json:"message"`
		ContentBlock *anthropicBlock   `json:"content_block"`
		Delta        *struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *anthropicUsage `json:"usage"`
		Error *struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			a.anthropicUsage(e.Message.Usage)
		}
	case "content_block_start":
		// server_tool_use and mcp_tool_use run at the provider: not a
		// tool phase of the agent.
		if b := e.ContentBlock; b != nil && b.Type == "tool_use" {
			if t := a.addTool(b.ID, b.Name); t != nil {
				if a.byIndex == nil {
					a.byIndex = map[int]int{}
				}
				a.byIndex[e.Index] = len(a.tools) - 1
				if in := bytes.TrimSpace(b.Input); len(in) > 2 {
					t.input = append(t.input, in...)
				}
			}
		}
	case "content_block_delta":
		if e.Delta == nil || e.Delta.Type != "input_json_delta" {
			return
		}
		if i, ok := a.byIndex[e.Index]; ok {
			t := &a.tools[i]
			if len(t.input)+len(e.Delta.PartialJSON) <= maxToolInput {
				t.input = append(t.input, e.Delta.PartialJSON...)
			}
		}
	case "message_delta":
		if e.Delta != nil {
			a.anthropicStop(e.Delta.StopReason)
		}
		a.anthropicUsage(e.Usage)
	case "message_stop":
		a.complete = true
		for i := range a.tools {
			a.tools[i].detail = toolDetail(a.tools[i].input)
		}
	case "error":
		if e.Error != nil && (e.Error.Type == "rate_limit_error" || e.Error.Type == "overloaded_error") {
			a.limited = true
		}
	}
}

// OpenAI Responses.

type responsesItem struct {
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	CallID    string          `json:"call_id"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Action    map[string]any  `json:"action"`
}

type responsesObject struct {
	Object string          `json:"object"`
	Status string          `json:"status"`
	Output []responsesItem `json:"output"`
	Usage  *struct {
		InputTokens  count `json:"input_tokens"`
		OutputTokens count `json:"output_tokens"`
	} `json:"usage"`
}

// clientTool reports whether an output item is a call the client runs
// (web search, file search, code interpreter and MCP calls run at the
// provider).
func clientTool(typ string) bool {
	switch typ {
	case "function_call", "custom_tool_call", "local_shell_call", "shell_call", "computer_call", "apply_patch_call":
		return true
	}
	return false
}

func (a *answer) responsesItem(it responsesItem) {
	if !clientTool(it.Type) {
		return
	}
	for _, t := range a.tools {
		if it.CallID != "" && t.id == it.CallID {
			return
		}
	}
	name := it.Name
	if name == "" {
		name = it.Type
	}
	t := a.addTool(it.CallID, name)
	if t == nil {
		return
	}
	switch {
	case len(it.Arguments) > 0:
		t.detail = toolDetail(it.Arguments)
	case len(it.Input) > 0:
		t.detail = toolDetail(it.Input)
	case it.Action != nil:
		t.detail = detailOf(it.Action)
	}
}

func (a *answer) responsesDone(r responsesObject) {
	if r.Usage != nil {
		a.setUsage(r.Usage.InputTokens, r.Usage.OutputTokens)
	}
	for _, it := range r.Output {
		a.responsesItem(it)
	}
	// incomplete, failed, cancelled: the client decides what follows.
	a.complete = r.Status == "completed"
}

func (a *answer) responsesEvent(data []byte) {
	var e struct {
		Type     string           `json:"type"`
		Item     *responsesItem   `json:"item"`
		Response *responsesObject `json:"response"`
		Code     string           `json:"code"`
		Error    *struct {
			Code string `json:"code"`
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil {
		return
	}
	switch e.Type {
	case "response.output_item.done":
		if e.Item != nil {
			a.responsesItem(*e.Item)
		}
	case "response.completed", "response.incomplete", "response.failed":
		if e.Response != nil {
			a.responsesDone(*e.Response)
		}
	case "error":
		code := e.Code
		if e.Error != nil {
			code = e.Error.Code + " " + e.Error.Type
		}
		if strings.Contains(code, "rate_limit") {
			a.limited = true
		}
	}
}

// OpenAI Chat Completions: a stream chunk or a whole completion.

func (a *answer) chatChunk(data []byte) {
	var c struct {
		Choices []struct {
			Index        int        `json:"index"`
			FinishReason *string    `json:"finish_reason"`
			Delta        *chatDelta `json:"delta"`
			Message      *chatDelta `json:"message"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     count `json:"prompt_tokens"`
			CompletionTokens count `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(data, &c) != nil {
		return
	}
	if c.Usage != nil {
		a.setUsage(c.Usage.PromptTokens, c.Usage.CompletionTokens)
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d := ch.Delta
		if d == nil {
			d = ch.Message
		}
		if d != nil {
			for _, tc := range d.ToolCalls {
				a.chatTool(tc, ch.Message != nil)
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			if *ch.FinishReason == "tool_calls" || *ch.FinishReason == "function_call" {
				a.more = true
			}
			if ch.Message != nil {
				a.complete = true
			}
			for i := range a.tools {
				if a.tools[i].detail == "" {
					a.tools[i].detail = toolDetail(a.tools[i].input)
				}
			}
		}
	}
}

type chatDelta struct {
	ToolCalls []chatToolCall `json:"tool_calls"`
}

type chatToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatTool adds a tool call of a completion (whole) or a piece of one from
// a stream chunk, which names the call by index.
func (a *answer) chatTool(tc chatToolCall, whole bool) {
	if a.byIndex == nil {
		a.byIndex = map[int]int{}
	}
	i, ok := a.byIndex[tc.Index]
	if whole || !ok {
		if a.addTool(tc.ID, tc.Function.Name) == nil {
			return
		}
		i = len(a.tools) - 1
		if !whole {
			a.byIndex[tc.Index] = i
		}
	}
	t := &a.tools[i]
	if len(t.input)+len(tc.Function.Arguments) <= maxToolInput {
		t.input = append(t.input, tc.Function.Arguments...)
	}
}

// Gemini: one GenerateContentResponse (a stream chunk or the whole answer).

func (a *answer) geminiChunk(data []byte) {
	var c struct {
		Candidates []struct {
			Index   int `json:"index"`
			Content struct {
				Parts []struct {
					FunctionCall *struct {
						ID   string          `json:"id"`
						Name string          `json:"name"`
						Args json.RawMessage `json:"args"`
					} `json:"functionCall"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		UsageMetadata *struct {
			PromptTokenCount     count `json:"promptTokenCount"`
			CandidatesTokenCount count `json:"candidatesTokenCount"`
			ThoughtsTokenCount   count `json:"thoughtsTokenCount"`
		} `json:"usageMetadata"`
	}
	if json.Unmarshal(data, &c) != nil {
		return
	}
	if u := c.UsageMetadata; u != nil {
		// Cumulative over a stream: the last chunk's counts are the answer's.
		out := u.CandidatesTokenCount
		if u.ThoughtsTokenCount.set {
			out = count{v: satAdd(out.v, u.ThoughtsTokenCount.v), set: true, bad: out.bad}
		}
		out.bad = out.bad || u.ThoughtsTokenCount.bad
		a.setUsage(u.PromptTokenCount, out)
	}
	for _, cand := range c.Candidates {
		if cand.Index != 0 {
			continue
		}
		for _, p := range cand.Content.Parts {
			if fc := p.FunctionCall; fc != nil {
				if t := a.addTool(fc.ID, fc.Name); t != nil {
					t.detail = toolDetail(fc.Args)
				}
			}
		}
		if cand.FinishReason != "" {
			a.complete = true
		}
	}
}

// count is one token count of an answer's usage. A value that is not a
// count (negative, not an integer, out of int64's range, not a number) is
// ignored and marked bad, never an error: the rest of the event is read.
type count struct {
	v        int64
	set, bad bool
}

func (c *count) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v < 0 {
		c.bad = true
		return nil
	}
	c.v, c.set = v, true
	return nil
}

// setUsage takes one answer's input and output counts (the latest
// report wins: streams report cumulative counts).
func (a *answer) setUsage(in, out count) {
	a.badUsage = a.badUsage || in.bad || out.bad
	if in.set {
		a.in, a.usage = in.v, true
	}
	if out.set {
		a.out, a.usage = out.v, true
	}
}

// satAdd adds two counts, saturating at math.MaxInt64 instead of wrapping.
func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
