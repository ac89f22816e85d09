package notify

import (
	"errors"
	"github.com/supervise-dev/supervise/marker"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("a", n) }
	sess := "X_SUPERVISE_SESSION=s1\n"
	tests := []struct {
		name string
		in   string
		want marker.Message
		err  error
	}{
		// Framing.
		{name: "ready", in: "READY=1", want: marker.Message{Ready: true}},
		{name: "trailing newline", in: "READY=1\n", want: marker.Message{Ready: true}},
		{name: "trailing NUL", in: "READY=1\x00", want: marker.Message{Ready: true}},
		{name: "blank lines", in: "\n\nREADY=1\n\n\n", want: marker.Message{Ready: true}},
		{name: "empty", in: "", err: ErrEmpty},
		{name: "only NUL", in: "\x00", err: ErrEmpty},
		{name: "two trailing NULs", in: "READY=1\x00\x00", err: ErrNUL},
		{name: "embedded NUL", in: "REA\x00DY=1", err: ErrNUL},
		{name: "NUL in private value", in: sess + "X_SUPERVISE_EVENT=closed\x00\n", err: ErrNUL},
		{name: "invalid UTF-8", in: "STATUS=\xff", err: ErrInvalidUTF8},
		{name: "truncated rune", in: "STATUS=\xc3", err: ErrInvalidUTF8},
		{name: "4096 bytes", in: "STATUS=" + long(MaxDatagram-7), want: marker.Message{Status: long(MaxDatagram - 7), HasStatus: true}},
		{name: "4097 bytes", in: "STATUS=" + long(MaxDatagram-6), err: ErrTooLarge},
		{name: "no equals", in: "READY", err: ErrMalformed},
		{name: "no equals after valid", in: "READY=1\nfoo", err: ErrMalformed},
		{name: "empty key", in: "=1", err: ErrMalformed},
		{name: "lone CR line", in: "READY=1\n\r\n", err: ErrMalformed},
		{name: "many blank lines", in: strings.Repeat("\n", 4000) + "READY=1", want: marker.Message{Ready: true}},
		{name: "many unknown lines", in: strings.Repeat("A=\n", 1365), want: marker.Message{}},

		// Standard keys.
		{name: "READY=0 ignored", in: "READY=0", want: marker.Message{}},
		{name: "READY=0 does not undo READY=1", in: "READY=1\nREADY=0", want: marker.Message{Ready: true}},
		{name: "CRLF value ignored", in: "READY=1\r\nSTATUS=x\r\n", want: marker.Message{}},
		{name: "stopping", in: "STOPPING=1", want: marker.Message{Stopping: true}},
		{name: "watchdog", in: "WATCHDOG=1", want: marker.Message{Watchdog: true}},
		{name: "watchdog trigger", in: "WATCHDOG=trigger", want: marker.Message{WatchdogTrigger: true}},
		{name: "watchdog other", in: "WATCHDOG=2", want: marker.Message{}},
		{name: "status", in: "STATUS=working on it", want: marker.Message{Status: "working on it", HasStatus: true}},
		{name: "status empty", in: "STATUS=", want: marker.Message{HasStatus: true}},
		{name: "status with equals", in: "STATUS=a=b", want: marker.Message{Status: "a=b", HasStatus: true}},
		{name: "status tab", in: "STATUS=a\tb", want: marker.Message{Status: "a\tb", HasStatus: true}},
		{name: "status escape ignored", in: "STATUS=a\x1b[2Jb", want: marker.Message{}},
		{name: "status C1 ignored", in: "STATUS=a\u0085b", want: marker.Message{}},
		{name: "status last wins", in: "STATUS=a\nSTATUS=b", want: marker.Message{Status: "b", HasStatus: true}},
		{name: "watchdog usec", in: "WATCHDOG_USEC=30000000", want: marker.Message{WatchdogUSec: 30000000}},
		{name: "watchdog usec last wins", in: "WATCHDOG_USEC=5\nWATCHDOG_USEC=7", want: marker.Message{WatchdogUSec: 7}},
		{name: "watchdog usec 24h", in: "WATCHDOG_USEC=86400000000", want: marker.Message{WatchdogUSec: MaxUSec}},
		{name: "watchdog usec over 24h", in: "WATCHDOG_USEC=86400000001", want: marker.Message{}},
		{name: "watchdog usec 0", in: "WATCHDOG_USEC=0", want: marker.Message{}},
		{name: "watchdog usec -1", in: "WATCHDOG_USEC=-1", want: marker.Message{}},
		{name: "watchdog usec +5", in: "WATCHDOG_USEC=+5", want: marker.Message{}},
		{name: "watchdog usec 2^64", in: "WATCHDOG_USEC=18446744073709551616", want: marker.Message{}},
		{name: "watchdog usec text", in: "WATCHDOG_USEC=abc", want: marker.Message{}},
		{name: "watchdog usec empty", in: "WATCHDOG_USEC=", want: marker.Message{}},
		{name: "extend timeout", in: "EXTEND_TIMEOUT_USEC=5000000", want: marker.Message{ExtendTimeoutUSec: 5000000}},
		{name: "extend timeout huge", in: "EXTEND_TIMEOUT_USEC=99999999999999999999999", want: marker.Message{}},
		{name: "MAINPID ignored", in: "MAINPID=1", want: marker.Message{}},
		{name: "MAINPID with ready", in: "MAINPID=1\nREADY=1", want: marker.Message{Ready: true}},
		{name: "unknown keys", in: "ERRNO=2\nFDSTORE=1\nX_OTHER_THING=1\nX_SUPERVISE_FUTURE=1", want: marker.Message{}},
		{name: "barrier", in: "BARRIER=1\n", want: marker.Message{Barrier: true}},
		{name: "barrier other value", in: "BARRIER=0\nREADY=1", want: marker.Message{Ready: true}},
		{name: "barrier with ready", in: "BARRIER=1\nREADY=1", err: ErrProtocol},
		{name: "barrier with MAINPID", in: "MAINPID=3\nBARRIER=1", err: ErrProtocol},
		{name: "barrier twice", in: "BARRIER=1\nBARRIER=1", err: ErrProtocol},

		// Private keys.
		{
			name: "turn-begin",
			in:   sess + "X_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_TURN=t1\nX_SUPERVISE_PROMPT=fix the build",
			want: marker.Message{Session: "s1", Event: marker.EventTurnBegin, Turn: "t1", Prompt: "fix the build"},
		},
		{
			name: "turn-end completed",
			in:   sess + "X_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_TURN=t1\nX_SUPERVISE_OUTCOME=completed",
			want: marker.Message{Session: "s1", Event: marker.EventTurnEnd, Turn: "t1", Outcome: marker.OutcomeCompleted},
		},
		{name: "turn-end failed", in: sess + "X_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_OUTCOME=failed", want: marker.Message{Session: "s1", Event: marker.EventTurnEnd, Outcome: marker.OutcomeFailed}},
		{name: "turn-end cancelled", in: sess + "X_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_OUTCOME=cancelled", want: marker.Message{Session: "s1", Event: marker.EventTurnEnd, Outcome: marker.OutcomeCancelled}},
		{name: "waiting", in: sess + "X_SUPERVISE_EVENT=waiting\nX_SUPERVISE_TURN=t1", want: marker.Message{Session: "s1", Event: marker.EventWaiting, Turn: "t1", Wait: marker.WaitInput}},
		{name: "waiting for approval", in: sess + "X_SUPERVISE_EVENT=waiting\nX_SUPERVISE_WAIT=approval", want: marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitApproval}},
		{name: "waiting for reconnect", in: sess + "X_SUPERVISE_EVENT=waiting\nX_SUPERVISE_WAIT=reconnect", want: marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitReconnect}},
		{name: "unknown wait", in: sess + "X_SUPERVISE_EVENT=waiting\nX_SUPERVISE_WAIT=coffee", err: ErrProtocol},
		{name: "wait given twice", in: sess + "X_SUPERVISE_EVENT=waiting\nX_SUPERVISE_WAIT=input\nX_SUPERVISE_WAIT=reconnect", err: ErrMalformed},
		{
			name: "phase tool",
			in:   sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_TOOL=bash",
			want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "bash"},
		},
		{name: "phase model", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=model", want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseModel}},
		{name: "phase idle", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=idle", want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseIdle}},
		{name: "resumed", in: sess + "X_SUPERVISE_EVENT=resumed\nX_SUPERVISE_TURN=t1", want: marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"}},
		{name: "closed", in: sess + "X_SUPERVISE_EVENT=closed", want: marker.Message{Session: "s1", Event: marker.EventClosed}},
		{name: "keys in any order", in: "X_SUPERVISE_EVENT=closed\nX_SUPERVISE_SESSION=s1", want: marker.Message{Session: "s1", Event: marker.EventClosed}},
		{name: "session heartbeat", in: "WATCHDOG=1\n" + sess, want: marker.Message{Watchdog: true, Session: "s1", Event: marker.EventHeartbeat}},
		{name: "explicit heartbeat", in: sess + "X_SUPERVISE_EVENT=heartbeat", want: marker.Message{Session: "s1", Event: marker.EventHeartbeat}},
		{name: "session without event", in: sess + "STATUS=x", want: marker.Message{Session: "s1", Status: "x", HasStatus: true}},
		{name: "trigger is not a heartbeat", in: "WATCHDOG=trigger\n" + sess, want: marker.Message{WatchdogTrigger: true, Session: "s1"}},
		{name: "unicode id", in: "X_SUPERVISE_SESSION=séssion-€", want: marker.Message{Session: "séssion-€"}},
		{name: "256-byte id", in: "X_SUPERVISE_SESSION=" + long(MaxIDLen), want: marker.Message{Session: long(MaxIDLen)}},
		{
			name: "long prompt cut",
			in:   sess + "X_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_PROMPT=" + long(2000),
			want: marker.Message{Session: "s1", Event: marker.EventTurnBegin, Prompt: long(MaxPromptLen)},
		},
		{
			name: "long prompt cut at rune",
			in:   sess + "X_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_PROMPT=" + strings.Repeat("€", 400),
			want: marker.Message{Session: "s1", Event: marker.EventTurnBegin, Prompt: strings.Repeat("€", 341)},
		},
		{
			name: "tool detail",
			in:   sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_TOOL=Bash\nX_SUPERVISE_DETAIL=npm test -- --grep 'a b'",
			want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash", Detail: "npm test -- --grep 'a b'"},
		},
		{
			name: "detail at the bound kept whole",
			in:   sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=" + long(MaxDetailLen),
			want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Detail: long(MaxDetailLen)},
		},
		{
			name: "long detail cut with an ellipsis",
			in:   sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=" + long(MaxDetailLen+1),
			want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Detail: long(MaxDetailLen-3) + "…"},
		},
		{
			name: "long detail cut at a rune",
			in:   sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=" + strings.Repeat("€", 200),
			want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Detail: strings.Repeat("€", 169) + "…"},
		},
		{name: "empty detail is none", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=",
			want: marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool}},
		{name: "detail without tool phase", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=model\nX_SUPERVISE_DETAIL=x", err: ErrProtocol},
		{name: "detail on turn-begin", in: sess + "X_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_DETAIL=x", err: ErrProtocol},
		{name: "tab in detail", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=a\tb", err: ErrProtocol},
		{name: "CR in detail", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=a\r", err: ErrProtocol},
		{name: "escape in detail", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=\x1b[31mred", err: ErrProtocol},
		{name: "duplicate detail", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_DETAIL=a\nX_SUPERVISE_DETAIL=a", err: ErrMalformed},
		{name: "effect", in: sess + "X_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=write:src/a.go",
			want: marker.Message{Session: "s1", Event: marker.EventEffect, Effect: "write:src/a.go"}},
		{name: "effect key at the bound", in: sess + "X_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=" + long(MaxEffectLen),
			want: marker.Message{Session: "s1", Event: marker.EventEffect, Effect: long(MaxEffectLen)}},
		{name: "effect key over the bound", in: sess + "X_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=" + long(MaxEffectLen+1), err: ErrProtocol},
		{name: "effect without key", in: sess + "X_SUPERVISE_EVENT=effect", err: ErrProtocol},
		{name: "effect with empty key", in: sess + "X_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=", err: ErrProtocol},
		{name: "effect key with a tab", in: sess + "X_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=a\tb", err: ErrProtocol},
		{name: "effect key on another event", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=model\nX_SUPERVISE_EFFECT=k", err: ErrProtocol},
		{name: "duplicate effect key", in: sess + "X_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=a\nX_SUPERVISE_EFFECT=b", err: ErrMalformed},
		{name: "event without session", in: "X_SUPERVISE_EVENT=turn-begin", err: ErrProtocol},
		{name: "turn without session", in: "X_SUPERVISE_TURN=t1", err: ErrProtocol},
		{name: "unknown event", in: sess + "X_SUPERVISE_EVENT=bogus", err: ErrProtocol},
		{name: "empty event", in: sess + "X_SUPERVISE_EVENT=", err: ErrProtocol},
		{name: "CRLF event", in: "X_SUPERVISE_SESSION=s1\r\nX_SUPERVISE_EVENT=closed\r\n", err: ErrProtocol},
		{name: "turn-end without outcome", in: sess + "X_SUPERVISE_EVENT=turn-end", err: ErrProtocol},
		{name: "unknown outcome", in: sess + "X_SUPERVISE_EVENT=turn-end\nX_SUPERVISE_OUTCOME=ok", err: ErrProtocol},
		{name: "phase without phase", in: sess + "X_SUPERVISE_EVENT=phase", err: ErrProtocol},
		{name: "unknown phase", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=sleep", err: ErrProtocol},
		{name: "empty session", in: "X_SUPERVISE_SESSION=\nX_SUPERVISE_EVENT=closed", err: ErrProtocol},
		{name: "257-byte session", in: "X_SUPERVISE_SESSION=" + long(MaxIDLen+1), err: ErrProtocol},
		{name: "control in session", in: "X_SUPERVISE_SESSION=s\x01", err: ErrProtocol},
		{name: "tab in session", in: "X_SUPERVISE_SESSION=s\t1", err: ErrProtocol},
		{name: "C1 in session", in: "X_SUPERVISE_SESSION=s\u00851", err: ErrProtocol},
		{name: "empty turn", in: sess + "X_SUPERVISE_EVENT=waiting\nX_SUPERVISE_TURN=", err: ErrProtocol},
		{name: "bad tool", in: sess + "X_SUPERVISE_EVENT=phase\nX_SUPERVISE_PHASE=tool\nX_SUPERVISE_TOOL=" + long(300), err: ErrProtocol},
		{name: "duplicate session", in: sess + sess + "X_SUPERVISE_EVENT=closed", err: ErrMalformed},
		{name: "duplicate event", in: sess + "X_SUPERVISE_EVENT=closed\nX_SUPERVISE_EVENT=closed", err: ErrMalformed},
		{name: "duplicate turn", in: sess + "X_SUPERVISE_TURN=a\nX_SUPERVISE_TURN=b", err: ErrMalformed},
		{name: "duplicate prompt", in: sess + "X_SUPERVISE_PROMPT=a\nX_SUPERVISE_PROMPT=a", err: ErrMalformed},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.in))
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("%s: Parse(%.60q) error = %v, want %v", tt.name, tt.in, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Parse(%.60q) error = %v", tt.name, tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: Parse(%.60q)\n got %+v\nwant %+v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestIsHeartbeatOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want bool
	}{
		{"WATCHDOG=1", true},
		{"WATCHDOG=1\nX_SUPERVISE_SESSION=s1", true},
		{"X_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=heartbeat", true},
		{"WATCHDOG=1\nMAINPID=7", true},
		{"WATCHDOG=1\nSTATUS=x", false},
		{"WATCHDOG=1\nREADY=1", false},
		{"WATCHDOG=1\nWATCHDOG_USEC=5", false},
		{"WATCHDOG=trigger", false},
		{"WATCHDOG=1\nX_SUPERVISE_SESSION=s1\nX_SUPERVISE_TURN=t1", false},
		{"WATCHDOG=1\nX_SUPERVISE_SESSION=s1\nX_SUPERVISE_EVENT=closed", false},
		{"READY=1", false},
		{"X_SUPERVISE_SESSION=s1", false},
	}
	for _, tt := range tests {
		m, err := Parse([]byte(tt.in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if got := m.IsHeartbeatOnly(); got != tt.want {
			t.Errorf("Parse(%q).IsHeartbeatOnly() = %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestParseHeartbeatAllocs checks the server's hot path: a stream of
// heartbeats, with or without a session, is parsed without allocating.
func TestParseHeartbeatAllocs(t *testing.T) {
	for _, in := range []string{"WATCHDOG=1", "WATCHDOG=1\nX_SUPERVISE_SESSION=s1\n"} {
		var p parser
		b := []byte(in)
		if _, err := p.parse(b); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(100, func() { p.parse(b) }); n != 0 {
			t.Errorf("parse(%q) allocates %v times, want 0", in, n)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, in string }{
		{"heartbeat", "WATCHDOG=1"},
		{"session-heartbeat", "WATCHDOG=1\nX_SUPERVISE_SESSION=0196b4a4-6f0e-7cc0-a2c5-3f6d2c8e9b10"},
		{"turn-begin", "X_SUPERVISE_SESSION=0196b4a4-6f0e-7cc0-a2c5-3f6d2c8e9b10\nX_SUPERVISE_EVENT=turn-begin\n" +
			"X_SUPERVISE_TURN=42\nX_SUPERVISE_PROMPT=" + strings.Repeat("refactor the parser ", 20)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := []byte(bc.in)
			var p parser
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := p.parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// EffectKey keeps a short key as it is, flattens one to a line, and
// shortens a long one deterministically, keeping long keys that differ
// only at their ends apart.
func TestEffectKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	for _, c := range []struct{ in, want string }{
		{"write:src/a.go", "write:src/a.go"},
		{"  two\nlines\t", "two lines"},
		{"\n", ""},
	} {
		if got := EffectKey(c.in); got != c.want {
			t.Errorf("EffectKey(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	a, b := EffectKey(long+"a"), EffectKey(long+"b")
	if a == b || len(a) > MaxEffectLen || len(b) > MaxEffectLen || a != EffectKey(long+"a") {
		t.Errorf("long keys: %q (%d bytes), %q (%d bytes)", a, len(a), b, len(b))
	}
	if _, err := Parse([]byte("X_SUPERVISE_SESSION=s\nX_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=" + a)); err != nil {
		t.Errorf("a shortened key does not parse: %v", err)
	}
}
