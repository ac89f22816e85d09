package runflags

import (
	"fmt"
	"strings"

	"github.com/supervise-dev/supervise/supervisor"
)

// parsePhaseTimeout parses --phase-timeout: "model=D,tool=D", either part
// optional, each D a Go duration (0 = off). "" sets nothing.
func parsePhaseTimeout(v string, d *supervisor.Deadlines) error {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%q is not PHASE=DURATION (e.g. model=10m,tool=30m)", part)
		}
		if seen[k] {
			return fmt.Errorf("phase %q given twice", k)
		}
		seen[k] = true
		dur, err := parseDuration(val)
		if err != nil {
			return fmt.Errorf("phase %s: %s: %w", k, val, err)
		}
		if dur < 0 {
			return fmt.Errorf("phase %s: the deadline must not be negative", k)
		}
		switch k {
		case "model":
			d.Model = dur
		case "tool":
			d.Tool = dur
		default:
			return fmt.Errorf("unknown phase %q: the phases with deadlines are model and tool", k)
		}
	}
	return nil
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	if v == "" {
		return fmt.Errorf("empty file name")
	}
	*l = append(*l, v)
	return nil
}
