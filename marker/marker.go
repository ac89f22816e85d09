// Package marker is the vocabulary of the notify protocol as the run
// loop reads it: a parsed datagram (Message), its events, phases, outcomes
// and waits. Package notify parses and serves datagrams and re-exports these
// names; this leaf imports no network package, so the run loop
// (supervisor/machine) can use them and stay free of I/O.
package marker

import "os"

// Event is a private X_SUPERVISE_EVENT value.
type Event string

// Events an agent reports. EventNone means the datagram carries no event.
const (
	EventNone      Event = ""
	EventTurnBegin Event = "turn-begin"
	EventTurnEnd   Event = "turn-end"
	EventWaiting   Event = "waiting"
	EventPhase     Event = "phase"
	EventResumed   Event = "resumed"
	EventClosed    Event = "closed"
	// EventEffect declares that a side effect of the session's turn
	// completed; X_SUPERVISE_EFFECT names it (Message.Effect).
	EventEffect Event = "effect"
	// EventHeartbeat is a session heartbeat: X_SUPERVISE_EVENT=heartbeat, or
	// WATCHDOG=1 with X_SUPERVISE_SESSION and no event.
	EventHeartbeat Event = "heartbeat"
)

// Outcome is how a turn ended (X_SUPERVISE_OUTCOME).
type Outcome string

// Outcomes of a turn. OutcomeCancelled means the user stopped it.
const (
	OutcomeCompleted Outcome = "completed"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
)

// Valid reports whether o is one of the protocol's outcomes.
func (o Outcome) Valid() bool {
	return o == OutcomeCompleted || o == OutcomeFailed || o == OutcomeCancelled
}

// Phase is what a session is doing inside a turn (X_SUPERVISE_PHASE).
type Phase string

// Valid reports whether p is one of the protocol's phases.
func (p Phase) Valid() bool { return p == PhaseModel || p == PhaseTool || p == PhaseIdle }

// Phases of a turn.
const (
	PhaseModel Phase = "model"
	PhaseTool  Phase = "tool"
	PhaseIdle  Phase = "idle"
)

// Wait is what a waiting session waits for (X_SUPERVISE_WAIT).
type Wait string

// Waits. A session waiting for input or approval waits for a person and is
// never resumed automatically after a death; one waiting for reconnect is
// retrying the model API mid-turn (an outage) and is resumed like in_turn.
const (
	WaitInput     Wait = "input"
	WaitApproval  Wait = "approval"
	WaitReconnect Wait = "reconnect"
)

// Message is one accepted datagram, parsed.
type Message struct {
	// PID and UID are the sender's credentials (SCM_CREDENTIALS), filled
	// by the Server; Parse leaves them zero, and so does the portable
	// backend (macOS), which has no credentials to give (see Credentials).
	PID int32
	UID uint32

	Ready           bool // READY=1
	Stopping        bool // STOPPING=1
	Watchdog        bool // WATCHDOG=1
	WatchdogTrigger bool // WATCHDOG=trigger
	Barrier         bool // BARRIER=1, always alone in its datagram

	Status    string // STATUS=, one line; a value with control characters (but tab) is ignored
	HasStatus bool   // STATUS= was present (Status may be empty)

	WatchdogUSec      uint64 // WATCHDOG_USEC=, 1..MaxUSec; 0 when absent or ignored
	ExtendTimeoutUSec uint64 // EXTEND_TIMEOUT_USEC=, 1..MaxUSec; 0 when absent or ignored

	Session string // X_SUPERVISE_SESSION
	Turn    string // X_SUPERVISE_TURN
	Tool    string // X_SUPERVISE_TOOL
	Prompt  string // X_SUPERVISE_PROMPT, at most MaxPromptLen bytes
	// Detail is X_SUPERVISE_DETAIL: what the tool runs (a command, a path),
	// one line of at most MaxDetailLen bytes; only with PhaseTool.
	Detail string
	// Effect is X_SUPERVISE_EFFECT, the key of a completed side effect:
	// 1..MaxEffectLen bytes of one line; only with EventEffect, which
	// requires it.
	Effect  string
	Event   Event
	Outcome Outcome // set with EventTurnEnd
	Phase   Phase
	// Wait is set with EventWaiting: WaitInput when X_SUPERVISE_WAIT is
	// absent.
	Wait Wait

	// Refused is set on a BARRIER=1 message when the Server refused a
	// datagram from the same sender since its previous barrier: the
	// barrier must be answered with Nack, not Ack.
	Refused bool

	// Fd is the one file descriptor of a BARRIER=1 message and nil
	// otherwise. The handler owns it and must close it once everything
	// received before it is durable, with Ack or Nack, or drop it
	// unanswered with Release (never a plain write or Close: the agent
	// chose what the fd is); the agent waits for that close.
	Fd *os.File
}

// IsHeartbeatOnly reports whether m carries nothing but a watchdog ping,
// global (WATCHDOG=1) or for one session (EventHeartbeat). The supervisor
// keeps these in memory only.
func (m *Message) IsHeartbeatOnly() bool {
	return (m.Watchdog || m.Event == EventHeartbeat) &&
		(m.Event == EventNone || m.Event == EventHeartbeat) &&
		!m.Ready && !m.Stopping && !m.WatchdogTrigger && !m.Barrier && !m.HasStatus &&
		m.WatchdogUSec == 0 && m.ExtendTimeoutUSec == 0 &&
		m.Turn == "" && m.Tool == "" && m.Prompt == "" && m.Detail == "" && m.Effect == "" && m.Outcome == "" && m.Phase == "" && m.Wait == "" &&
		m.Fd == nil
}
