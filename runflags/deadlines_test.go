package runflags

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/supervisor"
)

func TestParsePhaseTimeout(t *testing.T) {
	for _, c := range []struct {
		in     string
		want   supervisor.Deadlines
		errHas string
	}{
		{in: "", want: supervisor.Deadlines{}},
		{in: "model=10m,tool=30s", want: supervisor.Deadlines{Model: 10 * time.Minute, Tool: 30 * time.Second}},
		{in: "tool=5m", want: supervisor.Deadlines{Tool: 5 * time.Minute}},
		{in: " model=1h , tool=0 ", want: supervisor.Deadlines{Model: time.Hour}},
		{in: "model", errHas: "not PHASE=DURATION"},
		{in: "idle=5m", errHas: "unknown phase \"idle\""},
		{in: "model=5", errHas: "phase model: 5: a duration needs a unit, e.g. 10s or 500ms"},
		{in: "model=soon", errHas: "phase model: soon: not a duration"},
		{in: "model=-1s", errHas: "negative"},
		{in: "tool=1m,tool=2m", errHas: "given twice"},
	} {
		var got supervisor.Deadlines
		err := parsePhaseTimeout(c.in, &got)
		switch {
		case c.errHas != "" && (err == nil || !strings.Contains(err.Error(), c.errHas)):
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.errHas)
		case c.errHas == "" && err != nil:
			t.Errorf("%q: %v", c.in, err)
		case c.errHas == "" && got != c.want:
			t.Errorf("%q: %+v, want %+v", c.in, got, c.want)
		}
	}
}
