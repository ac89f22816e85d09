// Command supervise-notify is `supervise notify` as a binary of its own,
// for agent hooks: `supervise-notify EVENT [flags]` takes the same events,
// flags, environment and exit codes as `supervise notify EVENT [flags]`
// (cmd/internal/notifycmd is both). It links only the notify client and the
// hook mapping, not the run loop, net/http, the model-API proxy or the
// metrics library, whose package initialisation every `supervise`
// process pays before main: a hook that runs it per call takes about three
// quarters of the time `supervise notify` takes (docs/performance.md, the
// hook rows). The shipped hook configurations in examples/ run
// `supervise-notify hook`.
//
// Install it beside supervise:
//
//	CGO_ENABLED=0 go build -o /usr/local/bin/supervise-notify ./cmd/supervise-notify
package main

import (
	"context"
	"os"

	"github.com/supervise-dev/supervise/cmd/internal/notifycmd"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "notify" {
		args = args[1:] // supervise-notify notify EVENT: the word of `supervise notify`, allowed
	}
	os.Exit(notifycmd.Run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
}
