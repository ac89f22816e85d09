package resume

import "github.com/supervise-dev/supervise/record"

// Message returns the continuation for s: honest about what is known. The
// built-in text says the turn was interrupted and how, in which phase and
// tool, that work may already be done and a side effect's outcome is
// unknown, to check the current state before redoing anything, and then the
// original request excerpt. When the turn declared side effects done
// (X_SUPERVISE_EFFECT), it names them: "Already done (...): `k1`, `k2`."
// A template replaces it; its placeholders are {session} {turn} {how}
// {phase} {tool} {detail} {prompt} {effects}.
func Message(s record.Session, d Death, template string) string {
	return message(s, describe(d), template)
}

// String names the action for logs.
func (a Action) String() string {
	switch a {
	case Resume:
		return "resume"
	case Park:
		return "park"
	case Stop:
		return "stop"
	}
	return "keep"
}
