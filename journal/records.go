package journal

import (
	"time"

	"github.com/supervise-dev/supervise/record"
)

// Owner identifies a supervisor process.
type Owner struct {
	PID       int       `json:"pid"`
	StartTime int64     `json:"start_time"` // process start, ms since the epoch
	BootID    string    `json:"boot_id"`
	Started   time.Time `json:"started"`
}

// Child identifies the child a supervisor believes is running, so that the
// next supervisor can find it after the first one died.
type Child struct {
	Run       uint64    `json:"run"`
	PID       int       `json:"pid"`
	StartTime int64     `json:"start_time"` // process start, ms since the epoch
	PGID      int       `json:"pgid"`       // 0 when it shared the supervisor's group
	Tag       string    `json:"tag"`        // environment entry every process of its tree carries
	BootID    string    `json:"boot_id"`
	Started   time.Time `json:"started"`
}

// The records below are defined in package record, a leaf the run loop
// imports without the journal's storage; these aliases keep journal.Session
// and the rest working for every caller.
type (
	Run             = record.Run
	SessionState    = record.SessionState
	Session         = record.Session
	Tokens          = record.Tokens
	Fingerprint     = record.Fingerprint
	FileFingerprint = record.FileFingerprint
	Resume          = record.Resume
)

// DirtyReasonNames lists the reasons a dirty death can have: see package
// record.
func DirtyReasonNames() []string { return record.DirtyReasonNames() }

// Reasons a run ended, session states, park markers and bounds: see
// package record.
const (
	ReasonStarting       = record.ReasonStarting
	ReasonRunning        = record.ReasonRunning
	ReasonExit           = record.ReasonExit
	ReasonSignal         = record.ReasonSignal
	ReasonExecFailed     = record.ReasonExecFailed
	ReasonStopped        = record.ReasonStopped
	ReasonWatchdog       = record.ReasonWatchdog
	ReasonMemory         = record.ReasonMemory
	ReasonSupervisorDied = record.ReasonSupervisorDied
	ReasonTurnOpen       = record.ReasonTurnOpen
	ReasonTurnTimeout    = record.ReasonTurnTimeout
	ReasonOOM            = record.ReasonOOM
	ReasonStreamStall    = record.ReasonStreamStall
	ReasonTokenBudget    = record.ReasonTokenBudget
	Idle                 = record.Idle
	InTurn               = record.InTurn
	Waiting              = record.Waiting
	ResumePending        = record.ResumePending
	Parked               = record.Parked
	Stopped              = record.Stopped
	Closed               = record.Closed
	ParkedByBreaker      = record.ParkedByBreaker
	ParkedByBudget       = record.ParkedByBudget
	ParkedByWait         = record.ParkedByWait
	ParkedByStale        = record.ParkedByStale
	ParkedByUntaken      = record.ParkedByUntaken
	ParkedByLost         = record.ParkedByLost
	ParkedByTemplate     = record.ParkedByTemplate
	MaxEffects           = record.MaxEffects
)
