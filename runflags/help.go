package runflags

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/supervise-dev/supervise/internal/exitcode"
)

// helpGroup is a heading of `supervise run --help` and the flags under it,
// in the order printed.
type helpGroup struct {
	title string
	intro string // a few lines under the heading, "" for none
	flags []string
}

// helpGroups are the run flags as --help prints them: the ones most people
// need first, then by what they are about. A flag of the FlagSet named in
// no group is printed in the last one, so none is ever left out
// (TestHelpPrintsEveryFlagOnce).
var helpGroups = []helpGroup{
	{"Most people need", `The mode of --resume-exec follows AGENT. With a task prompt after the program
(-- claude -p 'fix the tests', -- codex exec TASK: any word after the program
that is not an option) it is task mode: the task runs once, a pending session
is resumed with the template, and supervise ends when nothing is pending. With
no prompt (only options: -- claude, -- codex) it is interactive: a turn cut
short continues in the same terminal, and /exit ends supervise with 0. For
Claude Code, Codex and Gemini CLI no flag is needed: their profiles set up the
hooks (or the proxy) and the template for this run (--profiles off: none).`,
		[]string{"name", "resume-exec", "restart", "metrics-addr", "on-event", "state-dir", "profiles"}},
	{"Logs and events", "", []string{"log-keep"}},
	{"Resumes and parks", "", []string{"resume", "resume-limit", "max-turn-age", "resume-message", "resume-signal", "rerun-task", "fingerprint"}},
	{"Deadlines and hangs", "", []string{"turn-timeout", "phase-timeout", "start-timeout", "silence-timeout", "watchdog", "stop-timeout", "stop-signal"}},
	{"Limits and budgets", "", []string{"limit-wait", "limit-resumes", "max-tokens", "max-tokens-total", "max-rss", "max-open-sessions"}},
	{"The model-API proxy", "", []string{"api-proxy", "stream-stall"}},
	{"Crash loops", "", []string{"give-up", "guard-trip", "guard-gap", "healthy-after", "backoff-initial", "backoff-max"}},
	{"Service and other", "", []string{"user", "cgroup", "foreground", "log-level", "log-format", "keep-runs", "keep-sessions"}},
}

// helpWidth is the widest line PrintHelp writes (a long word may pass it).
const helpWidth = 80

// Usage writes supervise's help: top (the commands), then every run flag of
// fs in its group (PrintHelp), then the exit codes.
func Usage(w io.Writer, fs *flag.FlagSet, top string) {
	fmt.Fprint(w, top+"Run flags (supervise [run] [flags] -- AGENT [ARGS...]), in groups:\n")
	PrintHelp(w, fs)
	fmt.Fprint(w, "\n"+exitcode.Help())
}

// PrintHelp writes the flags of fs (the run flags, as Register adds them)
// for a person: in helpGroups' groups and order, each as --flag VALUE, its
// text wrapped under it, then its default when it has one.
func PrintHelp(w io.Writer, fs *flag.FlagSet) {
	listed := map[string]bool{}
	for _, g := range helpGroups {
		for _, n := range g.flags {
			listed[n] = true
		}
	}
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			rest = append(rest, f.Name)
		}
	})
	var b strings.Builder
	b.WriteString("Every flag is --flag VALUE or --flag=VALUE; a DURATION has a unit (10s, 1m30s).\n")
	for i, g := range helpGroups {
		names := g.flags
		if i == len(helpGroups)-1 {
			names = append(names[:len(names):len(names)], rest...)
		}
		fmt.Fprintf(&b, "\n%s:\n", g.title)
		if g.intro != "" {
			for _, l := range strings.Split(g.intro, "\n") {
				fmt.Fprintf(&b, "  %s\n", l)
			}
			b.WriteByte('\n')
		}
		for _, n := range names {
			if f := fs.Lookup(n); f != nil {
				writeFlag(&b, f)
			}
		}
	}
	io.WriteString(w, b.String())
}

// valueNames name the value of the flags whose type says too little
// (a string, an int).
var valueNames = map[string]string{
	"name": "NAME", "state-dir": "DIR", "resume-exec": "TEMPLATE", "restart": "MODE", "metrics-addr": "HOST:PORT",
	"resume": "auto|off", "resume-message": "TEMPLATE", "resume-signal": "SIGNAL", "stop-signal": "SIGNAL",
	"phase-timeout": "model=D,tool=D", "fingerprint": "FILE", "limit-wait": "on|off|DURATION", "max-rss": "SIZE",
	"api-proxy": "on|off", "user": "USER[:GROUP]", "cgroup": "auto|off", "foreground": "auto|always|never",
	"log-level": "LEVEL", "log-format": "text|json",
}

// writeFlag writes one flag: "  --name VALUE", then its text, indented.
func writeFlag(b *strings.Builder, f *flag.Flag) {
	value, usage := flag.UnquoteUsage(f)
	switch {
	case valueNames[f.Name] != "":
		value = valueNames[f.Name]
	case value == "int":
		value = "N"
	}
	head := "  --" + f.Name
	switch {
	case value == "":
	case strings.ContainsAny(value, "|="):
		head += " " + value
	default:
		head += " " + strings.ToUpper(value)
	}
	// Said once, above the groups, rather than under every duration.
	usage = strings.TrimSuffix(usage, " (a duration with a unit: 10s, 1m30s)")
	b.WriteString(head + "\n")
	if def := f.DefValue; def != "" && def != "0" && def != "0s" && def != "false" && def != "[]" {
		usage += " (default " + def + ")"
	}
	for _, l := range wrap(usage, helpWidth-6) {
		b.WriteString("      " + l + "\n")
	}
}

// wrap breaks s into lines of at most width columns, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) > width:
			lines = append(lines, line)
			line = w
		default:
			line += " " + w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
