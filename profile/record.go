package profile

import (
	"strings"
)

// recordKind is what a line is as a log record.
type recordKind int

const (
	notRecord   recordKind = iota // prose: what the CLI says to its user
	recordOther                   // a log record below error: info, warn, debug, a tagged phase
	recordError                   // a log record of level error or worse
)

// The shapes of a log record, tried on a cleaned line:
//
//   - a timestamp, then a level: "2026-12-01T23:40:55.781832Z  WARN
//     codex_models_manager::model_info: ..." (Rust's tracing), "23:40:55
//     INFO ...", "2026/12/01 23:40:55 [warn] ...";
//   - a level word and a colon or a bracketed tag first: "WARNING: ...",
//     "warning: ...", "[ERROR] ...", "[STARTUP] ..." (a tag that is not a
//     level is an info record, an error only if it says so);
//   - an upper-case level and a target: "WARN codex_core::x: ...";
//   - logfmt or JSON with a level: "level=warn msg=...", {"level":"info",...}.
var (
	stampRe  = lazy(`^(?:\d{4}[-/]\d\d[-/]\d\d[T ])?\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?\s+`)
	tagRe    = lazy(`^\[([A-Za-z][A-Za-z0-9 _./-]{0,30})\]:?\s*`)
	wordRe   = lazy(`^([A-Za-z]+):\s`)
	targetRe = lazy(`^([A-Z]+)\s+[A-Za-z_][\w:.-]*:\s`)
	fieldRe  = lazy(`(?i)(?:^|[\s,{])"?(?:level|lvl|severity)"?\s*[=:]\s*"?([a-z]+)`)
)

// levels maps a level word (lower case) to whether it is an error.
var levels = map[string]bool{
	"trace": false, "debug": false, "info": false, "notice": false, "warn": false, "warning": false,
	"error": true, "err": true, "fatal": true, "critical": true, "crit": true, "panic": true, "alert": true, "emerg": true,
}

// record says whether l is a log record and whether one of error level.
func record(l string) recordKind {
	if m := fieldRe().FindStringSubmatch(l); m != nil && (strings.HasPrefix(l, "{") || strings.Contains(l, "=")) {
		if e, ok := levels[strings.ToLower(m[1])]; ok {
			return kind(e)
		}
	}
	rest, stamped := l, false
	if m := stampRe().FindString(l); m != "" {
		rest, stamped = l[len(m):], true
	}
	if m := tagRe().FindStringSubmatch(rest); m != nil {
		if e, ok := levels[strings.ToLower(m[1])]; ok {
			return kind(e)
		}
		// A component's or a phase's tag ("[STARTUP]", "[telemetry]"):
		// chatter, unless the record itself says error.
		return kind(saysError(rest[len(m[0]):]))
	}
	if m := wordRe().FindStringSubmatch(rest); m != nil {
		if e, ok := levels[strings.ToLower(m[1])]; ok {
			return kind(e)
		}
	}
	if m := targetRe().FindStringSubmatch(rest); m != nil {
		if e, ok := levels[strings.ToLower(m[1])]; ok {
			return kind(e)
		}
	}
	if stamped {
		// A timestamp then a level word anywhere first ("23:40:55 warn x").
		f := strings.Fields(rest)
		if len(f) > 0 {
			if e, ok := levels[strings.ToLower(strings.Trim(f[0], "[]:"))]; ok {
				return kind(e)
			}
		}
	}
	return notRecord
}

func kind(isError bool) recordKind {
	if isError {
		return recordError
	}
	return recordOther
}

func saysError(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "error") || strings.Contains(s, "fatal")
}

// chatter is each CLI's known noise: lines (lower case, by prefix) that
// never explain a death, whatever they look like. Most are log records the
// general rule skips already; the table holds what it cannot tell, and
// says which CLI prints what.
var chatter = map[CLI][]string{
	Gemini: {
		"[startup] ",                       // "[STARTUP] Cannot measure phase 'cleanup_ops': start mark ... not found"
		"warning: basic terminal detected", // TERM=dumb
		"warning: 256-color support not detected",
		"ripgrep is not available",
		"loaded cached credentials",
		"an unexpected critical error occurred:[object object]", // its wrapper's line after the real error
	},
	Codex: {
		"warn codex_models_manager::model_info: unknown model", // "... Unknown model gpt-mock is used. This will use fallback model metadata."
		"warning: proceeding, even though we could not create path aliases",
		"warning: codex could not find bubblewrap",
		"warning: model metadata for",
		"reading additional input from stdin",
		"openai codex v",
		"--------",
		"workdir: ", "model: ", "provider: ", "approval: ", "sandbox: ", "reasoning effort: ", "reasoning summaries: ", "session id: ",
	},
	Claude: {},
}

// noise reports whether l is known chatter of cli (Unknown: of any CLI).
func noise(l string, cli CLI) bool {
	low := strings.ToLower(l)
	if strings.Trim(low, "{}[](),;-=_*#~ ") == "" {
		return true // a brace or a rule of a dump or a banner
	}
	for c, prefixes := range chatter {
		if cli != Unknown && c != cli {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(low, p) {
				return true
			}
		}
	}
	return false
}
