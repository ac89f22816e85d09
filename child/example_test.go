package child_test

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/supervise-dev/supervise/child"
)

// A Reaper starts a child in its own process group and owns every wait on
// it; Exit tells how it ended, with the shell's 128+N convention for a
// signal.
func Example() {
	r, err := child.NewReaper(slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	for _, script := range []string{"exit 3", "kill -KILL $$"} {
		p, err := r.Start(child.Spec{Args: []string{"sh", "-c", script}})
		if err != nil {
			fmt.Println(err)
			return
		}
		<-p.Done()
		e := p.Exit()
		fmt.Printf("%s: code %d, clean %v: %s\n", script, e.Code, e.ExecErr == nil && e.Signal == 0 && e.Code == 0, e)
	}
	// A binary that cannot be started is an error, and its exit the one a
	// shell would give (127: not found), so a missing agent never hot-loops.
	if _, err := r.Start(child.Spec{Args: []string{"/nonexistent/agent"}}); err != nil {
		fmt.Println("missing binary: code", child.FailedExit(err, time.Now()).Code)
	}
	// Output:
	// exit 3: code 3, clean false: exited with code 3
	// kill -KILL $$: code 137, clean false: killed by signal 9 (SIGKILL)
	// missing binary: code 127
}
