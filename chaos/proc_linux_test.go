package chaos

import "testing"

// A hook in flight is the notify client under either name: `supervise
// notify ...` or `supervise-notify ...`, the command the shipped hooks run.
func TestIsNotifyClient(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"supervise", "notify", "hook"}, true},
		{[]string{"/usr/local/bin/supervise", "notify", "phase", "--session", "s"}, true},
		{[]string{"supervise-notify", "hook"}, true},
		{[]string{"/tmp/bin/supervise-notify", "turn-begin", "--session", "s"}, true},
		{[]string{"supervise-notify"}, true},
		{[]string{"supervise", "run", "--", "agent"}, false},
		{[]string{"supervise"}, false},
		{[]string{"/bin/sh", "-c", "supervise-notify hook"}, false},
		{[]string{"notsupervise", "notify"}, false},
		{nil, false},
	} {
		if got := isNotifyClient(c.args); got != c.want {
			t.Errorf("isNotifyClient(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}
