package record

// The table of reasons a run ends: one row per reason, with everything
// the rest of supervise says or decides of it. The machine's classify
// names a death by its row (and a test holds classify to Dirty), the
// resume decisions word the death (How) and the breaker's park (Suspect,
// Advice) from it, the metric help lists its labels, and the README's
// reasons table is held to it by a test. A new reason is one row here,
// plus the event that produces it.

// Dirtiness says when a death of a reason is dirty: counted by the
// breaker, the crash-loop guard and the backoff, and decided per session.
type Dirtiness int

// How dirty a reason is.
const (
	// NeverDirty: a stop supervise was asked for.
	NeverDirty Dirtiness = iota
	// AlwaysDirty: a crash, a kill, or a stop supervise made on its own.
	AlwaysDirty
	// DirtyUnlessZero: an exit by itself, dirty when its status is not 0.
	DirtyUnlessZero
)

// ReasonRow is one row of the table of reasons a run ends: every column
// the code asks about a reason.
type ReasonRow struct {
	// Name is the reason as the journal, status, the log and the metric
	// label (supervise_dirty_deaths_total{reason=...}) name it.
	Name  Reason
	Dirty Dirtiness
	// Suspect: a turn that keeps dying this way may be what causes it (a
	// crash, exhausted memory, a hang), and the breaker's park says the
	// turn is the suspect. Otherwise the cause is outside the turn (a
	// person, supervise, the agent's own error).
	Suspect bool
	// Advice is what the breaker's park tells a person, after repeated
	// deaths of this reason.
	Advice string
	// OutsideAdvice, when set, is the advice (and the turn no suspect)
	// when the signal came from outside the agent (OutsideSignal).
	OutsideAdvice string
	// SilentAdvice, when set, is the advice (and the turn no suspect)
	// when the agent ended with no signal and no word of why.
	SilentAdvice string
	// How is how the run ended, in words, in the log, the continuation
	// message and status; "" for a signal or an exit, worded from the
	// signal or the status (Said, for the README).
	How, Said string
	// Help is the one-line meaning, for the metric's help and the README.
	Help string
	// ByItself: the agent ended by itself (exit, turn-open): its words or
	// its hooks may say a usage or rate limit ended it, and its words that
	// the conversation it was asked to resume is lost.
	ByItself bool
	// OOMRenames: a dirty death of this reason with an OOM kill in the
	// agent's cgroup is the OOM killer's (ReasonOOM).
	OOMRenames bool
	// SignalWorded: a death of this reason that carries a signal (a
	// wrapper's exit after its inner process was killed) is worded and
	// advised as the signal's.
	SignalWorded bool
	// Requested: a stop supervise was asked for: open turns are stopped,
	// not decided as a crash.
	Requested bool
	// HungAtStart: the task hung before it said anything, and is started
	// again once (nothing of it ran).
	HungAtStart bool
	// Counter names a counter a death of this reason adds to, beside the
	// dirty deaths' ("" for none).
	Counter string
}

// Advice shared by several reasons.
const (
	adviceCrash   = "the turn may be what crashes the agent; resume it by hand once the cause is known"
	adviceMemory  = "the turn may be what exhausts the agent's memory; resume it by hand once the cause is known"
	adviceHang    = "the turn may be what hangs the agent; resume it by hand once the cause is known"
	adviceOwn     = "the agent ended with its own error each time (an API error, a lost conversation, bad credentials): fix that, then resume it by hand"
	adviceOutside = "the signal came from outside the agent (a person, a script, a chaos test): resume it by hand when that is over"
	adviceSilent  = "the agent exited with an error status each time without a word of why: it may have been killed from outside (a wrapper such as Gemini CLI's exits 1 when its inner process is killed; GEMINI_CLI_NO_RELAUNCH=true removes it) or have failed silently: find which, then resume it by hand"
)

// reasons is the table, in the order the README shows it. Read only.
var reasons = [...]ReasonRow{
	{Name: ReasonExit, Dirty: DirtyUnlessZero, Advice: adviceOwn, SilentAdvice: adviceSilent,
		Said: "the agent exited with status N",
		Help: "the agent exited by itself (dirty when its status is not 0)", ByItself: true, OOMRenames: true, SignalWorded: true},
	{Name: ReasonSignal, Dirty: AlwaysDirty, Suspect: true, Advice: adviceCrash, OutsideAdvice: adviceOutside,
		Said:       "the agent was killed by signal N (NAME)",
		Help:       "killed by a signal nobody in supervise sent (SIGHUP, SIGINT, SIGKILL and SIGTERM count as from outside: not the turn's doing)",
		OOMRenames: true},
	{Name: ReasonTurnOpen, Dirty: AlwaysDirty, Advice: adviceOwn,
		How:  "the agent exited with status 0 in the middle of the turn",
		Help: "exited 0 with a turn still open", ByItself: true, OOMRenames: true},
	{Name: ReasonExecFailed, Dirty: AlwaysDirty, Advice: adviceOwn,
		How:  "the agent could not be started",
		Help: "the agent could not be started"},
	{Name: ReasonWatchdog, Dirty: AlwaysDirty, Suspect: true, Advice: adviceHang,
		How:  "killed by the watchdog after it stopped responding",
		Help: "no WATCHDOG=1 within --watchdog", Counter: "watchdog"},
	{Name: ReasonMemory, Dirty: AlwaysDirty, Suspect: true, Advice: adviceMemory,
		How:  "killed by the memory guard",
		Help: "its process tree went past --max-rss"},
	{Name: ReasonOOM, Dirty: AlwaysDirty, Suspect: true, Advice: adviceMemory,
		How:  "killed by the kernel's OOM killer (out of memory in its cgroup)",
		Help: "the kernel's OOM killer killed a process of its cgroup"},
	{Name: ReasonTurnTimeout, Dirty: AlwaysDirty, Suspect: true, Advice: adviceHang,
		How:  "stopped by supervise because a turn ran past its deadline (--turn-timeout or --phase-timeout)",
		Help: "a turn or phase outlived --turn-timeout or --phase-timeout"},
	{Name: ReasonStreamStall, Dirty: AlwaysDirty, Suspect: true, Advice: adviceHang,
		How:  "stopped by supervise because a model stream sent no content for --stream-stall",
		Help: "a model stream sent no content for --stream-stall (API proxy)"},
	{Name: ReasonStartTimeout, Dirty: AlwaysDirty, Suspect: true, Advice: adviceHang,
		How:  "stopped by supervise because it sent no marker and made no model request within --start-timeout of its launch (hung at start)",
		Help: "no marker and no model request within --start-timeout of the launch (a CLI hung at start)", HungAtStart: true},
	{Name: ReasonSilence, Dirty: AlwaysDirty, Suspect: true, Advice: adviceHang,
		How:  "stopped by supervise because its open turn was silent for --silence-timeout (no marker, no model traffic, no output)",
		Help: "an open turn, not waiting for a person or a limit, with no marker, no model traffic and no output for --silence-timeout"},
	{Name: ReasonTokenBudget, Dirty: AlwaysDirty,
		Advice: "supervise stopped the agent each time because a session went past a token budget: resume it by hand once the budget allows",
		How:    "stopped by supervise because a session went past --max-tokens",
		Help:   "a session went past --max-tokens or the state dir past --max-tokens-total (API proxy)"},
	{Name: ReasonSupervisorDied, Dirty: AlwaysDirty,
		Advice: "supervise died with it again; resume it by hand once supervise runs steadily",
		How:    "supervise itself died, taking the agent with it",
		Help:   "found at the next start: supervise itself was killed"},
	{Name: ReasonLimit, Dirty: NeverDirty,
		How:  "a usage or rate limit of the model API ended the turn",
		Help: "the turn ended on a usage or rate limit (the proxy's 429/529, the hook's error, the CLI's words): the session waits until the reset and is resumed, not counted as a crash"},
	{Name: ReasonStopped, Dirty: NeverDirty,
		How:  "a requested stop",
		Help: "a stop supervise was asked for (a signal to supervise, a unit stop): not dirty", Requested: true},
}

// Row returns the reason's row; false for a reason not in the table (the
// reservations starting and running are not ends; a damaged record's).
func (r Reason) Row() (ReasonRow, bool) {
	for _, row := range reasons {
		if row.Name == r {
			return row, true
		}
	}
	return ReasonRow{}, false
}

// DirtyFor reports whether a death of this reason with exit status code
// is dirty.
func (r ReasonRow) DirtyFor(code int) bool {
	switch r.Dirty {
	case AlwaysDirty:
		return true
	case DirtyUnlessZero:
		return code != 0
	}
	return false
}

// OutsideSignal reports whether signal sig comes, as a rule, from outside
// the agent (a person, a script, a service manager, a chaos test):
// SIGHUP, SIGINT, SIGKILL, SIGTERM. A death by one does not make the turn
// a suspect.
func OutsideSignal(sig int) bool { return sig == 1 || sig == 2 || sig == 9 || sig == 15 }

// SuspectFor says, for repeated deaths of this reason (by signal sig),
// whether the turn is the suspect, and the advice the breaker's park gives.
func (r ReasonRow) SuspectFor(sig int) (suspect bool, advice string) {
	if r.OutsideAdvice != "" && OutsideSignal(sig) {
		return false, r.OutsideAdvice
	}
	return r.Suspect, r.Advice
}

// AdviceFor is SuspectFor with what the agent last said ("" when it said
// nothing that explains its death): an exit with an error status and no
// words is not "its own error", which the words would show.
func (r ReasonRow) AdviceFor(sig int, said string) (suspect bool, advice string) {
	if r.SilentAdvice != "" && sig == 0 && said == "" {
		return false, r.SilentAdvice
	}
	return r.SuspectFor(sig)
}

// DirtyReasonNames lists the reasons a dirty death can have, in table
// order: the labels of supervise_dirty_deaths_total.
func DirtyReasonNames() []string {
	var out []string
	for _, r := range reasons {
		if r.Dirty != NeverDirty {
			out = append(out, string(r.Name))
		}
	}
	return out
}

// Kinds of park (Session.ParkedBy), beside ParkedByBreaker and
// ParkedByBudget.
const (
	// ParkedByWait: waiting for a person (approval, input) at a death.
	ParkedByWait = "wait"
	// ParkedByStale: the turn was older than --max-turn-age.
	ParkedByStale = "stale"
	// ParkedByUntaken: its resume was handed to a run that exited
	// cleanly without taking it.
	ParkedByUntaken = "untaken"
	// ParkedByLost: the CLI has lost the conversation, after a tool ran.
	ParkedByLost = "lost"
	// ParkedByTemplate: a value of it cannot be passed to --resume-exec.
	ParkedByTemplate = "template"
	// ParkedByLimit: a usage or rate limit ended the turn again after
	// --limit-resumes resumes (a spent plan, a spend cap).
	ParkedByLimit = "limit"
)

// Park is one row of the table of parks: why a session is parked, and who
// can lift it. Every park is lifted by a person (`supervise resume` from
// outside the agent's tree); none by the agent's own markers or model
// traffic.
type Park struct {
	// By is Session.ParkedBy for this park.
	By string
	// Why says in words why a session is parked so.
	Why string
	// Lift says who can lift it.
	Lift string
	// Fingerprint: a launch under a changed agent lifts it once.
	Fingerprint bool
}

// parks is the table of parks, in the order the README shows it. Read only.
var parks = [...]Park{
	{By: ParkedByBreaker, Why: "mid-turn at more than --resume-limit consecutive dirty deaths",
		Lift: "a person (`supervise resume`), or a launch under a changed agent (once)", Fingerprint: true},
	{By: ParkedByBudget, Why: "past --max-tokens, or the state dir past --max-tokens-total",
		Lift: "a person (`supervise resume`, which also counts the budget again from what was spent)"},
	{By: ParkedByWait, Why: "waiting for a person (approval, input) when the agent died",
		Lift: "a person (`supervise resume`)"},
	{By: ParkedByStale, Why: "the turn was older than --max-turn-age",
		Lift: "a person (`supervise resume`)"},
	{By: ParkedByUntaken, Why: "its resume was handed to a run that exited without taking it (hooks or resume support not wired)",
		Lift: "a person (`supervise resume`)"},
	{By: ParkedByLost, Why: "the CLI lost the conversation, and a tool had run in the turn",
		Lift: "a person (`supervise resume`, or `--rerun-task`, which starts the task afresh as a new session)"},
	{By: ParkedByLimit, Why: "a usage or rate limit ended its turn again after --limit-resumes resumes (a spent plan or a spend cap that does not reset)",
		Lift: "a person (`supervise resume`, once the limit allows)"},
	{By: ParkedByTemplate, Why: "a value of it cannot be passed to --resume-exec",
		Lift: "a person (`supervise resume`, with a template that takes it)"},
}

// Parks returns the table of parks, in order (a copy).
func Parks() []Park { return append([]Park(nil), parks[:]...) }

// LookupPark returns the row of a park kind; an unknown kind (a damaged
// record, a kind of a newer supervise) is lifted by a person alone.
func LookupPark(by string) Park {
	for _, p := range parks {
		if p.By == by {
			return p
		}
	}
	return Park{By: by, Why: "parked", Lift: "a person (`supervise resume`)"}
}

// LiftedByFingerprint reports whether a changed agent lifts a park of
// kind by: the breaker's alone.
func LiftedByFingerprint(by string) bool {
	for _, p := range parks {
		if p.By == by {
			return p.Fingerprint
		}
	}
	return false
}
