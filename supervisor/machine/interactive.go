package machine

import (
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// Interactive resume: `supervise --resume-exec 'claude -r {session}
// {message}' -- claude`. The AGENT carries no task prompt, so a person
// drives it in the terminal; after a dirty death mid-turn the template is
// relaunched in the same terminal with the continuation, and at /exit (a
// clean exit with no turn open) supervise ends 0. The relaunched CLI
// shows the continuation as the person's own next prompt and its hooks
// report it as a new turn-begin, not resumed: in a run handed a resume,
// that turn-begin takes the resume (the interrupted turn goes on), in the
// session it names or, when the CLI continues under a new id, in the one
// it was handed (which is then idle: continued elsewhere).

// printFlags are the flags with which a CLI runs one prompt and exits
// (Claude Code's -p, Gemini's -p/--prompt, hermes' -z), and execWords the
// subcommands that do (Codex's exec).
var (
	printFlags = []string{"-p", "--print", "--prompt", "-z", "--prompt-interactive"}
	execWords  = []string{"exec", "e"}
)

// InteractiveArgv reports whether argv starts an interactive agent: no
// argument after the program is a prompt, a print flag or an exec
// subcommand. Only options (words that begin with '-') may follow it, so
// `claude`, `codex`, `gemini --model x`... are interactive and `claude -p
// TASK`, `codex exec TASK` are tasks. An option's value that is a separate
// word (`--model opus`) reads as a prompt: such a command is a task (the
// safe reading: a task is never started twice).
func InteractiveArgv(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	for _, a := range argv[1:] {
		if !strings.HasPrefix(a, "-") {
			return false // a prompt, a subcommand, or an option's value
		}
		flag, _, _ := strings.Cut(a, "=")
		for _, p := range printFlags {
			if flag == p {
				return false
			}
		}
	}
	for _, w := range execWords {
		if filepath.Base(argv[0]) == w {
			return false
		}
	}
	return true
}

// interactiveTurnBegin: in an interactive task, a turn-begin from a run
// that was handed a resume takes it.
func (b *Book) interactiveTurnBegin(o *out, sess *record.Session, msg marker.Message, now time.Time, run uint64) marker.Message {
	if msg.Event != marker.EventTurnBegin || run == 0 {
		return msg
	}
	if handedTo(sess, run) {
		o.info("interactive: the relaunched agent began its continuation as a new turn: it took the resume", "session", sess.ID)
		msg.Event, msg.Prompt = marker.EventResumed, ""
		return msg
	}
	var ids []string
	for _, id := range b.sessionIDs() {
		if other := b.Sessions[id]; id != sess.ID && handedTo(other, run) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		other := b.Sessions[id]
		other.State, other.Resume, other.Updated = record.Idle, nil, now
		other.Reason = "continued as session " + sess.ID + " (interactive resume)"
		o.save(id)
		o.info("interactive: the relaunched agent continues the session under a new id: it took the resume",
			"session", id, "continued_as", sess.ID)
	}
	return msg
}

// handedTo reports whether sess is owed a resume that was handed to run.
func handedTo(sess *record.Session, run uint64) bool {
	return sess != nil && sess.State == record.ResumePending && sess.Resume != nil && sess.Resume.Run == run
}
