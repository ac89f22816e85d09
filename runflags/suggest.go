package runflags

import (
	"flag"

	"github.com/supervise-dev/supervise/internal/cliflags"
)

// The "did you mean" line for a mistyped flag or command is cliflags'.

// Nearest is the candidate nearest to name, "" when none is near.
func Nearest(name string, candidates []string) string { return cliflags.Nearest(name, candidates) }

// DidYouMean is the line that suggests the flag meant by an unknown one in
// args, "" when there is none to suggest.
func DidYouMean(fs *flag.FlagSet, args []string) string { return cliflags.DidYouMean(fs, args) }
