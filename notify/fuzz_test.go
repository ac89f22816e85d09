package notify

import (
	"errors"
	"github.com/supervise-dev/supervise/marker"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		// Valid messages, one per event and standard key.
		"READY=1", "STOPPING=1\n", "WATCHDOG=1", "WATCHDOG=trigger", "STATUS=working",
		"WATCHDOG_USEC=30000000", "EXTEND_TIMEOUT_USEC=5000000", "BARRIER=1",
		"WATCHDOG=1\nX_SUPERVISE_SESSION=s1",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_TURN=t1\nX_SUPERVISE_PROMPT=fix it",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_TURN=t1\nX_SUPERVISE_OUTCOME=completed",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=waiting",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_TOOL=bash",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=resumed\nX_SUPERVISE_TURN=t1",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=closed",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=heartbeat",
		// Bad input classes (reliability.md 5 D, 31-38).
		"", "\x00", "READY=1\x00", "REA\x00DY=1", "READY=1\x00\x00", "STATUS=\xff\xfe",
		"READY=1\r\n", "READY", "=1", "\n\n\n", "READY=0", "MAINPID=1", "MAINPID=1\nREADY=1",
		"WATCHDOG_USEC=0", "WATCHDOG_USEC=-1", "WATCHDOG_USEC=18446744073709551616",
		"EXTEND_TIMEOUT_USEC=99999999999999999999", "BARRIER=1\nREADY=1",
		"X_SUPERVISE_EVENT=turn-end", "X_SUPERVISE_SESSION=s1\nX_SUPERVISE_SESSION=s2",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-end",
		"X_SUPERVISE_SESSION=\x01\nX_SUPERVISE_EVENT=closed",
		"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_PROMPT=" + strings.Repeat("€", 400),
		"STATUS=" + strings.Repeat("x", MaxDatagram),
		strings.Repeat("A=\n", 1365),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			for _, s := range []error{ErrEmpty, ErrNUL, ErrInvalidUTF8, ErrTooLarge, ErrMalformed, ErrProtocol} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("Parse(%q) error %v wraps no sentinel", b, err)
		}
		for _, s := range []struct {
			name, v string
			max     int
		}{
			{"Status", m.Status, MaxDatagram},
			{"Session", m.Session, MaxIDLen},
			{"Turn", m.Turn, MaxIDLen},
			{"Tool", m.Tool, MaxIDLen},
			{"Prompt", m.Prompt, MaxPromptLen},
			{"Effect", m.Effect, MaxEffectLen},
		} {
			if !utf8.ValidString(s.v) || strings.ContainsRune(s.v, 0) || len(s.v) > s.max {
				t.Fatalf("Parse(%q).%s = %q: invalid or longer than %d", b, s.name, s.v, s.max)
			}
		}
		switch m.Event {
		case marker.EventNone, marker.EventTurnBegin, marker.EventWaiting, marker.EventResumed, marker.EventClosed, marker.EventHeartbeat:
		case marker.EventTurnEnd:
			if m.Outcome == "" {
				t.Fatalf("Parse(%q): turn-end without outcome", b)
			}
		case marker.EventEffect:
			if m.Effect == "" {
				t.Fatalf("Parse(%q): effect event without key", b)
			}
		case marker.EventPhase:
			if m.Phase == "" {
				t.Fatalf("Parse(%q): phase event without phase", b)
			}
		default:
			t.Fatalf("Parse(%q).Event = %q", b, m.Event)
		}
		if m.Event != marker.EventNone && m.Session == "" {
			t.Fatalf("Parse(%q): event %q without session", b, m.Event)
		}
		if m.WatchdogUSec > MaxUSec || m.ExtendTimeoutUSec > MaxUSec {
			t.Fatalf("Parse(%q): timeout over MaxUSec: %+v", b, m)
		}
		if m.PID != 0 || m.UID != 0 || m.Fd != nil {
			t.Fatalf("Parse(%q) filled server-only fields: %+v", b, m)
		}
		if m2, err := Parse(b); err != nil || m2 != m {
			t.Fatalf("Parse(%q) is not deterministic", b)
		}
	})
}
