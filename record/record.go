// Package record holds the records supervise keeps of its runs and its
// agent's sessions (Run, Session, Resume, Tokens, Fingerprint), their
// states and the reasons a run ends: the vocabulary the journal stores and
// the run loop (supervisor/machine) decides on. It is a leaf: it imports
// neither the journal's storage (bbolt) nor the network, so the machine's
// whole import closure stays free of I/O packages.
package record

import (
	"math"
	"time"
)

// Run is one child run.
type Run struct {
	Run       uint64    `json:"run"`
	PID       int       `json:"pid"`
	StartTime int64     `json:"start_time"`
	Started   time.Time `json:"started"`
	// Ended is zero while the run is in progress.
	Ended    time.Time `json:"ended"`
	ExitCode int       `json:"exit_code"`
	// Signal is the signal that killed the child, 0 for none.
	Signal int `json:"signal"`
	// Reason says how the run ended: a row of the reason table.
	Reason        Reason    `json:"reason"`
	Dirty         bool      `json:"dirty"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Argv          []string  `json:"argv,omitempty"`
}

// Reason names how a run ended: the journal, status, the log and the
// metric label (supervise_dirty_deaths_total{reason=...}) name it so. Every
// question the code asks of a reason is a column of its row in the table
// (reasons.go): Reason.Row.
type Reason string

// Reasons a run ended.
const (
	ReasonStarting       Reason = "starting" // reserved before the fork; replaced at launch
	ReasonRunning        Reason = "running"
	ReasonExit           Reason = "exit"            // exited by itself
	ReasonSignal         Reason = "signal"          // killed by a signal nobody in supervise sent
	ReasonExecFailed     Reason = "exec-failed"     // the agent could not be started
	ReasonStopped        Reason = "stopped"         // stop requested (signal to supervise, unit stop)
	ReasonWatchdog       Reason = "watchdog"        // no WATCHDOG=1 within the period
	ReasonMemory         Reason = "memory"          // killed by the memory guard
	ReasonSupervisorDied Reason = "supervisor-died" // found at the next start: the supervisor was killed
	ReasonTurnOpen       Reason = "turn-open"       // exited 0 with a turn still open
	ReasonTurnTimeout    Reason = "turn-timeout"    // a turn or phase outlived --turn-timeout or --phase-timeout
	ReasonOOM            Reason = "oom"             // the kernel's OOM killer killed a process of its cgroup
	ReasonStreamStall    Reason = "stream-stall"    // a model stream sent no content for --stream-stall (API proxy)
	ReasonTokenBudget    Reason = "token-budget"    // a session went past --max-tokens (API proxy)
	ReasonLimit          Reason = "limit"           // the turn ended on a usage or rate limit: waited out, not a crash
	ReasonStartTimeout   Reason = "start-timeout"   // no marker and no model request within --start-timeout of the launch
	ReasonSilence        Reason = "silence-timeout" // an open turn silent for --silence-timeout: no marker, model traffic or output
)

// WaitLimit is Session.Wait for a session waiting out a usage or rate
// limit until RetryAt, owed the continuation in Resume.
const WaitLimit = "limit"

// SessionState is where an agent session stands.
type SessionState string

// Session states, as status shows them.
const (
	Idle          SessionState = "idle"
	InTurn        SessionState = "in_turn"
	Waiting       SessionState = "waiting"
	ResumePending SessionState = "resume_pending"
	Parked        SessionState = "parked"
	Stopped       SessionState = "stopped"
	Closed        SessionState = "closed"
)

// Open reports whether a session in state s needs attention after a death
// or at boot; such sessions are kept in the open index.
func (s SessionState) Open() bool {
	switch s {
	case InTurn, Waiting, ResumePending, Parked, Stopped:
		return true
	}
	return false
}

// Session is one agent session as the journal knows it.
type Session struct {
	ID    string       `json:"id"`
	State SessionState `json:"state"`
	Turn  string       `json:"turn,omitempty"`
	Phase string       `json:"phase,omitempty"`
	Tool  string       `json:"tool,omitempty"`
	// Detail is what the tool runs (a command, a path), from
	// X_SUPERVISE_DETAIL: one bounded line.
	Detail string `json:"detail,omitempty"`
	// ToolRan is true once the current turn reported a tool phase: the
	// turn may have changed things, so a lost conversation is not simply
	// started again.
	ToolRan bool `json:"tool_ran,omitempty"`
	// TurnAlias is the id the agent gave the continuation of a resumed
	// turn when it differs from Turn (Codex numbers it afresh): a turn-end
	// naming it ends Turn. Cleared when the turn ends.
	TurnAlias string `json:"turn_alias,omitempty"`
	// Prompt is the agent's excerpt of the current turn's request.
	Prompt string `json:"prompt,omitempty"`
	// Tokens is the model-API usage of the session, summed across its
	// resumes, as the API proxy saw it (nil: none seen).
	Tokens *Tokens `json:"tokens,omitempty"`
	// RetryAt is when a session waiting out a rate limit may call the
	// model API again (from the API's own headers, through the proxy);
	// zero otherwise.
	RetryAt time.Time `json:"retry_at,omitzero"`
	// Effects are the keys of the side effects the current turn declared
	// done (X_SUPERVISE_EFFECT), in order, each once, at most MaxEffects;
	// cleared at the next turn-begin. A resume carries them, so the
	// resuming agent can skip them.
	Effects []string `json:"effects,omitempty"`
	// Task identifies the task-mode command that opened the session (a
	// hash of its working directory and argv), "" outside task mode: the
	// same command run again must not open a new session while this one
	// is parked or stopped.
	Task string `json:"task,omitempty"`
	// CrashCount counts consecutive dirty deaths that found the session
	// mid-turn; it resets on a completed turn and on a manual resume.
	CrashCount int `json:"crash_count"`
	// Reason explains a park, a stop or a pending resume.
	Reason string `json:"reason,omitempty"`
	// Outcome is the last turn-end outcome.
	Outcome       string    `json:"outcome,omitempty"`
	TurnStarted   time.Time `json:"turn_started"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	Updated       time.Time `json:"updated"`
	// Run is the run in which the session was last active.
	Run uint64 `json:"run"`
	// Resume holds the continuation owed to a resume_pending session.
	Resume *Resume `json:"resume,omitempty"`

	// Wait is what a waiting session waits for: input, approval (a
	// person), reconnect (the agent retries the model API) or limit (a
	// usage or rate limit ended the run: resumed at RetryAt, with Resume).
	Wait string `json:"wait,omitempty"`
	// Limits counts the resumes after a limit in the current turn (at most
	// --limit-resumes, then a park by ParkedByLimit); reset when a turn
	// completes and on a manual resume.
	Limits int `json:"limits,omitempty"`
	// ClockFrom is when the turn's current attempt started counting
	// towards --turn-timeout: its turn-begin, its resumed, or the end of a
	// wait for a person. PhaseStarted is when its phase began. Both are
	// journaled so that a restarted supervise computes the time left.
	ClockFrom    time.Time `json:"clock_from,omitzero"`
	PhaseStarted time.Time `json:"phase_started,omitzero"`
	// TurnExtended and PhaseExtended are how far EXTEND_TIMEOUT_USEC pushed
	// the turn's and the phase's deadlines (zero: not extended).
	TurnExtended  time.Time `json:"turn_extended,omitzero"`
	PhaseExtended time.Time `json:"phase_extended,omitzero"`
	// ParkedBy is ParkedByBreaker for a park by the consecutive-crash
	// breaker, "" for any other.
	ParkedBy string `json:"parked_by,omitempty"`
	// Fingerprint is the agent's fingerprint when the crash breaker parked
	// the session; nil for any other park. A later launch whose agent has
	// a different fingerprint lifts the park once.
	Fingerprint *Fingerprint `json:"fingerprint,omitempty"`
}

// MaxEffects bounds Session.Effects: the keys declared after it are not
// kept (each key is at most notify.MaxEffectLen bytes, so one session
// record holds at most 16 KiB of them).
const MaxEffects = 64

// AddEffect records that key was declared done in the session's turn:
// appended once, in order, while fewer than MaxEffects are kept. It
// reports whether key was new.
func (s *Session) AddEffect(key string) bool {
	for _, k := range s.Effects {
		if k == key {
			return false
		}
	}
	if len(s.Effects) < MaxEffects {
		s.Effects = append(s.Effects, key)
	}
	return true
}

// ParkedByBreaker marks a session parked at the consecutive-crash breaker.
const ParkedByBreaker = "breaker"

// ParkedByBudget marks a session parked for going past --max-tokens.
const ParkedByBudget = "budget"

// Tokens is a session's model-API usage.
type Tokens struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	// Lifted is what the session had spent (Used) when a person last
	// lifted its budget park (supervise resume): --max-tokens counts from
	// there.
	Lifted int64 `json:"lifted,omitempty"`
}

// Used is the session's input plus output, saturating at math.MaxInt64.
func (t Tokens) Used() int64 { return AddTokens(t.Input, t.Output) }

// Spent is what counts against the session's budget: Used since Lifted.
func (t Tokens) Spent() int64 { return max(t.Used()-max(t.Lifted, 0), 0) }

// AddTokens adds two non-negative token counts, saturating at
// math.MaxInt64 instead of wrapping (a hostile usage of 2^62 twice, or
// 2^63-1 plus one, never comes out small or negative); a negative n adds
// nothing.
func AddTokens(sum, n int64) int64 {
	if n <= 0 {
		return sum
	}
	if sum > math.MaxInt64-n {
		return math.MaxInt64
	}
	return sum + n
}

// Fingerprint identifies the agent's build and configuration: the agent
// binary and the files named by --fingerprint.
type Fingerprint struct {
	// Sum is the SHA-256 over every file's path and digest, in order.
	Sum string `json:"sum"`
	// Files lists the agent binary first, then the --fingerprint files.
	Files []FileFingerprint `json:"files"`
}

// FileFingerprint is one file of a Fingerprint.
type FileFingerprint struct {
	Path   string    `json:"path"`
	Size   int64     `json:"size"`
	MTime  time.Time `json:"mtime"`
	SHA256 string    `json:"sha256,omitempty"`
	// Error says why the file could not be read ("" when it was).
	Error string `json:"error,omitempty"`
}

// Resume is a continuation owed to a session.
type Resume struct {
	// Attempt is the session's consecutive dirty deaths mid-turn: the Nth
	// automatic continuation of this turn (1 for a manual resume).
	Attempt int `json:"attempt"`
	// Interrupted is the run whose death made this resume: with the session
	// id, it names the interruption, so an agent can tell a repeat from a new
	// one. 0 for a manual resume.
	Interrupted uint64    `json:"interrupted_run,omitempty"`
	Reason      string    `json:"reason"`
	Message     string    `json:"message"`
	Since       time.Time `json:"since"`
	// Manual is true when a person asked for this resume.
	Manual bool `json:"manual,omitempty"`
	// Delivered counts how often it was handed to a child without the
	// agent confirming it took it; Run is the last run it was handed to.
	Delivered int    `json:"delivered,omitempty"`
	Run       uint64 `json:"run,omitempty"`
}
