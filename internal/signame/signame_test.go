package signame

import (
	"syscall"
	"testing"
)

func TestName(t *testing.T) {
	for sig, want := range map[int]string{0: "", 9: "SIGKILL", 10: "", 15: "SIGTERM", 16: "", -1: ""} {
		if got := Name(sig); got != want {
			t.Errorf("Name(%d) = %q, want %q", sig, got, want)
		}
	}
	// Where the table names a signal, it names it as Linux does.
	for sig := range table {
		if table[sig] != "" && Of(syscall.Signal(sig)) == "" {
			t.Errorf("Of(%d) names nothing", sig)
		}
	}
}
