package observe

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/supervise-dev/supervise/internal/signame"
	"github.com/supervise-dev/supervise/internal/tty"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Term is the terminal an interactive agent shares with supervise.
type Term struct {
	// W writes to it and never blocks (a tty.Writer): a terminal whose
	// output is stopped must not hold the loop.
	W io.Writer
	// Restore puts back the settings the terminal had when supervise
	// started and restarts its output (tty.State.Restore); nil: none saved.
	Restore func()
	// Rows is its height now, 0 if unknown.
	Rows func() int
	// Flush waits, for a bounded time, until what was written reached the
	// terminal: the line must be there before the next run draws; nil:
	// W writes synchronously.
	Flush func()
}

// Terminal returns an Observer that, at each death of the agent, puts the
// terminal back as supervise found it (its settings, output flowing, the
// modes a CLI sets turned off), and for a death worth a word clears the
// screen (the dead frame scrolled into the scrollback) and writes one
// short line at its top, where the next run draws below it; then calls
// next (nil: none). The death event comes once the child is gone and
// before the next one is launched, so nothing is drawn over the agent's
// screen.
//
// What it reads of the event: Reason, Signal, ExitCode and Dirty (how the
// child ended), and per session of Decisions: ID, State (resume_pending:
// continued; parked; stopped), Phase and Tool (where the turn was), Reason
// (why parked) and ResumeCommand.
//
// inPlace says a resume relaunches the agent's resume template
// (--resume-exec), which reopens the session itself; without one the
// resume is only handed to the next start of the agent, which may not
// take it, and the line says so.
func Terminal(term Term, agent string, inPlace bool, next supervisor.Observer) supervisor.Observer {
	return func(ev supervisor.Event) {
		if ev.Kind == supervisor.EventDeath {
			if term.Restore != nil {
				term.Restore()
			}
			out := tty.Reset
			if l := DeathLine(agent, inPlace, ev); l != "" {
				rows := 0
				if term.Rows != nil {
					rows = term.Rows()
				}
				// "\r\n" at the end: the settings restored may still lack
				// output processing (a terminal supervise was given raw).
				out += tty.Clear(rows) + l + "\r\n"
			}
			io.WriteString(term.W, out) // one write: never split by another line
			if term.Flush != nil {
				term.Flush()
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// AgentName is the short name of the agent's program, for the line.
func AgentName(argv []string) string {
	if len(argv) == 0 {
		return "the agent"
	}
	return filepath.Base(argv[0])
}

// DeathLine words one death for a person between runs, e.g. "supervise:
// claude was killed (SIGKILL) mid-tool (Bash); continuing session 6fce...".
// "" for a death that needs no word: a clean exit that changed no session.
// inPlace as for Terminal.
func DeathLine(agent string, inPlace bool, ev supervisor.Event) string {
	if !ev.Dirty && len(ev.Decisions) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("supervise: " + agent + " " + how(ev))
	if where := midTurn(ev.Decisions); where != "" {
		b.WriteString(" " + where)
	}
	var parts []string
	for _, d := range ev.Decisions {
		id := clean(d.ID)
		switch d.State {
		case string(record.ResumePending):
			if inPlace {
				parts = append(parts, "continuing session "+id)
			} else {
				parts = append(parts, "session "+id+" is owed a resume, handed to the next "+agent+" (supervise status shows whether it took it)")
			}
		case string(record.Parked):
			p := "session " + id + " parked"
			if d.Reason != "" {
				p += " (" + clean(d.Reason) + ")"
			}
			if d.ResumeCommand != "" {
				p += "; to continue it: " + d.ResumeCommand
			}
			parts = append(parts, p)
		case string(record.Closed):
			if machine.LostReason(d.Reason) {
				parts = append(parts, "session "+id+"'s conversation was lost before "+agent+" saved it, so it cannot be resumed: starting "+agent+" again as a new conversation")
			}
		case string(record.Stopped):
			p := "session " + id + " stopped"
			if d.ResumeCommand != "" {
				p += "; to continue it: " + d.ResumeCommand
			}
			parts = append(parts, p)
		}
	}
	if len(parts) > 0 {
		b.WriteString("; " + strings.Join(parts, "; "))
	}
	return b.String()
}

// how words the end: killed (SIGKILL), exited with status 1, or the
// reason table's words.
func how(ev supervisor.Event) string {
	r, known := ev.Reason.Row()
	switch {
	case r.Requested:
		if ev.Signal != 0 {
			return fmt.Sprintf("was stopped (%s)", sigName(ev.Signal))
		}
		return "was stopped"
	case known && r.How != "":
		// supervise's own kills (watchdog, memory, deadlines) by the
		// table's words: the SIGKILL is only how.
		return "ended: " + strings.TrimPrefix(r.How, "the agent ")
	case ev.Signal != 0:
		return fmt.Sprintf("was killed (%s)", sigName(ev.Signal))
	case r.SignalWorded:
		return fmt.Sprintf("exited with status %d", ev.ExitCode)
	}
	return "ended (" + clean(string(ev.Reason)) + ")"
}

// midTurn says where the first session with an open turn was.
func midTurn(ds []supervisor.SessionStatus) string {
	for _, d := range ds {
		if d.Turn == "" && d.Phase == "" {
			continue
		}
		if d.Phase == "tool" {
			if d.Tool != "" {
				return "mid-tool (" + clean(d.Tool) + ")"
			}
			return "mid-tool"
		}
		return "mid-turn"
	}
	return ""
}

func sigName(sig int) string {
	if name := signame.Name(sig); name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", sig)
}

// clean keeps what the agent named (a session id, a tool) to one short
// printable line: no escape sequence of the agent's reaches the terminal.
func clean(s string) string {
	const max = 120
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			b.WriteString("...")
			break
		}
		if !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Held is one session a new interactive start found left over: stopped by
// a hangup or a Ctrl-C in the middle of a turn, or parked.
type Held struct {
	ID, State, Reason string
}

// StartNotice words, one line each, the sessions of st that a person left
// or supervise parked, with the command that continues each: supervise
// resume, and with a resume template (tpl, as --resume-exec parsed it)
// the CLI's own resume line as well. At most max lines; the rest are
// counted in a last line that names `supervise status`.
func StartNotice(st supervisor.Status, tpl []string, max int) []string {
	var lines []string
	more := 0
	for _, s := range st.Sessions {
		if s.State != string(record.Stopped) && s.State != string(record.Parked) {
			continue
		}
		if len(lines) == max {
			more++
			continue
		}
		id := clean(s.ID)
		var l string
		if s.State == string(record.Stopped) {
			l = "supervise: session " + id + " was stopped mid-turn"
			if s.Phase == "tool" && s.Tool != "" {
				l += " (in " + clean(s.Tool) + ")"
			}
		} else {
			l = "supervise: session " + id + " is parked"
			if s.Reason != "" {
				l += " (" + clean(s.Reason) + ")"
			}
		}
		l += "; to continue it: " + machine.ResumeCommand(st.StateDir, s.ID)
		if own := OwnResume(tpl, s.ID); own != "" {
			l += " (or, outside supervise: " + own + ")"
		}
		lines = append(lines, l)
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("supervise: and %d more stopped or parked: supervise status --state-dir %s", more, machine.ShellQuote(st.StateDir)))
	}
	return lines
}

// OwnResume is the CLI's own command that reopens session id, from a
// resume template: {session} filled in, the words that carry only the
// {message} (or {turn}) dropped, with a flag right before them. "" without a template.
func OwnResume(tpl []string, id string) string {
	if len(tpl) == 0 {
		return ""
	}
	var words []string
	flag := false // the last word kept is a bare flag (-i), which may be the message's
	for _, w := range tpl {
		if w == "{message}" || w == "{turn}" {
			if flag {
				words = words[:len(words)-1] // its flag goes with it: gemini -r ID -i MESSAGE
			}
			flag = false
			continue
		}
		flag = strings.HasPrefix(w, "-") && w != "--" && !strings.Contains(w, "{")
		if w == "--" {
			continue // it only guarded the message
		}
		words = append(words, machine.ShellQuote(strings.ReplaceAll(w, "{session}", id)))
	}
	return strings.Join(words, " ")
}
