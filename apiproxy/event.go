package apiproxy

import (
	"fmt"
	"time"
)

// Provider is a model API the proxy serves.
type Provider int

const (
	Anthropic Provider = iota // Messages API (ANTHROPIC_BASE_URL)
	OpenAI                    // Responses and Chat Completions (OPENAI_BASE_URL)
	Gemini                    // generateContent, streamGenerateContent (GOOGLE_GEMINI_BASE_URL)
)

var providerNames = [...]string{Anthropic: "anthropic", OpenAI: "openai", Gemini: "gemini"}

// String returns the provider's name as it appears in the proxy's paths:
// "anthropic", "openai" or "gemini".
func (p Provider) String() string {
	if p >= 0 && int(p) < len(providerNames) {
		return providerNames[p]
	}
	return fmt.Sprintf("provider(%d)", int(p))
}

// EventKind is what an Event reports.
type EventKind int

const (
	// TurnBegin: the upstream answered a main request (a step of the
	// agent loop) for a session with no open turn, with a status other
	// than 401 or 403. Turn is the new turn's id.
	TurnBegin EventKind = iota
	// Phase: the open turn changed phase. Tool != "" is a tool phase (the
	// model's answer called Tool; Detail is what it runs, one bounded
	// line); Tool == "" is a model phase (the upstream answered a main
	// request after a tool phase or a wait).
	Phase
	// TurnEnd: a main request's answer completed without tool calls while
	// no tool call of the session awaits its result. Outcome is
	// "completed".
	TurnEnd
	// Waiting: a main request was refused for a limit (429, 529, or an
	// in-stream rate-limit or overload error). The session waits for
	// reconnect until RetryAt (zero when the answer named no time).
	Waiting
	// Usage: one answer's tokens, to be added to the session's totals.
	Usage
	// Stall: a stream sent no content event for Config.StreamStall.
	Stall
	// Refused: Config.Refuse refused a model call of Session, which the
	// proxy answered itself (never forwarded). Turn is the session's
	// open turn as the proxy knows it ("" for none); the refusal changes
	// no turn.
	Refused
)

var kindNames = [...]string{TurnBegin: "turn-begin", Phase: "phase", TurnEnd: "turn-end",
	Waiting: "waiting", Usage: "usage", Stall: "stall", Refused: "refused"}

// String returns the kind's name: turn-begin, phase, turn-end, waiting,
// usage, stall or refused.
func (k EventKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Event is one thing derived from the traffic. Session is always a valid
// protocol session id (1..256 bytes of printable UTF-8, not beginning with
// '-'); Turn, Tool and Detail are bounded and without control characters.
// No field ever holds a credential or a request's or answer's text, except
// Detail: the argument of a tool call the model made (a command, a path).
type Event struct {
	Kind     EventKind
	Provider Provider
	Session  string
	Turn     string    // the open turn ("" for Usage outside a turn)
	Tool     string    // Phase: the tool called ("" = model phase)
	Detail   string    // Phase: what the tool runs, one line of at most notify.MaxDetailLen bytes
	Outcome  string    // TurnEnd: "completed"
	RetryAt  time.Time // Waiting: when the limit lifts; zero if unknown
	Input    int64     // Usage: input tokens of one answer (cache reads and writes included)
	Output   int64     // Usage: output tokens of one answer (reasoning included)
}
