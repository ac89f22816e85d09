// The words (words.go, limit.go, retrying.go, record.go, lost.go): what an
// agent CLI said as it ended, read by its profile's table: the tail of
// its output, as bytes, and where known which CLI it is. It answers three
// questions, all pure (no clock: the caller passes now; no I/O but the
// system's time zone database, read for a zone a limit's words name):
//
//   - Limit: did a usage or rate limit end the run, and when does it lift
//     if the CLI said so (Claude Code's 429 and usage-limit texts, Codex's
//     usage_limit_reached with its "try again at", Gemini CLI's
//     RESOURCE_EXHAUSTED with its RetryInfo delay)?
//   - TellingLine: which one line explains the death, to quote in a log, a
//     park reason or a continuation? Never a startup, telemetry or warning
//     log record: lines shaped like log records are skipped unless they are
//     errors, and a short table per CLI names the chatter each prints.
//   - Retrying: is the CLI, still running, waiting out a limit itself (and
//     until when), rather than hung?
//
// The texts are the pinned CLIs' own (Claude Code 2.1.197, Codex 0.171.0,
// Gemini CLI 0.61.0), recorded against integration/mockapi's provider
// answers: testdata holds them, docs/limits.md tabulates them.
//
// Use: the runner names the CLI once per launch with CLIOf(argv[0]) (of
// the command launched: the agent's, or the resume template's). At a
// death that was the agent's own exit with a failure code (no signal), it
// asks LimitOf of the tails it keeps (stdout's too: Claude Code writes its
// error there) with the death's time, and hands the machine Limit's
// Usage, Reset and Line with the exit; TellingLine is the quoted line in
// any case. While a turn is open and the start or silence deadline is
// due, Retrying says whether the CLI is waiting out a limit itself.

package profile

import (
	"bytes"
	"path"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// CLI is which agent CLI wrote a tail.
type CLI string

const (
	Unknown CLI = ""
	Claude  CLI = "claude"
	Codex   CLI = "codex"
	Gemini  CLI = "gemini"
)

// CLIOf names the CLI of a command's argv[0] by its base name ("claude",
// "/usr/bin/codex", "gemini.js", "claude.exe"); Unknown for anything else,
// a wrapper such as npx or node included.
func CLIOf(argv0 string) CLI {
	b := strings.ToLower(path.Base(strings.ReplaceAll(argv0, `\`, "/")))
	for _, ext := range []string{".exe", ".js", ".cmd", ".mjs"} {
		b = strings.TrimSuffix(b, ext)
	}
	switch CLI(b) {
	case Claude, Codex, Gemini:
		return CLI(b)
	}
	return Unknown
}

// maxTail bounds the bytes read of a tail (its end is kept): the work of
// both functions is linear in it.
const maxTail = 64 << 10

// maxLine bounds a returned line, in bytes (plus "...").
const maxLine = 300

// lines splits the end of tail into cleaned lines, empty ones and stack
// frames dropped.
func lines(tail []byte) []string {
	if len(tail) > maxTail {
		tail = tail[len(tail)-maxTail:]
	}
	var out []string
	for _, raw := range bytes.Split(tail, []byte("\n")) {
		l := clean(raw)
		if l == "" || backtrace(l) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// TellingLine picks the line of an agent's output tail that best explains
// its end, cleaned to one bounded line of printable text: the first line
// for which first reports true (nil: none), else the headline of a limit
// that ended the run (as LimitOf finds it), else the last that reads as an
// error, else the last that says anything. Log records that are not
// errors, and each CLI's known chatter (for Unknown, every CLI's), are
// never picked.
func TellingLine(tail []byte, cli CLI, first func(line string) bool) string {
	ls := lines(tail)
	if first != nil {
		for _, l := range ls {
			if first(l) {
				return bound(l)
			}
		}
	}
	if lim, _, ok := limitIn(ls, cli); ok {
		return lim.Line
	}
	var last, errLine string
	for _, l := range ls {
		if noise(l, cli) || dump(l) {
			continue
		}
		switch r := record(l); {
		case r == recordError:
			errLine, last = l, l
		case r != notRecord:
			continue
		default:
			last = l
			if strings.Contains(strings.ToLower(l), "error") {
				errLine = l
			}
		}
	}
	if errLine != "" {
		return bound(errLine)
	}
	return bound(last)
}

// dumpRe is a line of a JavaScript value as Node prints an error's fields
// ("  cause: {", "code: 429,", "message: '...' +", "'Please retry in 3s.',"):
// the error's own line came before it.
var dumpRe = lazy(`^(?:[a-z][A-Za-z0-9_$]*: .*(?:,|\{|\[| \+)|'.*'(?:,| \+)?)$`)

func dump(l string) bool {
	if !dumpRe().MatchString(l) {
		return false
	}
	key, _, _ := strings.Cut(l, ":")
	_, level := levels[strings.ToLower(key)]
	return !level // "error: disk full," is the CLI's error, not a field
}

// backtrace: a frame of a stack dump ("  3: <unknown>", "at f (x.js:1)").
func backtrace(l string) bool {
	if strings.HasPrefix(l, "at ") || l == "Stack backtrace:" {
		return true
	}
	i := strings.IndexByte(l, ':')
	return i > 0 && strings.Trim(l[:i], "0123456789") == ""
}

// clean drops terminal escapes and control bytes, and trims.
func clean(raw []byte) string {
	var b strings.Builder
	s := string(raw)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b: // ESC [ ... final byte
			i += n
			if i < len(s) && s[i] == '[' {
				i++
				for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
					i++
				}
				i++
			}
			continue
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0x7f:
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return strings.TrimSpace(b.String())
}

// bound cuts a line to maxLine bytes (on a rune's start) and marks the cut.
func bound(out string) string {
	if len(out) > maxLine {
		cut := maxLine
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "..."
	}
	return out
}

// lazy compiles a pattern at its first use, not at package init: every
// `supervise notify` hook call links this package (through the run flags)
// and paid 0.46 ms and 256 KB for these patterns before main (inittrace).
func lazy(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
