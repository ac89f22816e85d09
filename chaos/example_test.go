package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/supervise-dev/supervise/chaos"
)

// Kill the shipped Python example agent three times at the start of its
// turns: the first interrupted turn must be resumed and complete; the
// second is resumed and killed again, and must be parked. In your own
// agent's `go test`, put your agent's command line in Argv; chaos.Binary
// finds (or builds) the supervise binary.
func ExampleRun() {
	work, err := os.MkdirTemp("", "chaos-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(work)

	rep, err := chaos.Run(context.Background(), chaos.Config{
		// The agent runs turns on its own and resumes what it is owed.
		Argv:     []string{"python3", "../examples/python/agent.py", "loop", "demo", "0", filepath.Join(work, "agent.out")},
		Kills:    3,
		At:       chaos.TurnBegin,
		Seed:     1,
		StateDir: filepath.Join(work, "state"),
	})
	if err != nil {
		fmt.Println("could not run:", err)
		return
	}
	for _, k := range rep.Kills {
		fmt.Printf("kill %d at %s: %s, resumed %v, completed %v, parked %v\n",
			k.Kill, k.At, k.Decision, k.Resumed, k.Completed, k.Parked)
	}
	fmt.Println("ok:", rep.OK, rep.Failures)
	// Output:
	// kill 1 at turn-begin: resume_pending, resumed true, completed true, parked false
	// kill 2 at turn-begin: resume_pending, resumed true, completed false, parked false
	// kill 3 at resumed: parked, resumed false, completed false, parked true
	// ok: true []
}
