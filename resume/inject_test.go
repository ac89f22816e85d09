package resume

import (
	"errors"
	"testing"
)

// TestExecArgvRefusesOptionLikeSession: a session id that begins with '-'
// would land in the resumed agent's argv as an option of its own
// ("codex exec resume --evil"); ExecArgv refuses it even though the notify
// parser already does (a journal written before that check may hold one).
func TestExecArgvRefusesOptionLikeSession(t *testing.T) {
	for _, tpl := range []string{"codex exec resume {session}", "claude -p -r {session} {message}", "gemini -r {session} -p {message}"} {
		words, err := ParseTemplate(tpl)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"--evil", "-r", "-"} {
			argv, err := ExecArgv(words, Item{Session: id, Message: "continue"})
			if !errors.Is(err, ErrUnsafeSession) {
				t.Errorf("%q with session %q: argv %q, err %v; want ErrUnsafeSession", tpl, id, argv, err)
			}
		}
		if _, err := ExecArgv(words, Item{Session: "a-b--c", Message: "continue"}); err != nil {
			t.Errorf("%q: a dash inside the id refused: %v", tpl, err)
		}
	}
}
