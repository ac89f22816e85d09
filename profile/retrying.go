package profile

import (
	"strconv"
	"strings"
	"time"
)

// The CLIs that wait out a limit themselves say so as they start to wait,
// then say nothing until they retry, for as long as the provider asked:
//
//   - Codex 0.171: "2026-12-01T23:43:53.122401Z  WARN
//     codex_core::responses_retry: stream disconnected - retrying sampling
//     request (1/5 in 85.998478085s)... sampling_error=exceeded retry
//     limit, last status: 429 Too Many Requests", then "ERROR:
//     Reconnecting... 1/5" (it waits any retry-after, 5 h included, up to
//     5 times);
//   - Gemini CLI 0.61: "Attempt 1 failed: ... Suggested retry after
//     78.9s.. Retrying after 79124ms...".
//
// Claude Code 2.1 waits a retry-after under a minute without a word.
var (
	codexRetryRe  = lazy(`(?i)\bretrying sampling request \((\d+)/(\d+) in ([0-9]{1,12}(?:\.[0-9]+)?)(ms|s)\)`)
	geminiRetryRe = lazy(`(?i)\bretrying after ([0-9]{1,12}(?:\.[0-9]+)?)(ms|s)\b`)
	rfc3339Re     = lazy(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)
)

// MaxRetry is the longest wait a CLI's retry words are believed to name:
// the machine's one cap on what the agent's words can make supervise wait
// (machine.MaxWordsWait, which it enforces again). Words naming a longer
// wait (Codex's record says "in 30000000s") are not a wait at all.
const MaxRetry = 24 * time.Hour

// Retrying reports whether the CLI's output so far ends with it waiting to
// retry a refused request, and until when: the line's own timestamp plus
// the delay where the line has one (Codex's log records), else since plus
// the delay, since being when the tail last grew (the caller knows it; a
// delay read from the tail is measured from when it was written). For a
// start or silence deadline: a CLI waiting out a limit it was told to is
// neither hung nor silent by fault, and the wait is the limit's.
func Retrying(tail []byte, cli CLI, since time.Time) (time.Time, bool) {
	ls := lines(tail)
	for i := len(ls) - 1; i >= 0; i-- {
		l := ls[i]
		if noise(l, cli) || dump(l) {
			continue
		}
		if (cli == Unknown || cli == Codex) && strings.HasPrefix(l, "ERROR: Reconnecting...") {
			continue // Codex's line after its retry record
		}
		var n, unit string
		if m := codexRetryRe().FindStringSubmatch(l); m != nil && (cli == Unknown || cli == Codex) {
			n, unit = m[3], m[4]
		} else if m := geminiRetryRe().FindStringSubmatch(l); m != nil && (cli == Unknown || cli == Gemini) {
			n, unit = m[1], m[2]
		} else {
			return time.Time{}, false // the last thing said is something else
		}
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f < 0 {
			return time.Time{}, false
		}
		if strings.EqualFold(unit, "ms") {
			f /= 1000
		}
		if f > MaxRetry.Seconds() {
			return time.Time{}, false // a longer wait is not believed (and would overflow a Duration)
		}
		d := time.Duration(f * float64(time.Second))
		from := since
		if s := rfc3339Re().FindString(l); s != "" {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil && !t.After(since.Add(time.Minute)) {
				from = t
			}
		}
		return from.Add(d), true
	}
	return time.Time{}, false
}
