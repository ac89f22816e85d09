package notify

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/supervise-dev/supervise/marker"
)

// Limits of the wire format.
const (
	// MaxDatagram is the largest datagram accepted, in bytes (systemd's
	// NOTIFY_BUFFER_MAX, PIPE_BUF on Linux). Longer datagrams are dropped
	// whole, never parsed as a prefix.
	MaxDatagram = 4096
	// MaxIDLen is the longest session, turn or tool id, in bytes.
	MaxIDLen = 256
	// MaxPromptLen is the longest prompt excerpt kept, in bytes; longer
	// prompts are cut at a rune boundary.
	MaxPromptLen = 1024
	// MaxDetailLen is the longest X_SUPERVISE_DETAIL kept, in bytes; a
	// longer one is cut at a rune boundary and ends with "…".
	MaxDetailLen = 512
	// MaxEffectLen is the longest X_SUPERVISE_EFFECT key, in bytes; a longer
	// key is refused (EffectKey shortens one deterministically).
	MaxEffectLen = 256
	// MaxUSec is the largest WATCHDOG_USEC or EXTEND_TIMEOUT_USEC honoured:
	// 24 hours in microseconds. Larger values are ignored.
	MaxUSec = 24 * 60 * 60 * 1000 * 1000
)

// Sentinel errors returned (wrapped) by Parse. Test them with errors.Is.
var (
	// ErrEmpty reports a zero-length datagram.
	ErrEmpty = errors.New("notify: empty datagram")
	// ErrNUL reports a NUL byte anywhere but at the very end.
	ErrNUL = errors.New("notify: NUL byte in datagram")
	// ErrInvalidUTF8 reports a datagram that is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("notify: invalid UTF-8")
	// ErrTooLarge reports a datagram longer than MaxDatagram.
	ErrTooLarge = errors.New("notify: datagram too large")
	// ErrMalformed reports a line that is not KEY=VALUE, or a private key
	// given twice.
	ErrMalformed = errors.New("notify: malformed datagram")
	// ErrProtocol reports well-formed lines that break the protocol: an
	// event without a session, an unknown event, outcome or phase, a bad id,
	// or BARRIER=1 mixed with other assignments.
	ErrProtocol = errors.New("notify: protocol violation")
)

// Parse parses one datagram. It does no I/O and never keeps a reference to
// b. Unknown keys (MAINPID=, ERRNO=, FDSTORE=, other X_ keys) are ignored;
// an unusable value of a standard key is ignored; any other violation is
// an error wrapping one of the sentinels above.
func Parse(b []byte) (marker.Message, error) {
	var p parser
	return p.parse(b)
}

// Bits of parser.seen, one per private key.
const (
	seenSession = 1 << iota
	seenEvent
	seenTurn
	seenOutcome
	seenPhase
	seenTool
	seenPrompt
	seenWait
	seenDetail
	seenEffect
)

// parser parses datagrams. It remembers the last session id so that a
// stream of heartbeats from one session converts it to a string only once.
type parser struct {
	session string
}

func (p *parser) parse(b []byte) (marker.Message, error) {
	var m marker.Message
	if len(b) == 0 {
		return m, ErrEmpty
	}
	if len(b) > MaxDatagram {
		return m, fmt.Errorf("%d bytes: %w", len(b), ErrTooLarge)
	}
	if b[len(b)-1] == 0 { // systemd tolerates one trailing NUL
		b = b[:len(b)-1]
		if len(b) == 0 {
			return m, ErrEmpty
		}
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return m, fmt.Errorf("offset %d: %w", i, ErrNUL)
	}
	if !utf8.Valid(b) {
		return m, ErrInvalidUTF8
	}

	var (
		seen                                            uint
		assignments                                     int
		session, event, turn, outcome, phase, tool, pro []byte
		wait                                            []byte
		detail, effect                                  []byte
	)
	for line := 1; len(b) > 0; line++ {
		l := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(l) == 0 {
			continue
		}
		i := bytes.IndexByte(l, '=')
		if i <= 0 {
			return m, fmt.Errorf("line %d is not KEY=VALUE: %w", line, ErrMalformed)
		}
		assignments++
		k, v := l[:i], l[i+1:]
		var bit uint
		switch string(k) {
		case "READY":
			m.Ready = m.Ready || string(v) == "1"
		case "STOPPING":
			m.Stopping = m.Stopping || string(v) == "1"
		case "BARRIER":
			m.Barrier = m.Barrier || string(v) == "1"
		case "WATCHDOG":
			switch string(v) {
			case "1":
				m.Watchdog = true
			case "trigger":
				m.WatchdogTrigger = true
			}
		case "STATUS":
			if validText(v, true) {
				m.Status, m.HasStatus = string(v), true
			}
		case "WATCHDOG_USEC":
			if u, ok := parseUSec(v); ok {
				m.WatchdogUSec = u
			}
		case "EXTEND_TIMEOUT_USEC":
			if u, ok := parseUSec(v); ok {
				m.ExtendTimeoutUSec = u
			}
		case "X_SUPERVISE_SESSION":
			bit, session = seenSession, v
		case "X_SUPERVISE_EVENT":
			bit, event = seenEvent, v
		case "X_SUPERVISE_TURN":
			bit, turn = seenTurn, v
		case "X_SUPERVISE_OUTCOME":
			bit, outcome = seenOutcome, v
		case "X_SUPERVISE_PHASE":
			bit, phase = seenPhase, v
		case "X_SUPERVISE_TOOL":
			bit, tool = seenTool, v
		case "X_SUPERVISE_PROMPT":
			bit, pro = seenPrompt, v
		case "X_SUPERVISE_WAIT":
			bit, wait = seenWait, v
		case "X_SUPERVISE_DETAIL":
			bit, detail = seenDetail, v
		case "X_SUPERVISE_EFFECT":
			bit, effect = seenEffect, v
		}
		if seen&bit != 0 {
			return m, fmt.Errorf("line %d repeats %s: %w", line, k, ErrMalformed)
		}
		seen |= bit
	}

	if m.Barrier && assignments != 1 {
		return m, fmt.Errorf("BARRIER=1 with other assignments: %w", ErrProtocol)
	}
	if seen == 0 {
		return m, nil
	}
	if seen&seenSession == 0 {
		return m, fmt.Errorf("X_SUPERVISE_ keys without X_SUPERVISE_SESSION: %w", ErrProtocol)
	}
	if !validSession(session) {
		return m, fmt.Errorf("bad session id (1..%d bytes of printable text, not beginning with '-'): %w", MaxIDLen, ErrProtocol)
	}
	if string(session) != p.session {
		p.session = string(session)
	}
	m.Session = p.session

	if seen&seenEvent != 0 {
		switch e := marker.Event(event); e {
		case marker.EventTurnBegin, marker.EventTurnEnd, marker.EventWaiting, marker.EventPhase, marker.EventResumed, marker.EventClosed, marker.EventHeartbeat, marker.EventEffect:
			m.Event = e
		default:
			return m, fmt.Errorf("unknown event %q: %w", event, ErrProtocol)
		}
	} else if m.Watchdog {
		m.Event = marker.EventHeartbeat
	}
	if seen&seenTurn != 0 {
		if !validID(turn) {
			return m, fmt.Errorf("bad turn id: %w", ErrProtocol)
		}
		m.Turn = string(turn)
	}
	if seen&seenTool != 0 {
		if !validID(tool) {
			return m, fmt.Errorf("bad tool name: %w", ErrProtocol)
		}
		m.Tool = string(tool)
	}
	if seen&seenOutcome != 0 {
		if o := marker.Outcome(outcome); o.Valid() {
			m.Outcome = o
		} else {
			return m, fmt.Errorf("unknown outcome %q: %w", outcome, ErrProtocol)
		}
	}
	if m.Event == marker.EventTurnEnd && m.Outcome == "" {
		return m, fmt.Errorf("turn-end without outcome: %w", ErrProtocol)
	}
	if seen&seenPhase != 0 {
		if ph := marker.Phase(phase); ph.Valid() {
			m.Phase = ph
		} else {
			return m, fmt.Errorf("unknown phase %q: %w", phase, ErrProtocol)
		}
	}
	if m.Event == marker.EventPhase && m.Phase == "" {
		return m, fmt.Errorf("phase event without phase: %w", ErrProtocol)
	}
	if seen&seenWait != 0 {
		switch w := marker.Wait(wait); w {
		case marker.WaitInput, marker.WaitApproval, marker.WaitReconnect:
			m.Wait = w
		default:
			return m, fmt.Errorf("unknown wait %q: %w", wait, ErrProtocol)
		}
	}
	if m.Event == marker.EventWaiting && m.Wait == "" {
		m.Wait = marker.WaitInput
	}
	if seen&seenPrompt != 0 {
		m.Prompt = string(cut(pro, MaxPromptLen))
	}
	if seen&seenDetail != 0 && len(detail) > 0 {
		if m.Phase != marker.PhaseTool {
			return m, fmt.Errorf("X_SUPERVISE_DETAIL without X_SUPERVISE_PHASE=tool: %w", ErrProtocol)
		}
		if !validText(detail, false) {
			return m, fmt.Errorf("X_SUPERVISE_DETAIL with a control character (one line, no tabs): %w", ErrProtocol)
		}
		m.Detail = bounded(detail, MaxDetailLen)
	}
	switch {
	case seen&seenEffect != 0 && m.Event != marker.EventEffect:
		return m, fmt.Errorf("X_SUPERVISE_EFFECT without X_SUPERVISE_EVENT=effect: %w", ErrProtocol)
	case m.Event == marker.EventEffect && seen&seenEffect == 0:
		return m, fmt.Errorf("effect event without X_SUPERVISE_EFFECT: %w", ErrProtocol)
	case m.Event == marker.EventEffect:
		if len(effect) == 0 || len(effect) > MaxEffectLen || !validText(effect, false) {
			return m, fmt.Errorf("bad effect key (1..%d bytes of one line): %w", MaxEffectLen, ErrProtocol)
		}
		m.Effect = string(effect)
	}
	return m, nil
}

// parseUSec parses a WATCHDOG_USEC or EXTEND_TIMEOUT_USEC value; ok is
// false for anything but a decimal in 1..MaxUSec.
func parseUSec(v []byte) (uint64, bool) {
	u, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil || u == 0 || u > MaxUSec {
		return 0, false
	}
	return u, true
}

// validID reports whether v is a usable session, turn or tool id: 1 to
// MaxIDLen bytes of valid UTF-8 without control characters.
func validID(v []byte) bool {
	return len(v) > 0 && len(v) <= MaxIDLen && validText(v, false)
}

// validSession reports whether v is a usable session id: a valid id that
// does not begin with '-'. Session ids land in --resume-exec argv templates
// ("codex exec resume {session}"), where such a value would be read as an
// option of its own.
func validSession(v []byte) bool {
	return validID(v) && v[0] != '-'
}

// validText reports whether v is valid UTF-8 without control characters,
// except tabs when tab is true.
func validText(v []byte, tab bool) bool {
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && !(tab && c == '\t')) || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(v[i:])
		if (r == utf8.RuneError && n == 1) || unicode.IsControl(r) {
			return false
		}
		i += n
	}
	return true
}

// bounded returns v if it has at most n bytes, else its longest prefix
// that, followed by "…", has at most n bytes and ends at a rune boundary,
// followed by "…": a cut detail says it was cut.
func bounded(v []byte, n int) string {
	if len(v) <= n {
		return string(v)
	}
	const ellipsis = "…"
	return string(cut(v, n-len(ellipsis))) + ellipsis
}

// cut returns the longest prefix of v that has at most n bytes and ends
// at a rune boundary.
func cut(v []byte, n int) []byte {
	if len(v) <= n {
		return v
	}
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n]
}
