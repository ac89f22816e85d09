// Package apiproxy is supervise's model-API proxy (--api-proxy on): a
// reverse proxy on 127.0.0.1 for the Anthropic Messages API, the OpenAI
// Responses and Chat Completions APIs and the Gemini API, which derives
// from the traffic alone what an agent's hooks would report: sessions,
// turns, tool phases, token usage, rate-limit waits and stalled streams.
//
// # Use
//
//	p, err := apiproxy.Start(apiproxy.Config{Sink: queue, StreamStall: d})
//	defer p.Close()
//	cmd.Env = append(cmd.Env, p.Env()...)
//
// Start listens on a free port of 127.0.0.1 under a random secret path
// prefix (16 bytes from crypto/rand); Env gives the agent
// ANTHROPIC_BASE_URL, OPENAI_BASE_URL and GOOGLE_GEMINI_BASE_URL pointing
// at http://127.0.0.1:PORT/SECRET/{anthropic,openai,gemini}. Each provider
// is forwarded to the base URL supervise's own environment gave it, else
// to the provider's public endpoint, over TLS verified with the system
// roots. Whoever calls Start must call Close.
//
// # Invariants
//
//   - A request whose path does not begin with the secret prefix is
//     answered 404 and never forwarded. Strangers cost the agent nothing:
//     a connection takes one of the 256 places the agent's calls are
//     served in only once its request line began with the secret prefix;
//     one whose first bytes differ is answered 404 as soon as a byte
//     differs, one silent past Config.PrefixTimeout (5 s) is closed, and
//     at most 512 wait at the gate, the oldest closed to make room for a
//     new one (TestStrangersCostNothing). WebSocket upgrades are answered
//     404 too (Codex then streams over HTTP, which the proxy can read).
//   - Bodies, status codes and headers pass through unchanged, except the
//     hop-by-hop headers, Host (the upstream's) and Accept-Encoding, which
//     is removed from requests so that answers come back uncompressed and
//     can be read as they pass. Redirects are passed to the client, not
//     followed.
//   - Streams are forwarded as they arrive, flushed after every read from
//     the upstream: event by event, never buffered. Events are parsed from
//     the bytes on their way through.
//   - Nothing logged holds a body, a header value, a URL's path or query,
//     or a credential (x-api-key, authorization, x-goog-api-key, ?key=).
//     Events hold ids, tool names, one bounded line of a tool's argument,
//     token counts and times; never a prompt or an answer.
//   - Agent traffic is hostile input: request bodies are read up to 32 MiB
//     within Config.BodyTimeout (a larger one and one the client
//     compressed are forwarded unread: no turn changes, their answers
//     still counted for usage; one the shared budget cannot hold now is
//     refused, 503, never forwarded), SSE lines up to 4 MiB, tracked sessions up to 1024 at once and 4096 over a proxy's
//     life, and every id in an event is checked against the notify
//     protocol (1..256 bytes of printable UTF-8; a session id never begins
//     with '-'). Beyond the session table's bounds, turn events are not
//     sent, but every answer's Usage is. Nothing blocks on the agent: Config.Sink and
//     Config.Refuse must not block either.
//   - Memory is bounded whatever the agent or the upstream sends: every
//     buffer of traffic draws from a budget shared by all connections,
//     checked before a byte is appended; nothing waits for it. Request
//     bodies draw from one of 64 MiB; answers (kept for parsing, SSE lines
//     and events) from another of 32 MiB, of which each model call holds
//     512 KiB for its answer before it is forwarded (else it is refused,
//     503). Counting an answer's tokens never depends on space a request
//     body or, within its 512 KiB, another answer holds; an answer that
//     cannot be held is cut, never passed on uncounted
//     (TestBudgetNotStarved). Under 30 stalled 32 MiB bodies the proxy's
//     process stays under 200 MiB of RSS (TestMemoryCeiling).
//   - A refused call (Config.Refuse) is answered by the proxy, never
//     forwarded: status 400 with the API's own error JSON.
//   - Token counts that are not counts (negative, fractions, beyond
//     int64) are ignored and logged; sums saturate at math.MaxInt64.
//
// # What is derived
//
// Session: Claude Code's X-Claude-Code-Session-Id header, else the
// session_id in its metadata.user_id (a JSON object in a string, or the
// older "user_..._account_..._session_<uuid>"); Codex's Session-Id header
// (older versions: session_id, conversation_id); otherwise, as for Gemini
// CLI with an API key, which sends no session id, Config.Session: one
// session per proxy (per run).
//
// A main request is a model call that offers tools (for Gemini, a
// streamGenerateContent that offers tools: Gemini CLI's own side calls use
// generateContent; for the Responses API, tools offered by the request's
// shape: a tools field, an additional_tools input item as Codex's default
// model sends, or a tool_choice other than "none", unless Codex's
// X-Codex-Turn-Metadata names a request_kind other than "turn"). A main
// request counts once the upstream answered it with a status other than
// 401 or 403 (a caller without the agent's credentials opens nothing). It
// opens a turn when its session has none open (TurnBegin); its turn id is Codex's turn_id (X-Codex-Turn-Metadata,
// the id Codex's hooks report) or Config.TurnPrefix followed by a count; a
// main request naming another turn than the open one (Codex began a new
// turn after one whose end the proxy did not see) begins that turn.
// An answer with tool calls is a tool phase (Phase with the first tool's
// name and detail); the next main request is a model phase again. An
// answer that completes without tool calls ends the turn completed
// (TurnEnd), unless a tool call of the session still awaits its result (a
// subagent answering while its parent's Task call runs). Requests that
// offer no tools (titles, summaries, quota probes) change no turn.
//
// Usage: every answer's tokens (side requests too): Anthropic's
// message_start and message_delta usage (input_tokens plus cache creation
// and cache reads; output_tokens), the Responses API's usage in
// response.completed, Chat Completions' usage (a stream's last chunk with
// stream_options.include_usage), Gemini's usageMetadata (promptTokenCount;
// candidatesTokenCount plus thoughtsTokenCount).
//
// Limits: a 429 or 529 answer to a main request, or an in-stream
// rate_limit_error or overloaded_error, sends Waiting with RetryAt from
// retry-after-ms, retry-after, Gemini's RetryInfo retryDelay in the error
// body, or the reset headers (anthropic-ratelimit-*-reset,
// x-ratelimit-reset-*). Other error answers change nothing: the CLIs retry
// 5xx themselves and decide what a 4xx means, so the proxy cannot tell a
// failed turn from one that goes on; a CLI's hooks report it
// (Claude Code's StopFailure), and a turn the CLI abandons is found when
// the process exits mid-turn.
//
// Stalls: with Config.StreamStall > 0, a streamed answer to a main request
// that sends no content event for that long from its request on (Anthropic's ping
// events, events without data and SSE comments do not count) sends Stall
// once.
package apiproxy
