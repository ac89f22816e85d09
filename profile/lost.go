package profile

import "strings"

// A one-shot CLI asked to resume a conversation it does not have exits at
// once, saying so (Claude Code writes its transcript lazily and has none
// for a conversation killed in its first moments; Gemini CLI has none
// after an API error ended its first request; Codex has no rollout for a
// thread it never started). The runner reads the words here and hands the
// machine what they mean (machine.Exited.Lost); the machine decides.

// lostWords are what the pinned CLIs say when asked to resume a
// conversation they do not have (lower case).
var lostWords = []string{
	"no conversation found",      // Claude Code 2.1: "No conversation found with session ID: ..."
	"no previous sessions found", // Gemini CLI 0.61: "Error resuming session: No previous sessions found for this project."
	"invalid session identifier", // Gemini CLI 0.61 in a project with earlier sessions: `Error resuming session: Invalid session identifier "ID".` (exit 42), a proxy-... id included
	"no rollout found",           // Codex 0.171: "thread/resume failed: no rollout found for thread id ..."
	"conversation not found",
	"session not found",
}

// LostConversation reports whether line, an agent's last words, says that
// the conversation it was asked to resume does not exist.
func LostConversation(line string) bool {
	l := strings.ToLower(line)
	for _, w := range lostWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}
