package machine

// Policy is how the machine treats the agent command: as a service,
// relaunched by --restart, or as a task (--resume-exec), run once and then
// only resume launches, or driven by a person. It is its Mode's row of
// modes, resolved once from the configuration (policyFor, in New): every
// rule a mode changes asks one of its fields, and nothing else in the
// machine, nor the runner, reads TaskConfig.On.
type Policy struct {
	// Mode is the mode this is the row of.
	Mode Mode
	// Task: the agent argv is a task (--resume-exec).
	Task bool
	// ByRestart: what follows a death is --restart's decision (a service);
	// a task's is a resume launch or the end (taskNext).
	ByRestart bool
	// Fold: a death followed by an immediate relaunch records, in its
	// commit, the delivery that relaunch hands over; HoldLogs keeps the
	// log off that restart path. A task's relaunch is a resume launch
	// with its own argv, never folded.
	Fold, HoldLogs bool
	// ExecDelivery: resumes go in the --resume-exec argv, one session a
	// run; otherwise every pending one goes in the resume file.
	ExecDelivery bool
	// LiveDelivery: resumes that become dispatchable while the child runs
	// are delivered to it (--resume-signal, a service only).
	LiveDelivery bool
	// BlockRerun: the task does not start while an earlier run of it left
	// a session parked, stopped or owed a held resume (not --rerun-task).
	BlockRerun bool
	// Remember: the sessions of this invocation, the last outcome and
	// whether markers came are kept for the task's end (TaskState), and
	// each session is stamped with the task's id.
	Remember bool
	// LostConversations: a resume launch the CLI answers with "no such
	// conversation" reruns the task once, or parks (lost.go).
	LostConversations bool
	// LostAnew: a lost conversation never parks: the CLI is started again
	// as a new conversation, the person kept in it (interactive; lost.go).
	LostAnew bool
	// Tail: the runner keeps the agent's last words (its stderr's telling
	// line), quoted in the death's reasons (Launch.Tail).
	Tail bool
	// Interactive: a task whose AGENT carries no task prompt (`supervise
	// --resume-exec 'claude -r {session} {message}' -- claude`): a person
	// drives it in the terminal. It is never refused as a rerun (it
	// repeats nothing), its output is the person's terminal (no tails),
	// and a turn-begin in a run handed a resume takes that resume (the CLI
	// reports its continuation as a new turn; interactive.go).
	Interactive bool
}

// Mode is how supervise runs the agent: one value, chosen once from the
// configuration, whose behaviour is its row in modes.
type Mode uint8

const (
	// ModeService: the agent is a service, relaunched by --restart.
	ModeService Mode = iota
	// ModeTask: a one-shot task (--resume-exec with a task prompt): run
	// once, then only resume launches.
	ModeTask
	// ModeInteractive: a person drives the agent in the terminal
	// (--resume-exec, no task prompt).
	ModeInteractive
)

// modes is each mode's behaviour: every rule that differs between them
// asks a field of the row (two flags narrow it: --resume-signal and
// --rerun-task).
var modes = [...]Policy{
	ModeService:     {ByRestart: true, Fold: true, HoldLogs: true, LiveDelivery: true},
	ModeTask:        {Task: true, ExecDelivery: true, BlockRerun: true, Remember: true, LostConversations: true, Tail: true},
	ModeInteractive: {Task: true, ExecDelivery: true, Remember: true, Interactive: true, LostConversations: true, LostAnew: true},
}

// Mode is the mode the configuration asks for: the one place TaskConfig.On
// is read.
func (c *Config) Mode() Mode {
	switch {
	case !c.Task.On:
		return ModeService
	case c.Task.Interactive:
		return ModeInteractive
	}
	return ModeTask
}

// policyFor resolves the policy of cfg: its mode's row, narrowed by
// --resume-signal and --rerun-task.
func policyFor(cfg Config) Policy {
	mode := cfg.Mode()
	p := modes[mode]
	p.Mode = mode
	p.LiveDelivery = p.LiveDelivery && cfg.LiveResume
	p.BlockRerun = p.BlockRerun && !cfg.Task.Rerun
	return p
}
