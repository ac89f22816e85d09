package runflags

import (
	"flag"
	"time"

	"github.com/supervise-dev/supervise/internal/cliflags"
)

// Duration flags are cliflags' (the leaf every supervise command, and the
// supervise-notify binary, parses with): their refused values are
// reported by Parse in one line that says what to type.

// parseDuration is time.ParseDuration with errors that say what to type.
func parseDuration(s string) (time.Duration, error) { return cliflags.ParseDuration(s) }

// durationVar defines a duration flag (cliflags.DurationVar).
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	cliflags.DurationVar(fs, p, name, value, usage)
}
