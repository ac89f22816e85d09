package resume_test

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// After a dirty death, a session mid-turn is owed one resume; at its
// second consecutive death mid-turn it is parked. The pending resume goes
// to the next child in the resume file, which the agent reads back.
func Example() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := record.Session{ID: "s1", State: record.InTurn, Turn: "t1", Phase: "tool", Tool: "Bash",
		Prompt: "fix the tests", TurnStarted: now.Add(-time.Minute)}
	death := resume.Death{Reason: record.ReasonSignal, Signal: 9, Run: 1, At: now}

	d := resume.Decide([]record.Session{s}, death, now, resume.DefaultPolicy())[0]
	fmt.Println("first death:", d.Action, d.Session.State, "crash count", d.Session.CrashCount)

	path := filepath.Join(os.TempDir(), fmt.Sprintf("resume-example-%d.json", os.Getpid()))
	defer os.Remove(path)
	if err := resume.WriteFile(path, resume.Items([]record.Session{d.Session})); err != nil {
		fmt.Println(err)
		return
	}
	items, err := resume.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("resume file: session %s, turn %s, attempt %d\n", items[0].Session, items[0].Turn, items[0].Attempt)

	again := d.Session
	again.State = record.InTurn // the agent took the resume and died again
	d = resume.Decide([]record.Session{again}, resume.Death{Reason: record.ReasonSignal, Signal: 9, Run: 2, At: now}, now, resume.DefaultPolicy())[0]
	fmt.Println("second death:", d.Action, d.Session.State, "crash count", d.Session.CrashCount)
	// Output:
	// first death: resume resume_pending crash count 1
	// resume file: session s1, turn t1, attempt 1
	// second death: park parked crash count 2
}
