package notify_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
)

// Example shows both sides: a supervisor serving the socket and an agent
// reporting a turn, waiting on barriers until each marker is handled.
func Example() {
	dir, err := os.MkdirTemp("", "notify-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Supervisor side.
	srv, err := notify.Listen(notify.Config{Dir: filepath.Join(dir, "run")})
	if err != nil {
		log.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(func(m marker.Message) {
			if m.Fd != nil {
				// A barrier: everything before it is handled (a real
				// supervisor commits its journal first).
				notify.Ack(m.Fd)
				return
			}
			fmt.Printf("%s session=%s turn=%s\n", m.Event, m.Session, m.Turn)
		})
	}()

	// Agent side; a real agent uses notify.FromEnv.
	c := &notify.Client{Socket: srv.Path()}
	ctx := context.Background()
	if err := c.TurnBegin(ctx, "s1", "t1", "fix the build"); err != nil {
		log.Fatal(err)
	}
	if err := c.Barrier(ctx, time.Second); err != nil {
		log.Fatal(err)
	}
	if err := c.TurnEnd(ctx, "s1", "t1", marker.OutcomeCompleted); err != nil {
		log.Fatal(err)
	}
	if err := c.Barrier(ctx, time.Second); err != nil {
		log.Fatal(err)
	}

	srv.Close()
	if err := <-served; err != nil {
		log.Fatal(err)
	}
	// Output:
	// turn-begin session=s1 turn=t1
	// turn-end session=s1 turn=t1
}
