package cliflags

import (
	"errors"
	"flag"
	"strconv"
	"strings"
	"time"
)

// errNoUnit and errNotDuration explain a bad duration: Go's own parse
// error ("time: missing unit in duration") does not say what to type.
var (
	errNoUnit      = errors.New("a duration needs a unit, e.g. 10s or 500ms")
	errNotDuration = errors.New("not a duration: a number with a unit, e.g. 10s, 500ms or 1m30s")
)

// ParseDuration is time.ParseDuration with errors that say what to type.
func ParseDuration(s string) (time.Duration, error) { return parseDuration(s) }

// parseDuration is time.ParseDuration with errors that say what to type.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil {
		return d, nil
	}
	if _, ferr := strconv.ParseFloat(strings.TrimSpace(s), 64); ferr == nil {
		return 0, errNoUnit
	}
	return 0, errNotDuration
}

// durationValue is a duration flag whose errors say what to type, and
// which remembers the value it refused, so that Parse can name the flag
// and the value in one line.
type durationValue struct {
	d   *time.Duration
	bad string
	err error
}

func (v *durationValue) String() string {
	if v == nil || v.d == nil {
		return time.Duration(0).String()
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		v.bad, v.err = s, err
		return err
	}
	*v.d, v.bad, v.err = d, "", nil
	return nil
}

// Get makes it a flag.Getter, as the flag package's own duration is.
func (v *durationValue) Get() any { return *v.d }

// durationVar defines a duration flag on fs. The backquoted word in its
// help is the flag package's placeholder name: "-stop-timeout duration".
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(&durationValue{d: p}, name, usage+" (a `duration` with a unit: 10s, 1m30s)")
}

// DurationVar defines a duration flag whose refused value Parse reports
// in one line that says what to type, for the other subcommands.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	durationVar(fs, p, name, value, usage)
}

// refusedDuration is the line that names a duration flag whose value the
// last parse refused ("--stop-timeout 10: a duration needs a unit, ..."),
// "" when none was.
func refusedDuration(fs *flag.FlagSet) string {
	line := ""
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := f.Value.(*durationValue); ok && v.err != nil && line == "" {
			line = "--" + f.Name + " " + v.bad + ": " + v.err.Error()
		}
	})
	return line
}
