package chaos

import (
	"errors"
	"fmt"
	"testing"
)

// The run flags are read as `supervise run` reads them: its default, the
// SUPERVISE_<FLAG> overlay from the environment supervise gets (the command
// line wins), and its checks; --resume off, from either, is refused.
func TestResumeLimit(t *testing.T) {
	for _, c := range []struct {
		flags []string
		env   []string
		want  int // -1: a usage error
	}{
		{nil, nil, 1},
		{[]string{"--resume-limit=3"}, nil, 3},
		{[]string{"--resume-limit", "2"}, nil, 2},
		{[]string{"-resume-limit=0"}, nil, 0},
		{nil, []string{"SUPERVISE_RESUME_LIMIT=4"}, 4},
		{nil, []string{"SUPERVISE_RESUME_LIMIT=4", "SUPERVISE_RESUME_LIMIT=5"}, 5},
		{[]string{"--resume-limit=2"}, []string{"SUPERVISE_RESUME_LIMIT=4"}, 2},
		{[]string{"--resume-limit=-1"}, nil, -1},
		{[]string{"--resume-limit=x"}, nil, -1},
		{nil, []string{"SUPERVISE_RESUME_LIMIT=x"}, -1},
		{[]string{"--resume=off"}, nil, -1},
		{[]string{"--resume", "off"}, nil, -1},
		{nil, []string{"SUPERVISE_RESUME=off"}, -1},
		{[]string{"--resume=auto"}, []string{"SUPERVISE_RESUME=off"}, 1},
		{[]string{"--restart=bad"}, nil, -1},
		{[]string{"--bogus"}, nil, -1},
		{[]string{"agent"}, nil, -1},
	} {
		t.Run(fmt.Sprint(c.flags, c.env), func(t *testing.T) {
			got, err := resumeLimit(Config{Argv: []string{"agent"}, StateDir: t.TempDir(), RunFlags: c.flags}, c.env)
			switch {
			case c.want < 0 && !errors.Is(err, ErrUsage):
				t.Errorf("got %d, %v; want a usage error", got, err)
			case c.want >= 0 && (err != nil || got != c.want):
				t.Errorf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
}
