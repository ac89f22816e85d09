package profile

import (
	"strconv"
	"strings"
	"time"
)

// Limit is a usage or rate limit that ended a run, as the CLI said it.
type Limit struct {
	// Usage: the words name a plan's usage or a quota ("usage limit",
	// "daily quota"), not only a request rate; such a limit lifts in
	// hours, not seconds.
	Usage bool
	// Reset is when the CLI said the limit lifts, zero if it did not say
	// (Claude Code with an API key names no time).
	Reset time.Time
	// Line is the line that says so, cleaned and bounded.
	Line string
}

// limitWords are what each CLI prints when a limit refused its request
// (lower case, contained in a line, or with start: beginning it); usage
// marks those that name a plan's usage or a quota. Claude Code's are
// matched at the line's start: -p prints the error as its whole answer on
// stdout, where the model's own words also go.
var limitWords = map[CLI][]struct {
	words        string
	usage, start bool
}{
	Claude: {
		{"api error: request rejected (429)", false, true},                  // 2.1 with an API key: "API Error: Request rejected (429) · <the API's message>"
		{"api error: server is temporarily limiting requests", false, true}, // a subscriber's 429 that is not their usage limit
		{"api error: 429", false, true},
		{"claude ai usage limit reached", true, true}, // older -p: "Claude AI usage limit reached|<unix reset>"
		{"you've hit your", true, true},               // a subscriber's: "You've hit your session limit · resets 3pm (UTC)"
		{"you’ve hit your", true, true},
		{"you're out of usage credits", true, true},
		{"you're out of extra usage", true, true},
	},
	Codex: {
		{"you’ve hit your usage limit", true, false}, // 0.171: "ERROR: You’ve hit your usage limit. ... try again at 11:42 PM."
		{"you've hit your usage limit", true, false},
		{"usage_limit_reached", true, false},
		{"usage_not_included", true, false},
		{"rate limit reached", false, false},
		{"exceeded retry limit, last status: 429", false, false},
		{"429 too many requests", false, false},
	},
	Gemini: {
		{"terminalquotaerror", false, false}, // 0.61: "... TerminalQuotaError: You have exhausted your daily quota on this model."
		{"retryablequotaerror", false, false},
		{"resource_exhausted", false, false},
		{"exhausted your daily quota", true, false},
		{"quota exceeded for metric", true, false},
		{"you exceeded your current quota", true, false},
	},
}

// inProgress: the CLI is waiting out the limit itself, not giving up
// (Gemini CLI: "Suggested retry after 82.3s.. Retrying after 82726ms...").
var inProgressRe = lazy(`(?i)\bretrying\b|\breconnecting\b|attempt \d+ failed`)

// limitOf matches l against cli's words (Unknown: every CLI's).
func limitOf(l string, cli CLI) (hit, usage bool) {
	low := strings.ToLower(l)
	for c, ws := range limitWords {
		if cli != Unknown && c != cli {
			continue
		}
		for _, w := range ws {
			if (w.start && strings.HasPrefix(low, w.words)) || (!w.start && strings.Contains(low, w.words)) {
				hit, usage = true, usage || w.usage
			}
		}
	}
	if hit && !usage && !strings.Contains(low, "not your usage limit") {
		usage = strings.Contains(low, "usage limit") || strings.Contains(low, "daily quota") || strings.Contains(low, "current quota")
	}
	return hit, usage
}

// LimitOf reports whether a usage or rate limit ended the run whose output
// tail this is, and when it lifts if the CLI said. A limit ended the run
// when a line says one was hit and no other error comes after it, nor a
// line saying the CLI is retrying. Relative resets ("retry in 83.5s") are
// taken from now; clock times without a date ("try again at 11:42 PM",
// "resets 3pm") are read in now's location, as the CLI, run beside
// supervise, wrote them: the next such time after now, at the end of the
// minute named (the CLIs cut the seconds). Claude Code names the zone of a
// clock time ("resets 3pm (America/New_York)"): it is read in that zone
// (the system's time zone database); a zone that database does not know
// is no time given (zero Reset: the caller guesses, and says so). A date
// that does not exist ("Feb 30") is no time given either, never read as
// another day. A reset far ahead is handed as named: the one cap on what
// words make supervise wait (MaxRetry, the machine's MaxWordsWait) is the
// machine's, which waits only to it and says so. A reset more than an
// hour past is not believed (zero Reset).
//
// Call it for a run that ended by itself with a failure (an exit code, not
// a signal): a run that was killed did not give up on a limit.
func LimitOf(tail []byte, cli CLI, now time.Time) (Limit, bool) {
	ls := lines(tail)
	lim, at, ok := limitIn(ls, cli)
	if !ok {
		return Limit{}, false
	}
	for _, l := range ls[at:] {
		if r, ok := resetOf(l, now); ok {
			lim.Reset = r // the last said wins: it is the newest
		}
	}
	if !lim.Reset.IsZero() && lim.Reset.Sub(now) < -time.Hour {
		lim.Reset = time.Time{}
	}
	return lim, true
}

// limitIn finds the last run of lines that say a limit was hit, with
// nothing after it that says the run went on or failed otherwise, and the
// index of its first line.
func limitIn(ls []string, cli CLI) (Limit, int, bool) {
	at := -1 // the first line of the last run of limit lines
	var lim Limit
	for i, l := range ls {
		if noise(l, cli) || dump(l) {
			continue
		}
		if record(l) == recordOther {
			// A warning or info record says no limit ended the run; one
			// that says the CLI retries means a limit before it did not.
			if inProgressRe().MatchString(l) {
				at = -1
			}
			continue
		}
		if hit, usage := limitOf(l, cli); hit {
			if at < 0 {
				at = i
				lim = Limit{Line: bound(l)} // the run's headline
			}
			lim.Usage = lim.Usage || usage
			continue
		}
		if at >= 0 && (inProgressRe().MatchString(l) || otherError(l)) {
			at = -1 // a later error, or the CLI retried: not how it ended
		}
	}
	if at < 0 {
		return Limit{}, 0, false
	}
	return lim, at, true
}

// otherError: a line that reads as an error and is not a limit's.
func otherError(l string) bool {
	switch record(l) {
	case recordError:
		return true
	case recordOther:
		return false
	}
	low := strings.ToLower(l)
	if strings.HasPrefix(low, "suggested retry after") || strings.HasPrefix(low, "please retry in") {
		return false
	}
	return strings.Contains(low, "error")
}

var (
	// Relative: Gemini's "Please retry in 83.5s." and "Suggested retry
	// after 17992.6s.", a RetryInfo "retryDelay": "37s", a
	// "resets_in_seconds": 90, a "retry-after: 90", "try again in 2 hours".
	retryInRe   = lazy(`(?i)(?:please retry in|suggested retry after|"?retrydelay"?\s*[:=]\s*"?)\s*([0-9]+(?:\.[0-9]+)?)(ms|s)\b`)
	resetsInRe  = lazy(`(?i)"?resets_in_seconds"?\s*[:=]\s*([0-9]{1,10})\b`)
	retryAftRe  = lazy(`(?i)\bretry-after\s*[:=]\s*([0-9]{1,10})\b`)
	tryInRe     = lazy(`(?i)\btry again in\s+((?:\d{1,6}\s*(?:days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+)`)
	durPartRe   = lazy(`(?i)(\d{1,6})\s*(days?|d|hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
	unixRe      = lazy(`(?i)(?:"?resets_at"?\s*[:=]\s*|anthropic-ratelimit-unified-reset\s*[:=]\s*|usage limit reached\|)([0-9]{9,11})\b`)
	tryAtRe     = lazy(`(?i)\btry again at\s+(?:([A-Z][a-z]{2})\s+(\d{1,2})(?:st|nd|rd|th)?,\s+(\d{4})\s+)?(\d{1,2}):(\d\d)\s*([AP]M)\b`)
	resetsClkRe = lazy(`(?i)\bresets\s+(?:at\s+)?(?:([A-Z][a-z]{2})\s+(\d{1,2}),\s+(?:(\d{4}),\s+)?)?(\d{1,2})(?::(\d\d))?\s*([ap]m)\b(?:\s*\(([^)]{1,40})\))?`)
)

var months = map[string]time.Month{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}

// resetOf reads a reset time from one line.
func resetOf(l string, now time.Time) (time.Time, bool) {
	if m := unixRe().FindStringSubmatch(l); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		t := time.Unix(n, 0)
		if t.After(now.Add(maxAfter)) {
			t = now.Add(maxAfter)
		}
		return t.In(now.Location()), true
	}
	if m := resetsInRe().FindStringSubmatch(l); m != nil {
		n, _ := strconv.ParseFloat(m[1], 64)
		return after(now, n), true
	}
	if m := retryInRe().FindStringSubmatch(l); m != nil {
		f, err := strconv.ParseFloat(m[1], 64)
		if err == nil && f < 1e9 {
			unit := time.Second
			if strings.EqualFold(m[2], "ms") {
				unit = time.Millisecond
			}
			return now.Add(time.Duration(f * float64(unit))), true
		}
	}
	if m := retryAftRe().FindStringSubmatch(l); m != nil {
		n, _ := strconv.ParseFloat(m[1], 64)
		return after(now, n), true
	}
	if m := tryInRe().FindStringSubmatch(l); m != nil {
		var secs float64
		for _, p := range durPartRe().FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.ParseFloat(p[1], 64)
			switch u := strings.ToLower(p[2]); {
			case strings.HasPrefix(u, "d"):
				secs += n * 86400
			case strings.HasPrefix(u, "h"):
				secs += n * 3600
			case strings.HasPrefix(u, "m"):
				secs += n * 60
			default:
				secs += n
			}
		}
		if secs > 0 {
			return after(now, secs), true
		}
	}
	if m := tryAtRe().FindStringSubmatch(l); m != nil {
		return clock(now, m[1], m[2], m[3], m[4], m[5], m[6])
	}
	if m := resetsClkRe().FindStringSubmatch(l); m != nil {
		loc, ok := zone(m[7], now)
		if !ok {
			return time.Time{}, false // a zone not known: no time given
		}
		return clock(now.In(loc), m[1], m[2], m[3], m[4], m[5], m[6])
	}
	return time.Time{}, false
}

// zone is the location a clock time names in parentheses ("UTC",
// "America/New_York"): now's when it names none; false for a name the
// time zone database does not know ("Local" included: the CLI's own zone
// is not supervise's to guess).
func zone(name string, now time.Time) (*time.Location, bool) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return now.Location(), true
	case strings.EqualFold(name, "UTC"), strings.EqualFold(name, "GMT"):
		return time.UTC, true
	case name == "Local":
		return nil, false
	}
	loc, err := time.LoadLocation(name)
	return loc, err == nil
}

// maxAfter bounds a relative reset read from words, so the sum never
// overflows a Duration: far past any cap, which the machine applies.
const maxAfter = 100 * 365 * 24 * time.Hour

// after is now plus secs seconds, at most maxAfter.
func after(now time.Time, secs float64) time.Time {
	if secs >= maxAfter.Seconds() {
		return now.Add(maxAfter)
	}
	return now.Add(time.Duration(secs * float64(time.Second)))
}

// clock builds a time from a 12-hour clock and an optional month, day and
// year, in now's location. Without a date it is the next such time after
// now (a minute's slack); with a month and day but no year, the next such
// date. A date that does not exist (Feb 30, Feb 29 of a year that has
// none) is refused, never read as another day. The CLIs print the minute the limit lifts in, its seconds cut
// (Codex's 23:55:28 is "11:55 PM"): the time returned is that minute's
// end, so a wait for it is never short.
func clock(now time.Time, mon, day, year, hour, minute, ampm string) (time.Time, bool) {
	h, _ := strconv.Atoi(hour)
	mi := 0
	if minute != "" {
		mi, _ = strconv.Atoi(minute)
	}
	if h < 1 || h > 12 || mi > 59 {
		return time.Time{}, false
	}
	h %= 12
	if strings.EqualFold(ampm, "pm") {
		h += 12
	}
	loc := now.Location()
	if mon == "" {
		t := time.Date(now.Year(), now.Month(), now.Day(), h, mi, 0, 0, loc)
		if t.Before(now.Add(-time.Minute)) {
			t = t.AddDate(0, 0, 1)
		}
		return t.Add(time.Minute), true
	}
	m, ok := months[strings.ToLower(mon)]
	d, _ := strconv.Atoi(day)
	if !ok || d < 1 || d > 31 {
		return time.Time{}, false
	}
	y := now.Year()
	if year != "" {
		y, _ = strconv.Atoi(year)
	}
	t, ok := date(y, m, d, h, mi, loc)
	if year == "" && (!ok || t.Before(now.Add(-time.Minute))) {
		t, ok = date(y+1, m, d, h, mi, loc)
	}
	if !ok {
		return time.Time{}, false
	}
	return t.Add(time.Minute), true
}

// date is the time at y-m-d h:mi in loc, false when that day does not
// exist (time.Date would move it into the next month).
func date(y int, m time.Month, d, h, mi int, loc *time.Location) (time.Time, bool) {
	t := time.Date(y, m, d, h, mi, 0, 0, loc)
	return t, t.Day() == d && t.Month() == m
}
