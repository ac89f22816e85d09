package profile

import "testing"

// What each pinned CLI says when asked to resume a conversation it does
// not have, and lines that are not that (issue 44, item 6: Gemini CLI 0.61
// in a project with earlier sessions says "Invalid session identifier",
// exit 42, also for the proxy-... ids it never had).
func TestLostConversation(t *testing.T) {
	for _, c := range []struct {
		line string
		lost bool
	}{
		{"No conversation found with session ID: 3f1c0b2a-9d4e-4c55-8a7e-0c9b6f1d2e3a", true},
		{"Error resuming session: No previous sessions found for this project.", true},
		{`Error resuming session: Invalid session identifier "3f1c0b2a-9d4e-4c55-8a7e-0c9b6f1d2e3a".`, true},
		{`Error resuming session: Invalid session identifier "proxy-1a2b3c4d".`, true},
		{"thread/resume failed: no rollout found for thread id 019a", true},
		{"Error: something", false},
		{"API Error: Request rejected (429)", false},
		{"TerminalQuotaError: You have exhausted your daily quota on this model.", false},
	} {
		if got := LostConversation(c.line); got != c.lost {
			t.Errorf("LostConversation(%q) = %v, want %v", c.line, got, c.lost)
		}
	}
	tail := []byte("Loaded cached credentials.\nError resuming session: Invalid session identifier \"proxy-1a2b3c4d\".\n")
	if l := TellingLine(tail, Gemini, LostConversation); l != `Error resuming session: Invalid session identifier "proxy-1a2b3c4d".` {
		t.Errorf("TellingLine = %q, want Gemini's words of the lost conversation", l)
	}
}
